"""Runs a simulator on its own event loop in a background thread.

The TUI owns the main thread's event loop (Textual's ``App.run``), so ``sparktop demo``
starts the simulator here; the monitor then talks to it over loopback like to any cluster.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path

from sparktop.sim.runner import SimHandle, SimOptions, start_sim


class SimThread:
    """A simulator in a daemon thread. ``start()`` returns once every server listens (or
    raises what went wrong); ``stop()`` closes the servers, joins the thread and makes sure
    a temporary directory it created (it holds a private key) is gone, even when called
    while the simulator is still starting."""

    def __init__(self, options: SimOptions, directory: Path | None = None) -> None:
        self.options = options
        self.directory = directory
        self.handle: SimHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop_requested = False
        self._thread = threading.Thread(target=self._run, name="sparktop-sim", daemon=True)

    def start(self, timeout_s: float = 60.0) -> SimHandle:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"simulator did not start within {timeout_s:g} s")
        if self._error is not None:
            raise self._error
        assert self.handle is not None
        return self.handle

    def set_scenario(self, name: str) -> None:
        """Switch scenario (thread-safe)."""
        if self._loop is not None and self.handle is not None:
            self._loop.call_soon_threadsafe(self.handle.set_scenario, name)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop_requested = True
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        handle = self.handle
        if handle is not None and self.directory is None:
            shutil.rmtree(handle.directory, ignore_errors=True)  # in case close() hung

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to start(); the thread just ends
            self._error = self._error or exc
            self._ready.set()

    async def _main(self) -> None:
        # _stop before _loop: stop() uses _stop once it sees _loop.
        self._stop = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        try:
            self.handle = await start_sim(self.options, self.directory)
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            if not self._stop_requested:
                await self._stop.wait()
        finally:
            await self.handle.close()
