"""The streaming probe: the row grouper on its own, then SshSource against the simulator's
asyncssh GB10 node streaming ``nvidia-smi -lms`` (stall → stale → restart, fallbacks) and the
poller using the stream by default at 0.25 s.

Cases used: gb10-query-with-header.csv (a real GB10's header and row).
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktop.cluster import ClusterState
from sparktop.model import NodeSample, NodeState, Sample
from sparktop.poller import Poller
from sparktop.sim.gb10 import Gb10Responder
from sparktop.sim.gpu import GpuModel
from sparktop.sim.sshserver import SshServerHandle, start_ssh_server
from sparktop.sources.nvsmi import parse_probe_output
from sparktop.sources.nvsmi.stream_rows import (
    MAX_LINE_CHARS,
    MAX_ROWS,
    RowGrouper,
    StreamGarbage,
    _cells,
)
from sparktop.sources.probe import FIELD_SETS, stream_command, stream_interval_ms
from sparktop.sources.ssh.source import SshSource
from sparktop.sources.ssh.stream import RESTART_LIMIT
from tests.nvsmi_helpers import probe
from tests.ssh_helpers import GB10_CSV, ClientFiles, client_files, node, ssh_source

CASE = GB10_CSV.read_text().splitlines()
HEADER, ROW = CASE[0], CASE[1]


def multi_gpu_rows(count: int) -> list[str]:
    """The GB10 case's row as GPUs 0..count-1 (index is the first column)."""
    rest = ROW.split(",", 1)[1]
    return [f"{i},{rest}" for i in range(count)]


# -- the row grouper ---------------------------------------------------------------------------


def test_a_streamed_interval_reads_exactly_as_the_one_shot_probe() -> None:
    apps = "gpu_uuid, pid, used_gpu_memory [MiB]\nGPU-5f1c0000-0000-0000-0000-00000000a1b2, 7, 512"
    one_shot = probe(f"{HEADER}\n{ROW}", apps=apps)
    grouper = RowGrouper(expected_rows=1)
    (interval,) = grouper.feed(f"{HEADER}\n{ROW}\n", 100.0)
    slow = one_shot[one_shot.index("@@sparktop:meminfo") :]
    streamed = parse_probe_output("n", interval.gpu_section() + slow, interval.time_s)
    expected = parse_probe_output("n", one_shot, 100.0)
    assert streamed.gpus == expected.gpus and streamed.memory == expected.memory
    assert streamed.gpus[0].process_memory_mib == 512 and streamed.time_s == 100.0


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab ,"\t\x00\r1;\u240d')), max_size=30))
def test_a_stream_line_splits_as_the_csv_module_splits_it(line: str) -> None:
    def by_csv(text: str) -> list[str]:
        row = [c.strip() for c in next(csv.reader([text], skipinitialspace=True))]
        if len(row) > 1 and row[-1] == "" and text.rstrip().endswith(","):
            row.pop()
        return row

    def outcome(split: Callable[[str], list[str]]) -> object:
        try:
            return split(line)
        except csv.Error as exc:
            return ("error", str(exc))

    assert outcome(_cells) == outcome(by_csv)


def test_grouper_closes_an_interval_on_the_gpu_count_or_a_repeated_index() -> None:
    rows = multi_gpu_rows(4)
    known = RowGrouper(expected_rows=4)
    done = known.feed(HEADER + "\n" + "\n".join(rows[:3]) + "\n", 1.0)
    assert done == []
    (first,) = known.feed(rows[3] + "\n", 2.0)
    assert first.rows == tuple(rows) and first.time_s == 2.0
    unknown = RowGrouper()  # GPU count not known yet: the next interval's first row closes it
    assert unknown.feed(HEADER + "\n" + "\n".join(rows) + "\n", 1.0) == []
    (closed,) = unknown.feed(rows[0] + "\n", 2.0)
    assert closed.rows == tuple(rows)


def test_grouper_reads_lines_split_across_chunks_and_skips_warnings() -> None:
    grouper = RowGrouper(expected_rows=1)
    text = f"WARNING: infoROM is corrupted at gpu 0000:01:00.0\n{HEADER}\n{ROW}\n"
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    out = [interval for piece in pieces for interval in grouper.feed(piece, 5.0)]
    assert [i.rows for i in out] == [(ROW,)]
    assert grouper.feed("WARNING: a one-cell line after the header\n", 6.0) == []
    assert grouper.feed(f"{HEADER}\n", 6.0) == []  # a repeated header is not a GPU row
    assert [i.rows for i in grouper.feed(ROW + "\n", 7.0)] == [(ROW,)]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x" * (MAX_LINE_CHARS + 1), "a line longer than"),
        ("x" * (MAX_LINE_CHARS + 1) + "\n", "a line of"),
        ("\n".join(f"junk {i}" for i in range(20)) + "\n", "not nvidia-smi CSV: junk 0"),
        (f"{HEADER}\n0, NVIDIA GB10, 2509\n", "a row of 3 cells under a 12-column header"),
        (HEADER + "\n" + "\n".join(multi_gpu_rows(MAX_ROWS + 1)) + "\n", "more than 64 GPU"),
    ],
)
def test_grouper_refuses_what_is_not_the_stream(text: str, said: str) -> None:
    with pytest.raises(StreamGarbage, match=said):
        RowGrouper().feed(text, 1.0)


def test_the_stream_command_is_fixed_and_formats_only_an_integer() -> None:
    command = stream_command(FIELD_SETS[0], stream_interval_ms(0.25))
    assert command.endswith("--format=csv,nounits -lms 250 2>&1")
    assert command.startswith("export LC_ALL=C; exec nvidia-smi --query-gpu=index,")
    assert stream_interval_ms(0.0004) == 100  # never a zero or sub-100 ms period


# -- against the simulator's asyncssh node -----------------------------------------------------

StartGb10 = Callable[..., Awaitable[tuple[SshServerHandle, Gb10Responder]]]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return client_files(tmp_path / "client")


@pytest.fixture
async def start_gb10(files: ClientFiles) -> AsyncIterator[StartGb10]:
    servers: list[SshServerHandle] = []

    async def start(lms: str = "ok") -> tuple[SshServerHandle, Gb10Responder]:
        gpu = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
        responder = Gb10Responder(gpu, lms=lms)
        server = await start_ssh_server(
            responder, authorized_client_keys=[files.key], streamer=responder.stream
        )
        servers.append(server)
        files.trust(server.known_hosts_line())
        return server, responder

    yield start
    for server in servers:
        await server.close()


def streaming_source(files: ClientFiles, port: int, interval_s: float = 0.25) -> SshSource:
    source = ssh_source(files, node("spark-1", port), command_timeout_s=5.0)
    source.follow_interval(interval_s)
    return source


def lms_commands(server: SshServerHandle) -> list[str]:
    return [c for c in server.commands if "-lms" in c]


async def test_stall_goes_stale_then_restarts_and_polls_go_one_shot_meanwhile(
    files: ClientFiles, start_gb10: StartGb10
) -> None:
    server, _ = await start_gb10()
    source = streaming_source(files, server.port)
    try:
        first = await source.sample()  # one-shot: learns the field set
        streamed = await source.sample()
        server.stall_streams()
        stale = await source.sample()
        server.resume_streams()
        again = [await source.sample() for _ in range(3)]
    finally:
        await source.aclose()
    assert first.ok and first.probe == "one-shot (stream starting)"
    assert streamed.ok and streamed.probe == "stream (nvidia-smi -lms 250)"
    # No complete interval for 2 × 0.25 s + 0.5 s: the stream is closed, this poll is one-shot.
    assert stale.ok and stale.probe == "one-shot while the stream restarts (no output for 1.0 s)"
    assert again[-1].probe == "stream (nvidia-smi -lms 250)"
    assert source.stream is not None and source.stream.starts == 2
    assert len(lms_commands(server)) == 2


@pytest.mark.parametrize(
    ("lms", "reason"),
    [
        (
            "unsupported",
            "one-shot: the stream nvidia-smi -lms exited 2 before its first row: "
            'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.',
        ),
        ("garbage", "one-shot: the stream printed what is not nvidia-smi CSV (a row of 2 cells"),
        ("exits", f"one-shot: the stream failed {RESTART_LIMIT} times in a row (nvidia-smi -lms"),
    ],
)
async def test_a_misbehaving_lms_falls_back_to_one_shot_for_that_node(
    files: ClientFiles, start_gb10: StartGb10, lms: str, reason: str
) -> None:
    server, _ = await start_gb10(lms)
    source = streaming_source(files, server.port)
    try:
        samples = [await source.sample() for _ in range(16)]
    finally:
        await source.aclose()
    assert all(s.ok for s in samples), [s.message for s in samples]
    assert samples[-1].probe.startswith(reason), samples[-1].probe
    starts = len(lms_commands(server))
    assert starts == (RESTART_LIMIT if lms == "exits" else 1)
    one_shots = [c for c in server.commands if "@@sparktop:gpu" in c]
    assert len(one_shots) >= 16 - 3 * starts  # every poll answered, by one-shot once fallen back


async def test_the_monitor_streams_by_default_at_a_quarter_second(
    files: ClientFiles, start_gb10: StartGb10
) -> None:
    server, responder = await start_gb10()
    source = ssh_source(files, node("spark-1", server.port), command_timeout_s=5.0)
    state = ClusterState()
    arrived: list[NodeSample] = []
    enough = asyncio.Event()

    def on_sample(sample: Sample) -> None:
        assert isinstance(sample, NodeSample)
        state.apply(sample)
        arrived.append(sample)
        if sum(s.probe.startswith("stream") for s in arrived) >= 12:
            enough.set()

    poller = Poller([source], interval_s=0.25, on_sample=on_sample)
    poller.start()
    try:
        await asyncio.wait_for(enough.wait(), 30)
    finally:
        await poller.aclose()
    streamed = [s for s in arrived if s.probe.startswith("stream")]
    assert all(s.state is NodeState.OK for s in arrived)
    assert len(lms_commands(server)) == 1 and "-lms 250 " in lms_commands(server)[0]
    # One sample per interval, stamped when its row arrived: never the same row twice.
    times = [s.time_s for s in streamed]
    assert all(b > a for a, b in itertools.pairwise(times))
    gaps = sorted(b - a for a, b in itertools.pairwise(times))
    assert 0.2 < gaps[len(gaps) // 2] < 0.3
    assert responder.rows_streamed >= len(streamed)
    key = streamed[-1].gpus[0].key
    history = state.history.get(f"spark-1/{key}", "sm_clock_mhz")
    assert [t for t, _ in history][-len(streamed) :] == times
    # The slow tier still fills memory beside the stream.
    assert streamed[-1].memory.unified and streamed[-1].memory.gpu_held_mib == pytest.approx(
        responder.gpu.vllm_memory_mib()
    )


class FailingSlowTier(Gb10Responder):
    """A GB10 whose slow tier (``/proc/meminfo`` + compute apps beside the stream) can be
    made to fail while the stream keeps printing rows."""

    fail_slow = False

    def run(self, command: str) -> tuple[str, int]:
        if self.fail_slow and "@@sparktop:meminfo" in command and "@@sparktop:gpu" not in command:
            return "cat: /proc/meminfo: Input/output error\n", 1
        return super().run(command)


async def test_a_failing_slow_tier_marks_the_memory_stale_with_its_age(
    files: ClientFiles,
) -> None:
    """The stream's rows stay fresh while the memory read beside them fails: the memory is
    kept but marked (when it was read, why it is old), in the row and the details, never
    passed off as this sample's."""
    from sparktop.ui import views

    gpu = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
    responder = FailingSlowTier(gpu)
    server = await start_ssh_server(
        responder, authorized_client_keys=[files.key], streamer=responder.stream
    )
    files.trust(server.known_hosts_line())
    source = streaming_source(files, server.port)
    assert source.stream is not None
    source.stream.slow_every_s = 0.2  # the slow tier every 0.2 s instead of 10 s
    try:
        fresh = [await source.sample() for _ in range(4)]
        responder.fail_slow = True
        slow_runs = len([c for c in server.commands if "@@sparktop:meminfo" in c])
        stale = fresh[-1]
        for _ in range(40):
            stale = await source.sample()
            ran = len([c for c in server.commands if "@@sparktop:meminfo" in c])
            if stale.memory.read_s is not None and ran > slow_runs:
                break
    finally:
        await source.aclose()
        await server.close()
    assert all(s.ok and s.memory.read_s is None for s in fresh)
    assert stale.ok and stale.probe.startswith("stream")
    assert stale.memory.read_s is not None and stale.memory.read_s < stale.time_s
    assert stale.memory.stale_reason == (
        "not refreshed: the memory read printed cat: /proc/meminfo: Input/output error"
    )
    assert stale.memory.total_mib == fresh[-1].memory.total_mib  # kept, and said to be old
    rows = views.node_rows(_state(stale), {}, stale.time_s, views.ViewConfig())
    text, style = rows[0].cells["mem"]
    assert style == "stale" and text.startswith("U ") and text.endswith(" s")


def _state(sample: NodeSample) -> ClusterState:
    state = ClusterState()
    state.apply(sample)
    return state


async def test_the_poller_paces_sources_by_their_declared_protocol(files: ClientFiles) -> None:
    """``follow_interval``/``self_paced`` are the :class:`PacedSource` protocol (not looked
    up by name): an SSH source is one, a source without them is polled on the timer."""
    from sparktop.model import PacedSource
    from tests.ui.fakes import Scripted
    from tests.ui.fakes import node as sample_node

    class Paced(Scripted):
        def __init__(self) -> None:
            super().__init__(sample_node("p"))
            self.periods: list[float] = []

        def follow_interval(self, interval_s: float) -> None:
            self.periods.append(interval_s)

        @property
        def self_paced(self) -> bool:
            return False

    paced, plain = Paced(), Scripted(sample_node("q"))
    assert isinstance(ssh_source(files, node("spark-1", 22)), PacedSource)
    assert isinstance(paced, PacedSource) and not isinstance(plain, PacedSource)
    poller = Poller([paced, plain], 0.5, lambda s: None)
    poller.start()
    await paced.polled.wait()
    await plain.polled.wait()
    poller.set_interval(0.25)
    await poller.aclose()
    assert paced.periods == [0.5, 0.25]
