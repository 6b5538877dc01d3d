"""Alert delivery beyond the screen: terminal bell flag, ``--on-alert CMD``, ``--alert-log FILE``.

``--on-alert`` runs ``CMD`` (split like a shell would with :func:`shlex.split`, but never run
through a shell: alert text is never interpolated into a command line) once per event, with
the event as one JSON object on stdin (:meth:`Event.to_json`: ``event`` is ``fired``,
``escalated`` or ``cleared``; ``alert`` the full record). At most ``max_concurrent`` commands
run at once, each is killed after ``timeout_s``, and at most ``max_pending`` wait; further
events are dropped and counted. ``--alert-log`` appends the same JSON objects, one per line.
Characters a terminal could act on are written as ``\\uXXXX`` escapes (the same JSON
values; ``tail -f`` of the log is safe).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import logging
import os
import shlex
import shutil
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from sparktop.alerts.model import Event, EventKind
from sparktop.errors import UserError
from sparktop.outfile import append_file
from sparktop.safe_text import dumps_printable

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_CONCURRENCY = 4
DEFAULT_PENDING = 64
STDERR_TAIL_BYTES = 4096
"""What is kept of a command's stderr (its end: the last line is what a failure shows)."""


def parse_command(command: str) -> tuple[str, ...]:
    """``--on-alert`` text → argv. Raises :class:`UserError` when empty, unbalanced or the
    program is not found on ``PATH``."""
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise UserError(f"--on-alert: cannot split {command!r}: {exc}") from None
    if not argv:
        raise UserError("--on-alert: empty command")
    if shutil.which(argv[0]) is None:
        raise UserError(f"--on-alert: program not found or not executable: {argv[0]}")
    return argv


class AlertDelivery:
    """Hands every alert event to the bell flag, the ``--on-alert`` command and the log.

    Call :meth:`deliver` from the event loop with the events of each
    :meth:`AlertEngine.update`; it never blocks on the command. ``failures`` keeps the last
    few delivery problems (also logged); ``on_failure`` is called with each problem of the
    command (failed to start, non-zero exit with the last line of its stderr, killed after
    ``timeout_s``, dropped). Of a command's output only the last
    :data:`STDERR_TAIL_BYTES` of stderr are kept (stdout is discarded). ``log_error`` is
    why the last ``--alert-log`` write failed (None once one succeeds); ``log_lost`` counts
    the events the log missed.
    """

    def __init__(
        self,
        on_alert: tuple[str, ...] | None = None,
        alert_log: Path | None = None,
        bell: bool = False,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_concurrent: int = DEFAULT_CONCURRENCY,
        max_pending: int = DEFAULT_PENDING,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.command = on_alert
        self.bell = bell
        self.timeout_s = timeout_s
        self.max_pending = max_pending
        self.on_failure = on_failure
        self.dropped = 0
        self.command_failures = 0
        self.failures: deque[str] = deque(maxlen=20)
        self.log_path = alert_log
        self.log_error: str | None = None
        self.log_lost = 0
        self._limit = asyncio.Semaphore(max_concurrent)
        self._tasks: set[asyncio.Task[None]] = set()
        self._log: IO[str] | None = None
        if alert_log is not None:
            self._log = append_file(alert_log, "--alert-log")

    @staticmethod
    def should_ring(events: Iterable[Event]) -> bool:
        """True when any event is an alert firing or getting worse (what the bell is for)."""
        return any(e.kind is not EventKind.CLEARED for e in events)

    def deliver(self, events: Iterable[Event]) -> None:
        """Log every event and start the command for each (never waits for it)."""
        batch = list(events)
        if not batch:
            return
        if self._log is not None:
            self._write_log(batch)
        if self.command is None:
            return
        for event in batch:
            if len(self._tasks) >= self.max_pending:
                self.dropped += 1
                self._fail(f"--on-alert: {self.max_pending} commands pending, dropped one event")
                continue
            task = asyncio.get_running_loop().create_task(self._run(event))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _write_log(self, batch: list[Event]) -> None:
        """Append the batch as one write; on failure count it lost and keep why."""
        assert self._log is not None
        text = "".join(dumps_printable(event.to_json()) + "\n" for event in batch)
        try:
            self._log.write(text)
            self._log.flush()
        except OSError as exc:
            self.log_lost += len(batch)
            if self.log_error is None:
                log.warning("--alert-log %s: write failed: %s", self.log_path, exc)
            self.log_error = exc.strerror or str(exc)
            self.failures.append(f"--alert-log: write failed: {self.log_error}")
            self._reopen_log()
        else:
            self.log_error = None

    def _reopen_log(self) -> None:
        """Drop what the failed write left buffered (it would fail again at every flush and
        at exit) by reopening the file; a file that cannot be reopened stops the log."""
        assert self._log is not None and self.log_path is not None
        old, self._log = self._log, None
        with contextlib.suppress(OSError, ValueError):
            os.close(old.fileno())
        with contextlib.suppress(Exception):
            old.close()
        with contextlib.suppress(UserError):
            self._log = append_file(self.log_path, "--alert-log")
        if self._log is None:
            self.log_error = f"{self.log_error}; cannot reopen the file: log stopped"

    async def _spawn(self) -> asyncio.subprocess.Process:
        assert self.command is not None
        for attempt in (1, 2):
            try:
                return await asyncio.create_subprocess_exec(
                    *self.command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
            except OSError as exc:
                # EBADF: another thread closed a descriptor while the child was being set
                # up (a race in the fork); the command itself is fine, so try once more.
                if exc.errno != errno.EBADF or attempt == 2:
                    raise
                await asyncio.sleep(0.05)
        raise AssertionError("unreachable")

    async def _run(self, event: Event) -> None:
        assert self.command is not None
        payload = (dumps_printable(event.to_json()) + "\n").encode()
        name = self.command[0]
        async with self._limit:
            try:
                proc = await self._spawn()
            except OSError as exc:
                self._fail(f"--on-alert: cannot run {name}: {exc.strerror or exc}")
                return
            try:
                err = await asyncio.wait_for(_talk(proc, payload), self.timeout_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
                self._fail(f"--on-alert: {name} killed after {self.timeout_s:g} s")
                return
            if proc.returncode != 0:
                tail = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
                detail = f": {tail[0][:200]}" if tail else ""
                self._fail(f"--on-alert: {name} exited {proc.returncode}{detail}")

    def _fail(self, message: str) -> None:
        self.command_failures += 1
        log.warning("%s", message)
        self.failures.append(message)
        if self.on_failure is not None:
            self.on_failure(message)

    async def drain(self) -> None:
        """Wait for every started command to finish (each is bounded by ``timeout_s``)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close_log(self) -> None:
        """Close the ``--alert-log`` file (idempotent; a failing disk is counted, not raised)."""
        if self._log is not None:
            log_file, self._log = self._log, None
            try:
                log_file.close()
            except OSError as exc:
                self.log_error = self.log_error or exc.strerror or str(exc)

    async def aclose(self) -> None:
        """Wait for running commands, then close the log."""
        await self.drain()
        self.close_log()


async def _talk(proc: asyncio.subprocess.Process, payload: bytes) -> bytes:
    """Write ``payload`` to the command's stdin and wait for it to exit, keeping only the
    last :data:`STDERR_TAIL_BYTES` of its stderr (a hook that writes hundreds of MB must not
    be held in memory)."""
    assert proc.stdin is not None and proc.stderr is not None
    stdin = proc.stdin

    async def feed() -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(payload)
            await stdin.drain()
        stdin.close()

    feeder = asyncio.ensure_future(feed())
    tail = bytearray()
    try:
        while chunk := await proc.stderr.read(65536):
            tail += chunk
            del tail[:-STDERR_TAIL_BYTES]
        await feeder
        await proc.wait()
    finally:
        feeder.cancel()
    return bytes(tail)


def delivery_from_args(args: argparse.Namespace) -> AlertDelivery:
    """Build the delivery from parsed
    :func:`~sparktop.alerts.options.add_alert_arguments` options (UserError if bad)."""
    command = getattr(args, "on_alert", None)
    return AlertDelivery(
        on_alert=parse_command(command) if command is not None else None,
        alert_log=getattr(args, "alert_log", None),
        bell=bool(getattr(args, "bell", False)),
    )
