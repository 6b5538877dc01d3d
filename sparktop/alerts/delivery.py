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
import logging
import shlex
import shutil
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from sparktop.alerts.model import Event, EventKind
from sparktop.errors import UserError
from sparktop.safe_text import dumps_printable

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_CONCURRENCY = 4
DEFAULT_PENDING = 64


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
    few delivery problems (also logged) so the UI can show them; ``on_failure`` is called
    with each one.
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
        self.failures: deque[str] = deque(maxlen=20)
        self._limit = asyncio.Semaphore(max_concurrent)
        self._tasks: set[asyncio.Task[None]] = set()
        self._log: IO[str] | None = None
        if alert_log is not None:
            try:
                self._log = alert_log.expanduser().open("a", encoding="utf-8")
            except OSError as exc:
                raise UserError(f"--alert-log: cannot open {alert_log}: {exc.strerror}") from None

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
            try:
                for event in batch:
                    self._log.write(dumps_printable(event.to_json()) + "\n")
                self._log.flush()
            except OSError as exc:
                self._fail(f"--alert-log: write failed: {exc.strerror}")
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

    async def _run(self, event: Event) -> None:
        assert self.command is not None
        payload = (dumps_printable(event.to_json()) + "\n").encode()
        name = self.command[0]
        async with self._limit:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
            except OSError as exc:
                self._fail(f"--on-alert: cannot run {name}: {exc.strerror or exc}")
                return
            try:
                _, err = await asyncio.wait_for(proc.communicate(payload), self.timeout_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
                self._fail(f"--on-alert: {name} killed after {self.timeout_s:.0f} s")
                return
            if proc.returncode != 0:
                tail = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
                detail = f": {tail[0][:200]}" if tail else ""
                self._fail(f"--on-alert: {name} exited {proc.returncode}{detail}")

    def _fail(self, message: str) -> None:
        log.warning("%s", message)
        self.failures.append(message)
        if self.on_failure is not None:
            self.on_failure(message)

    async def drain(self) -> None:
        """Wait for every started command to finish (each is bounded by ``timeout_s``)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close_log(self) -> None:
        """Close the ``--alert-log`` file (idempotent)."""
        if self._log is not None:
            self._log.close()
            self._log = None

    async def aclose(self) -> None:
        """Wait for running commands, then close the log."""
        await self.drain()
        self.close_log()


def add_alert_arguments(parser: argparse.ArgumentParser) -> None:
    """``--on-alert CMD``, ``--alert-log FILE`` and ``--bell`` for commands that watch live."""
    group = parser.add_argument_group("alerts")
    group.add_argument(
        "--on-alert",
        metavar="CMD",
        help="run CMD for every alert event, the event as JSON on stdin "
        "(split like a shell would, never run through one)",
    )
    group.add_argument(
        "--alert-log", metavar="FILE", type=Path, help="append every alert event as a JSON line"
    )
    group.add_argument("--bell", action="store_true", help="ring the terminal bell on new alerts")


def delivery_from_args(args: argparse.Namespace) -> AlertDelivery:
    """Build the delivery from parsed :func:`add_alert_arguments` options (UserError if bad)."""
    command = getattr(args, "on_alert", None)
    return AlertDelivery(
        on_alert=parse_command(command) if command else None,
        alert_log=getattr(args, "alert_log", None),
        bell=bool(getattr(args, "bell", False)),
    )
