"""SSH node source: one persistent asyncssh connection per node.

A poll is read from the node's GPU stream (:mod:`sparktop.sources.ssh.stream`: one long-lived
``nvidia-smi … -lms N`` and a slow tier every few seconds) once the poller has set a period
with :meth:`SshSource.follow_interval`, and from the one-shot probe otherwise (the first poll
of a connection, one-off commands, while a stream restarts, or on a node whose ``-lms``
does not work; ``NodeSample.probe`` says which). Both are fixed commands from
:mod:`sparktop.sources.probe` (nvidia-smi CSV with its header, ``/proc/meminfo``,
per-process GPU memory; the host files only every
:data:`~sparktop.sources.probe.SLOW_TIER_S`, see :mod:`sparktop.sources.host.tier`) and their
output is parsed by
:func:`sparktop.sources.nvsmi.parse_probe_output`. The nvidia-smi field set is learnt once per
connection (newest first, falling back for older drivers, see ``FIELD_SETS``).

Connection settings follow OpenSSH (:mod:`sparktop.sources.ssh.dial`): ``~/.ssh/config``
(HostName, Port, User, IdentityFile, ProxyJump, UserKnownHostsFile), the agent
(``SSH_AUTH_SOCK``) and known_hosts; the inventory's ``user``, ``port``, ``identity_file``,
``known_hosts`` and ``config`` override them. Host keys
are always verified; a node with ``strict_host_key_checking: false`` accepts and records an
*unknown* key (OpenSSH's ``accept-new``), never a changed one.

Failures are values: ``sample()`` never raises for a remote problem. It returns a
:class:`~sparktop.model.NodeSample` whose state says what went wrong (``UNREACHABLE`` with
"unreachable since 14:02:11: connection refused", ``HOST_KEY`` with the command that fixes
it, ``AUTH``, or whatever the parser made of the output). After a connection-level failure
the source backs off (exponential, jittered, capped at ``backoff_cap_s``); while it backs off
``sample()`` returns the current failure at once without touching the network, saying when it
was checked and when the next try is (``checked_s``, ``retry_s``). Each probe
has a client deadline of ``command_timeout_s`` + :data:`PROBE_MARGIN_S`, and a node never has
two probes in flight (a concurrent ``sample()`` joins the running one). A probe that sshd
started but that missed the deadline is ``NOT_ANSWERING`` ("nvidia-smi not answering (probe
timed out after 5 s)"): the connection is kept and probing backs off. Output is bounded
(:mod:`sparktop.sources.ssh.remote`; at most :data:`~sparktop.sources.nvsmi.node.MAX_GPUS` GPUs):
more is an error on the node's row, never megabytes parsed on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import asyncssh

from sparktop.model import NodeSample, NodeState
from sparktop.safe_text import printable
from sparktop.sources.host.fabric_rates import FabricRates
from sparktop.sources.host.tier import HostTier
from sparktop.sources.nvsmi import parse_probe_output, unsupported_field
from sparktop.sources.nvsmi.node import RAW_MAX, oversized_message
from sparktop.sources.nvsmi.stream_rows import StreamInterval
from sparktop.sources.nvsmi.streamed import parse_streamed
from sparktop.sources.probe import (
    FIELD_SETS,
    SLOW_TIER_S,
    field_check_command,
    probe_command,
)
from sparktop.sources.ssh.dial import HostKeyRefused, NotSsh, dial
from sparktop.sources.ssh.remote import OutputTooLarge, Progress, run_bounded
from sparktop.sources.ssh.stream import StreamProbe
from sparktop.sources.ssh.util import (
    failure_reason,
    local_file_problem,
)

if TYPE_CHECKING:
    from sparktop.inventory import NodeConfig, SshSettings

log = logging.getLogger(__name__)

PROBE_MARGIN_S = 0.25
"""Client deadline beyond ``command_timeout_s`` (covers the field check and the probe)."""

BACKOFF_CAP_S = 10.0
"""Longest wait between attempts on a failing node, s: one that came back is seen by then."""


class _ProbeTimeout(Exception):
    """The field check plus probe did not finish before the client deadline; ``started``
    when sshd had started a command (the connection works: nvidia-smi hangs)."""

    def __init__(self, started: bool) -> None:
        super().__init__()
        self.started = started


class SshSource:
    """Polls one node over SSH. ``sample()`` -> :class:`NodeSample`; ``aclose()`` disconnects."""

    kind = "node"

    def __init__(
        self,
        node: NodeConfig,
        settings: SshSettings,
        *,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = BACKOFF_CAP_S,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        stream: bool | None = None,
        host_every_s: float = SLOW_TIER_S,
    ) -> None:
        self.name: str = node.name
        self.node = node
        self.settings = settings
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self._clock = clock
        self._rng = rng or random.Random()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._tcp_accepted = False  # the last connect attempt got a TCP connection
        self._fields: tuple[str, ...] | None = None
        self._inflight: asyncio.Future[NodeSample] | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._since: float | None = None
        self._last_failure: NodeSample | None = None
        self._fabric_rates = FabricRates()
        self.host_tier = HostTier(host_every_s, clock=clock)
        """When the one-shot probe reads the host files (the slow tier), and the last read."""
        self.connects = 0
        """Connections opened so far (a healthy node keeps one)."""
        self.host_key_verified_s: float | None = None
        """When the host key was last verified (each connection checks it), wall clock."""
        self.stream: StreamProbe | None = None
        """The node's GPU stream (None: every poll runs the one-shot probe)."""
        if stream is None:  # the inventory's ``probe:`` decides
            stream = settings.probe != "oneshot"
        self.oneshot_why = "" if stream else "one-shot (probe: oneshot in the inventory)"
        if stream:
            self.stream = StreamProbe(
                self.name, backoff_base_s=backoff_base_s, backoff_cap_s=backoff_cap_s,
                clock=clock, rng=self._rng,
            )  # fmt: skip

    @property
    def host(self) -> str:
        return str(self.node.host)

    @property
    def command_timeout_s(self) -> float:
        return float(self.settings.command_timeout_s)

    @property
    def probe_deadline_s(self) -> float:
        """Client deadline for one poll's commands (field check + probe), seconds."""
        return self.command_timeout_s + PROBE_MARGIN_S

    @property
    def fields(self) -> tuple[str, ...] | None:
        """The nvidia-smi field set this host accepted, once learnt on the connection."""
        return self._fields

    @property
    def retry_in_s(self) -> float:
        """Seconds until the next connection attempt while backing off (0 = poll normally)."""
        if self._last_failure is None:
            return 0.0
        return max(0.0, self._retry_at - self._clock())

    def follow_interval(self, interval_s: float) -> None:
        """Polled every ``interval_s`` from now on: stream at that period (where enabled)."""
        if self.stream is not None:
            self.stream.follow(interval_s)

    @property
    def self_paced(self) -> bool:
        """True while polls come from the stream: each ``sample()`` waits for the next
        interval's rows, so the poller must not wait on top of it."""
        return self._last_failure is None and self.stream is not None and self.stream.streaming

    async def sample(self) -> NodeSample:
        """Poll the node once (or join the poll already running); never raises for the node."""
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            return await asyncio.shield(inflight)
        if self.self_paced:
            return await self._sample_here()
        self._inflight = asyncio.create_task(self._sample(), name=f"ssh:{self.name}")
        return await asyncio.shield(self._inflight)

    async def _sample_here(self) -> NodeSample:
        """A streamed poll in the caller's task (the poller's loop, which polls this node
        every period): a task of its own and the shield were a third of its task steps. A
        ``sample()`` meanwhile joins it through a future; cancelled, it ends the wait for the
        stream's rows (nothing is half done: its interval stays for the next poll)."""
        joined: asyncio.Future[NodeSample] = asyncio.get_running_loop().create_future()
        joined.add_done_callback(_retrieved)
        self._inflight = joined
        try:
            sample = await self._sample()
        except BaseException as exc:
            if not joined.done():
                if isinstance(exc, asyncio.CancelledError):
                    joined.cancel()
                else:
                    joined.set_exception(exc)
            raise
        if not joined.done():
            joined.set_result(sample)
        return sample

    async def aclose(self) -> None:
        if self._inflight is not None and not self._inflight.done():
            self._inflight.cancel()
            await asyncio.wait({self._inflight})  # our own cancellation still propagates
        if self.stream is not None:
            await self.stream.aclose()
        await self._drop()

    # -- one poll ------------------------------------------------------------------------

    async def _sample(self) -> NodeSample:
        last = self._last_failure
        if last is not None and self._clock() < self._retry_at:
            now = time.time()  # not re-checked: the failure says when it was, and when next
            retry_s = now + self.retry_in_s
            return dataclasses.replace(
                last, time_s=now, latency_s=None, checked_s=last.time_s, retry_s=retry_s
            )
        started = time.perf_counter()
        reused = self._conn is not None and not self._conn.is_closed()
        try:
            conn = await self._connection()
        except HostKeyRefused as exc:
            return await self._fail(NodeState.HOST_KEY, exc.message, started)
        except NotSsh as exc:
            return await self._fail(NodeState.ERROR, printable(exc.message), started)
        except asyncssh.PermissionDenied as exc:
            return await self._fail(NodeState.AUTH, self._auth_message(exc), started)
        except TimeoutError:
            timeout_s = self.settings.connect_timeout_s
            if self._tcp_accepted:  # a hung sshd or host: there, and saying nothing
                reason = f"accepted the connection, no SSH answer within {timeout_s:g} s"
                return await self._fail(NodeState.SSH_NOT_ANSWERING, reason, started)
            reason = f"no connection within {timeout_s:g} s (connect timed out)"
            return await self._fail(NodeState.UNREACHABLE, reason, started)
        except (OSError, asyncssh.Error) as exc:
            problem = local_file_problem(self.settings, exc)
            if problem is not None:
                return await self._fail(NodeState.ERROR, problem, started)
            return await self._fail(NodeState.UNREACHABLE, failure_reason(exc), started)
        except asyncssh.KeyImportError as exc:  # e.g. an encrypted key and no agent
            reason = f"cannot use the SSH key: {exc}; load it into ssh-agent or fix identity_file"
            return await self._fail(NodeState.AUTH, reason, started)
        except ValueError as exc:  # asyncssh's errors for an unusable SSH config
            return await self._fail(NodeState.ERROR, f"SSH settings: {exc}", started)
        try:
            streamed = await self._streamed(conn)
            if streamed is not None:
                interval, slow = streamed
                sample = parse_streamed(self.name, interval, slow, interval.time_s)
                return self._parsed(sample, None, started)
            text = await self._probe(conn)
        except _ProbeTimeout as exc:
            reason = f"probe timed out after {self.command_timeout_s:g} s"
            if exc.started:  # sshd ran the command: the node is there, nvidia-smi is not
                message = f"{NodeState.NOT_ANSWERING.value} ({reason})"
                return await self._fail(NodeState.NOT_ANSWERING, message, started, drop=False)
            return await self._fail(NodeState.UNREACHABLE, reason, started)
        except OutputTooLarge as exc:
            return self._refused(oversized_message(exc.head, exc.limit), exc.head, started)
        except (OSError, asyncssh.Error) as exc:
            if not reused:
                return await self._fail(NodeState.UNREACHABLE, failure_reason(exc), started)
            # A kept connection can die quietly (sshd restarted): one fresh attempt now.
            await self._drop()
            return await self._sample()
        return self._parsed(parse_probe_output(self.name, text, time.time()), text, started)

    async def _streamed(
        self, conn: asyncssh.SSHClientConnection
    ) -> tuple[StreamInterval, str] | None:
        """The next interval from the stream and the slow tier's text, or None when the
        one-shot probe must answer."""
        if self.stream is None or self._fields is None:
            return None  # the first poll of a connection learns the field set one-shot
        streamed = await self.stream.next_interval(conn, self._fields, self.command_timeout_s)
        if self.stream.fields_refused:
            # nvidia-smi refused a field the set had: the one-shot probe learns it again.
            self.stream.fields_refused = False
            self._fields = None
        return streamed

    async def _probe(self, conn: asyncssh.SSHClientConnection) -> str:
        progress = Progress()
        host_files = self.host_tier.due
        if host_files:
            self.host_tier.asked()
        try:
            async with asyncio.timeout(self.probe_deadline_s):
                for attempt in range(2):
                    if self._fields is None:
                        self._fields = await self._check_fields(conn, progress)
                    command = probe_command(self._fields or FIELD_SETS[0], host_files=host_files)
                    text, _ = await run_bounded(conn, command, progress)
                    if unsupported_field(text) is None:
                        break
                    # The driver changed under the connection (an older one refuses a field
                    # it accepted): learn the set again in this poll, which stays a reading.
                    self._fields = None
                    log.debug("%s: field set refused (attempt %d)", self.name, attempt + 1)
        except TimeoutError:
            raise _ProbeTimeout(progress.started) from None
        return self.host_tier.complete(text)

    async def _check_fields(
        self, conn: asyncssh.SSHClientConnection, progress: Progress
    ) -> tuple[str, ...] | None:
        """The newest field set nvidia-smi accepts, or None when it cannot tell (no driver…)."""
        for fields in FIELD_SETS:
            output, status = await run_bounded(conn, field_check_command(fields), progress)
            if status == 0:
                return fields
            if unsupported_field(output) is None:
                return None
            log.debug("%s: nvidia-smi refused a field set, trying an older one", self.name)
        return None

    def _parsed(self, sample: NodeSample, text: str | None, started: float) -> NodeSample:
        """``sample`` parsed from a one-shot probe's ``text``, or (``text`` None) from a
        streamed interval (its ``time_s`` is when the rows arrived: the start of its
        latency)."""
        arrived_s = sample.time_s if text is None else None
        changes: dict[str, Any] = {}  # one copy of the sample, not one per change
        if sample.fabric.ports:
            changes["fabric"] = self._fabric_rates.update(sample.fabric)
        if self.stream is not None and text is not None and sample.ok:
            self.stream.note_oneshot(text, len(sample.gpus))
        elif self.stream is not None and self.stream.slow_problem:
            # The stream's rows are new; its memory is the last good slow-tier read: say so.
            changes["memory"] = dataclasses.replace(
                sample.memory,
                read_s=self.stream.slow_read_s,
                stale_reason=f"not refreshed: {self.stream.slow_problem}",
            )
        return self._answered(sample, arrived_s, started, changes)

    def _answered(
        self,
        sample: NodeSample,
        arrived_s: float | None,
        started: float,
        changes: dict[str, Any] | None = None,
    ) -> NodeSample:
        """``sample`` (the node answered) with its latency, probe path and failure onset,
        and ``changes`` (other fields to set)."""
        now = time.time()
        if arrived_s is not None:
            latency = max(0.0, now - arrived_s)
        else:
            latency = time.perf_counter() - started
        probe = self.stream.mode if self.stream is not None else self.oneshot_why or "one-shot"
        self._failures = 0
        self._last_failure = None
        if sample.ok:
            self._since = None
        elif self._since is None:
            self._since = sample.time_s
        return dataclasses.replace(
            sample, **(changes or {}), latency_s=latency, since_s=self._since, probe=probe
        )

    def _refused(self, message: str, head: str, started: float) -> NodeSample:
        """A node whose probe output was over a bound: SSH answered, so its GPU data is
        unavailable (a warning, ``node.gpu_unavailable``), not down; connection kept."""
        raw = head[:RAW_MAX]
        state = NodeState.GPU_UNAVAILABLE
        sample = NodeSample(self.name, time.time(), state, message, raw=raw)
        return self._answered(sample, None, started)

    async def _fail(
        self, state: NodeState, reason: str, started: float, *, drop: bool = True
    ) -> NodeSample:
        """Record a failure and schedule the retry (backing off); ``drop`` the connection
        unless it still works (nvidia-smi hung on a live node)."""
        now = time.time()
        if self._since is None:
            self._since = now
        self._failures += 1
        delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (self._failures - 1))
        wait_s = delay * self._rng.uniform(0.5, 1.0)
        self._retry_at = self._clock() + wait_s
        message = reason  # the cause only: since_s says since when
        sample = NodeSample(
            node=self.name,
            time_s=now,
            state=state,
            message=message,
            since_s=self._since,
            latency_s=time.perf_counter() - started,
            retry_s=now + wait_s,
        )
        self._last_failure = sample
        if drop:
            await self._drop()
        return sample

    # -- connection ----------------------------------------------------------------------

    async def _connection(self) -> asyncssh.SSHClientConnection:
        if self._conn is not None and not self._conn.is_closed():
            return self._conn
        await self._drop()
        self._tcp_accepted = False

        def accepted() -> None:
            self._tcp_accepted = True

        conn = await dial(
            self.settings,
            self.host,
            accept_new=not getattr(self.node, "strict_host_key_checking", True),
            verified_s=self.host_key_verified_s,
            on_accepted=accepted,
            name=self.name,
        )
        self.host_key_verified_s = time.time()
        self._conn = conn
        self._fields = None
        self.host_tier.reset()
        if self.stream is not None:
            self.stream.reset()
        self.connects += 1
        return conn

    def _auth_message(self, exc: asyncssh.PermissionDenied) -> str:
        user = f"{self.settings.user}@" if self.settings.user else ""
        return (
            f"authentication failed for {user}{self.host} ({exc.reason}); check identity_file, "
            "the ssh-agent (SSH_AUTH_SOCK) or IdentityFile in ~/.ssh/config"
        )

    async def _drop(self) -> None:
        if self.stream is not None:
            self.stream.detach()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()
            with contextlib.suppress(Exception):
                await conn.wait_closed()


def _retrieved(future: asyncio.Future[NodeSample]) -> None:
    """A poll's outcome is its caller's: joiners may not have asked for it."""
    if not future.cancelled():
        future.exception()
