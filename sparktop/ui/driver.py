"""QuietLinuxDriver: Textual's Linux driver, its input thread asleep until a key arrives.

Textual's input thread wakes ten times a second (``select(0.1)``) to see whether it should
stop and to time out a lone Esc; in a monitor that otherwise wakes once a second per node,
those wake-ups were about a seventh of its CPU (1.0 ms of 7 a second at 4 nodes,
``benchmarks/bench_limit.py``). Here the thread sleeps until the terminal has input or the
driver stops (a byte on a pipe of its own wakes it), and polls at Textual's 0.1 s only while
the key parser waits to time out a sequence (a lone Esc), so keys arrive exactly as before.
"""

from __future__ import annotations

import contextlib
import os
import selectors
from codecs import getincrementaldecoder
from threading import Event
from typing import Any

from textual._loop import loop_last
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

PARSER_TICK_S = 0.1
"""Textual's poll while a key sequence may still time out (its ``select(0.1)``)."""


class _WakingEvent(Event):
    """An Event whose ``set`` also writes a byte to ``wake_fd`` (the input thread's
    selector watches its other end)."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self.wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        with contextlib.suppress(OSError):
            os.write(self.wake_fd, b"x")


class QuietLinuxDriver(LinuxDriver):
    """:class:`~textual.drivers.linux_driver.LinuxDriver` whose input thread blocks until
    there is input, the driver stops, or a pending key sequence must time out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._waking = self.exit_event = _WakingEvent(self._wake_write)

    def close(self) -> None:
        super().close()
        self._waking.wake_fd = -1  # a late stop must not write to a reused descriptor
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_read = self._wake_write = -1  # closing twice closes nothing else

    def _drain_wake(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._wake_read, 512):
                pass

    def run_input_thread(self) -> None:
        """Textual's loop (``LinuxDriver.run_input_thread``) with the wake pipe beside the
        terminal and no timeout while the parser waits for nothing."""
        selector = selectors.SelectSelector()
        fileno = self.fileno
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        EVENT_READ = selectors.EVENT_READ

        parser = XTermParser(self._debug)
        feed = parser.feed
        tick = parser.tick
        decode = getincrementaldecoder("utf-8")().decode
        read = os.read

        def process_selector_events(
            selector_events: list[tuple[selectors.SelectorKey, int]], final: bool = False
        ) -> None:
            events = [e for e in selector_events if e[0].fd == fileno]
            if len(events) != len(selector_events):
                self._drain_wake()
            for last, (_key, mask) in loop_last(events):
                if mask & EVENT_READ:
                    unicode_data = decode(read(fileno, 1024 * 4), final=final and last)
                    if not unicode_data:
                        break  # stdin piped and at its end
                    for event in feed(unicode_data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        def timeout() -> float | None:
            # The parser's private deadline: while it is set (a sequence that may time out)
            # poll as Textual does; an unknown parser polls always, as Textual does.
            pending = getattr(parser, "_timeout_time", PARSER_TICK_S)
            return None if pending is None else PARSER_TICK_S

        try:
            while not self.exit_event.is_set():
                process_selector_events(selector.select(timeout()))
            selector.unregister(fileno)
            selector.unregister(self._wake_read)
            process_selector_events(selector.select(PARSER_TICK_S), final=True)
        finally:
            selector.close()
            with contextlib.suppress(EOFError, ParseError):
                for _event in feed(""):
                    pass
