"""The streaming probe: one long-lived ``nvidia-smi --query-gpu=… -lms N`` per node.

nvidia-smi started once keeps NVML initialised and prints its CSV header, then one row per GPU
every N ms; a one-shot probe starts a shell and two nvidia-smi processes (two NVML
initialisations) on the node for every poll. The stream's rows are read line by line
(:class:`RowGrouper`: lines and rows per interval bounded) and each interval's rows become the
GPU section of the probe's text, so the one parser (:func:`~sparktop.sources.nvsmi.
parse_probe_output`) reads both. What does not need every interval (``/proc/meminfo``, the
compute apps) is the slow tier, run on the exec path every :data:`SLOW_TIER_S` seconds.

:class:`StreamProbe` runs the stream for one node's connection. A stream that prints nothing
for two intervals plus :data:`STALE_MARGIN_S` is stale: it is closed and restarted after a
capped, jittered backoff, and meanwhile each poll is answered by the one-shot probe. A stream
that cannot work (nvidia-smi exits before its first interval, prints something that is not its
CSV, or fails :data:`RESTART_LIMIT` runs in a row) leaves the node on one-shot probing for
the rest of the connection, with the reason in :attr:`StreamProbe.mode`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import Callable

import asyncssh

from sparktop.sources.nvsmi import first_line, unsupported_field
from sparktop.sources.nvsmi.stream_rows import RowGrouper, StreamGarbage, StreamInterval
from sparktop.sources.probe import (
    MARK,
    REMOTE_TIMEOUT_S,
    SECTION_MEMINFO,
    SLOW_TIER_S,
    slow_command,
    stream_command,
    stream_interval_ms,
)
from sparktop.sources.ssh.remote import OutputTooLarge, Progress, run_bounded

log = logging.getLogger(__name__)

STALE_MARGIN_S = 0.5
"""A stream is stale after two intervals plus this without a complete interval."""
RESTART_LIMIT = 3
"""Runs in a row that end or go stale before the node stays on the one-shot probe."""
HEALTHY_ROWS = 5
"""Intervals a run must deliver before its failures are forgotten."""
SLOW_MAX_CHARS = 128_000
READ_CHUNK = 65_536


class StreamProbe:
    """One node's GPU stream and slow tier on its SSH connection (see the module docstring).

    :meth:`follow` turns the stream on at a poll period; :meth:`next_interval` gives the next
    interval and the slow tier's text, or None when the one-shot probe must answer this poll.
    """

    def __init__(
        self,
        node: str,
        *,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        slow_every_s: float = SLOW_TIER_S,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.node = node
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.slow_every_s = slow_every_s
        self._clock = clock
        self._rng = rng or random.Random()
        self.interval_s: float | None = None
        self.fallback: str | None = None
        """Why this connection stays on the one-shot probe (None: the stream is used)."""
        self.problem = ""
        """Why the last run ended (shown while the stream restarts)."""
        self.starts = 0
        """Streams started so far (a healthy node keeps one per connection)."""
        self.gpu_count: int | None = None
        self.fields_refused = False
        """Set when the last run ended because nvidia-smi refused a field of the set (the
        driver changed): the caller learns the set again; the stream is tried again."""
        self._proc: asyncssh.SSHClientProcess[str] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ms = 0
        self._latest: StreamInterval | None = None
        self._fresh = False
        self._ended: str | None = None
        self._garbage = False
        self._run_rows = 0
        self._arrived = asyncio.Event()
        self._failures = 0
        self._retry_at = 0.0
        self._given_at = -math.inf
        self._started_at = self._starting_until = 0.0
        self._slow_text = ""
        self._slow_at = -math.inf
        self.slow_read_s: float | None = None
        """When the slow tier's text was last read (wall clock; None: never)."""
        self.slow_problem = ""
        """Why the slow tier's last refresh failed ("" when it worked): its text is older."""
        self._slow_task: asyncio.Task[None] | None = None

    # -- state -------------------------------------------------------------------------------

    @property
    def wanted(self) -> bool:
        """True when polls should come from the stream (a period is set, no fallback)."""
        return self.interval_s is not None and self.fallback is None

    @property
    def streaming(self) -> bool:
        """True while a stream runs and has delivered an interval (polls are paced by it)."""
        return self.wanted and self._proc is not None and self._run_rows > 0

    @property
    def mode(self) -> str:
        """How polls are read, for the node's details."""
        if self.interval_s is None:
            return "one-shot"
        if self.fallback is not None:
            return f"one-shot: {self.fallback}"
        if self.streaming:
            return f"stream (nvidia-smi -lms {self._ms})"
        if self.problem:
            return f"one-shot while the stream restarts ({self.problem})"
        return "one-shot (stream starting)"

    def follow(self, interval_s: float) -> None:
        """Stream at this poll period (a running stream at another period is restarted)."""
        self.interval_s = float(interval_s)
        if self._proc is not None and self._ms != stream_interval_ms(interval_s):
            self.detach()

    def note_oneshot(self, text: str, gpu_count: int) -> None:
        """Keep the slow tier's part of a one-shot probe's output and the GPU count."""
        cut = text.find(f"{MARK}{SECTION_MEMINFO}")
        if cut >= 0:
            self._slow_text = text[cut : cut + SLOW_MAX_CHARS]
            self._slow_at = self._clock()
            self.slow_read_s, self.slow_problem = time.time(), ""
        if gpu_count > 0:
            self.gpu_count = gpu_count

    def reset(self) -> None:
        """A new connection: forget the old stream and its failures; try the stream again."""
        self.detach()
        self.fallback = None
        self.problem = ""
        self._failures = 0
        self._retry_at = 0.0

    # -- one poll ------------------------------------------------------------------------------

    async def next_interval(
        self, conn: asyncssh.SSHClientConnection, fields: tuple[str, ...], start_s: float
    ) -> tuple[StreamInterval, str] | None:
        """The next interval (its rows, the wall time they arrived) and the slow tier's last
        text: together the probe's text (``interval.gpu_section() + slow``, see
        :func:`~sparktop.sources.nvsmi.streamed.parse_streamed`). None when this poll must
        use the one-shot probe. ``start_s`` bounds the wait for a new stream's first interval
        (nvidia-smi initialising NVML)."""
        if not self.wanted or self.interval_s is None:
            return None
        if self._proc is None:
            if self._clock() < self._retry_at:
                return None
            await self._start(conn, fields)
            self._starting_until = self._clock() + start_s + 2 * self.interval_s
        wait_s = 2 * self.interval_s + STALE_MARGIN_S
        self._refresh_slow(conn)
        # Never poll faster than half the period, even when rows come faster than asked (a
        # misbehaving -lms); the rows are awaited from then on, as if the poll slept first.
        not_before = self._given_at + self.interval_s / 2
        interval = await self._next(max(self._clock(), not_before) + wait_s, not_before)
        if interval is None:
            if self._ended is None and self._run_rows == 0:
                if self._clock() < self._starting_until:
                    return None  # nvidia-smi still initialising: this poll is one-shot
                wait_s = self._clock() - self._started_at
            self._failed(self._ended or f"no output for {wait_s:.1f} s")
            return None
        if self._run_rows >= HEALTHY_ROWS:
            self._failures = 0
        self._given_at = self._clock()
        return interval, self._slow_text

    async def _next(self, deadline: float, not_before: float) -> StreamInterval | None:
        """The newest interval once one is fresh and ``not_before`` has passed; None when
        the stream ended or nothing came by ``deadline`` (both on :attr:`_clock`).

        Rows due at the period arrive after ``not_before``: the wait is one await on the
        reader's event (asyncio.timeout, no task of its own as wait_for makes), and a sleep
        only when they came early."""
        while not self._fresh:
            if self._ended is not None:
                return None
            left = deadline - self._clock()
            if left <= 0:
                return None
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._arrived.wait()
        early = not_before - self._clock()
        if early > 0:
            # Rows faster than asked: sleep out the rest once and take the newest then
            # (once: a clock a test moves by hand does not move while this sleeps).
            await asyncio.sleep(early)
        self._fresh = False
        return self._latest

    def _failed(self, reason: str) -> None:
        first_run_failed = self._run_rows == 0 and self._ended is not None
        garbage = self._garbage
        self.detach()
        if unsupported_field(reason) is not None:
            # Not the stream's fault: the field set is stale. Retry with the new set.
            self.problem, self.fields_refused = reason, True
            return
        self._failures += 1
        self.problem = reason
        if garbage or first_run_failed:
            self.fallback = f"the stream {reason}"
        elif self._failures >= RESTART_LIMIT:
            self.fallback = f"the stream failed {self._failures} times in a row ({reason})"
        else:
            delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (self._failures - 1))
            self._retry_at = self._clock() + delay * self._rng.uniform(0.5, 1.0)
        log.info("%s: nvidia-smi stream %s", self.node, reason)

    # -- the stream ----------------------------------------------------------------------------

    async def _start(self, conn: asyncssh.SSHClientConnection, fields: tuple[str, ...]) -> None:
        assert self.interval_s is not None
        self._ms = stream_interval_ms(self.interval_s)
        proc = await conn.create_process(stream_command(fields, self._ms), stdin=asyncssh.DEVNULL)
        self.starts += 1
        self._started_at = self._clock()
        self._proc = proc
        self._latest, self._fresh, self._ended, self._garbage = None, False, None, False
        self._run_rows = 0
        grouper = RowGrouper(self.gpu_count)
        self._reader = asyncio.create_task(self._read(proc, grouper), name=f"lms:{self.node}")

    async def _read(self, proc: asyncssh.SSHClientProcess[str], grouper: RowGrouper) -> None:
        ended = "ended"
        try:
            while True:
                chunk = await proc.stdout.read(READ_CHUNK)
                if not chunk:
                    break
                for interval in grouper.feed(chunk, time.time()):
                    self._latest, self._fresh = interval, True
                    self._run_rows += 1
                    self._arrived.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait_closed(), 1.0)
            status = proc.exit_status
            said = f": {first_line(grouper.preamble[0])}" if grouper.preamble else ""
            if self._run_rows == 0 and grouper.header is None:
                ended = f"nvidia-smi -lms exited {status} before its first row{said}"
            else:
                ended = f"nvidia-smi -lms exited {status}{said}"
        except StreamGarbage as exc:
            self._garbage = True
            ended = f"printed what is not nvidia-smi CSV ({exc})"
        except (OSError, asyncssh.Error) as exc:
            ended = f"channel closed ({type(exc).__name__})"
        finally:
            if proc is self._proc:
                self._ended = ended
                self._arrived.set()

    def detach(self) -> None:
        """Close the running stream (nvidia-smi ends at its next write on the node)."""
        proc, self._proc = self._proc, None
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.cancel()
        if proc is not None:
            with contextlib.suppress(Exception):
                proc.close()
        self._fresh = False

    async def aclose(self) -> None:
        reader = self._reader
        self.detach()
        for task in (reader, self._slow_task):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait({task})

    # -- the slow tier -------------------------------------------------------------------------

    def _refresh_slow(self, conn: asyncssh.SSHClientConnection) -> None:
        due = self._clock() - self._slow_at >= self.slow_every_s
        if due and (self._slow_task is None or self._slow_task.done()):
            self._slow_task = asyncio.create_task(self._read_slow(conn), name=f"slow:{self.node}")

    async def _read_slow(self, conn: asyncssh.SSHClientConnection) -> None:
        try:
            async with asyncio.timeout(REMOTE_TIMEOUT_S + 1.0):
                text, _ = await run_bounded(conn, slow_command(), Progress())
            if text.startswith(f"{MARK}{SECTION_MEMINFO}"):
                self._slow_text = text[:SLOW_MAX_CHARS]
                self.slow_read_s, self.slow_problem = time.time(), ""
            else:
                self.slow_problem = f"the memory read printed {first_line(text) or 'nothing'}"
        except TimeoutError:
            self.slow_problem = f"the memory read did not finish in {REMOTE_TIMEOUT_S + 1:g} s"
        except (OSError, asyncssh.Error, OutputTooLarge) as exc:
            self.slow_problem = f"the memory read failed ({type(exc).__name__})"
            log.debug("%s: slow tier failed: %s", self.node, exc)
        finally:
            self._slow_at = self._clock()
