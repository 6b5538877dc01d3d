"""QuietLinuxDriver's input thread on a real pseudo-terminal: keys arrive as with Textual's
driver (a lone Esc too, after the parser's timeout), it sleeps between keys, and it stops
at once when the driver disables input."""

from __future__ import annotations

import asyncio
import os
import pty
import queue
import selectors
import threading
import time
import tty

import pytest
from textual import events
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

from sparktop.ui.app import SparktopApp
from sparktop.ui.driver import QuietLinuxDriver

WAIT_S = 20.0
"""Generous: a loaded 2-core CI machine may not run the thread for a while."""


@pytest.fixture
def driver_on_pty():
    master, slave = pty.openpty()
    tty.setraw(slave)  # as the driver's application mode sets it: keys, not lines
    loop = asyncio.new_event_loop()  # a driver is made inside a running app's loop

    async def made() -> QuietLinuxDriver:
        return QuietLinuxDriver(App())

    driver = loop.run_until_complete(made())
    driver.fileno = slave
    received: queue.Queue[Message] = queue.Queue()
    driver.process_message = received.put  # type: ignore[method-assign]
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    thread.start()
    try:
        yield driver, master, received, thread
    finally:
        driver.exit_event.set()
        thread.join(WAIT_S)
        driver.close()
        os.close(master)
        os.close(slave)
        loop.close()


def _next_key(received: queue.Queue[Message]) -> str:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        message = received.get(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(message, events.Key):
            return message.key
    raise AssertionError("no key arrived")


def test_keys_and_a_lone_escape_arrive(driver_on_pty) -> None:
    _driver, master, received, _thread = driver_on_pty
    os.write(master, b"q")
    assert _next_key(received) == "q"
    # A lone Esc is a key only once the parser's timeout passes with nothing after it:
    # the thread must wake for that without further input.
    os.write(master, b"\x1b")
    assert _next_key(received) == "escape"
    os.write(master, b"\x1b[A")
    assert _next_key(received) == "up"


def test_it_sleeps_between_keys_and_stops_when_told(driver_on_pty, monkeypatch) -> None:
    driver, master, received, thread = driver_on_pty
    returns: list[float] = []
    select = selectors.SelectSelector.select

    def counted(self, timeout=None):  # type: ignore[no-untyped-def]
        try:
            return select(self, timeout)
        finally:
            returns.append(time.monotonic())

    monkeypatch.setattr(selectors.SelectSelector, "select", counted)
    # The thread's current select began before the patch: the key ends it.
    os.write(master, b"x")
    assert _next_key(received) == "x"
    # Idle: Textual's driver would come out of its select ten times a second here.
    since = time.monotonic()
    threading.Event().wait(0.5)
    assert [t for t in returns if t > since] == []
    driver.exit_event.set()
    thread.join(WAIT_S)
    assert not thread.is_alive()


def test_the_monitor_runs_on_it() -> None:
    chosen = SparktopApp.get_driver_class(App.__new__(SparktopApp))
    assert chosen is QuietLinuxDriver
    assert issubclass(chosen, LinuxDriver)


def test_a_stop_after_close_writes_nowhere(driver_on_pty) -> None:
    driver, _master, _received, thread = driver_on_pty
    driver.exit_event.set()
    thread.join(WAIT_S)
    driver.close()
    reused_read, reused_write = os.pipe()  # may take the closed wake pipe's descriptors
    try:
        driver.exit_event.clear()
        driver.exit_event.set()
        os.set_blocking(reused_read, False)
        with pytest.raises(BlockingIOError):
            os.read(reused_read, 1)
    finally:
        os.close(reused_read)
        os.close(reused_write)
