"""The host files are the slow tier in both probe modes: a fast-tier poll of an SSH node runs
no host-file command, the slow tier runs at its period, and the samples between keep the
last host reading (counted in the commands the simulator's real asyncssh server saw).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktop.inventory import Inventory
from sparktop.model import NodeSample
from sparktop.sim.gb10 import Gb10Responder
from sparktop.sim.gpu import GpuModel
from sparktop.sim.sshserver import start_ssh_server
from sparktop.sources.probe import HOST_FILES, SLOW_TIER_S
from sparktop.sources.ssh.source import SshSource
from tests.ssh_helpers import ClientFiles, client_files, node


class Clock:
    """The source's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def host_reads(commands: list[str]) -> int:
    """Commands that read the host files (the fixed ``grep`` over :data:`HOST_FILES`)."""
    return sum(1 for c in commands if "grep -sH ." in c and HOST_FILES[0] in c)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return client_files(tmp_path / "client")


def source_for(files: ClientFiles, port: int, clock: Clock, *, stream: bool) -> SshSource:
    config = node("spark-1", port)
    inventory = Inventory(ssh=files.settings(command_timeout_s=5.0), nodes=(config,))
    settings = inventory.ssh_for(config)
    return SshSource(config, settings, backoff_base_s=0.0, clock=clock, stream=stream)


async def test_one_shot_polls_read_the_host_files_only_at_the_slow_tier_period(
    files: ClientFiles,
) -> None:
    gpu = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
    responder = Gb10Responder(gpu)
    server = await start_ssh_server(responder, authorized_client_keys=[files.key])
    files.trust(server.known_hosts_line())
    clock = Clock()
    source = source_for(files, server.port, clock, stream=False)
    seen: list[int] = []
    samples: list[NodeSample] = []
    try:
        for step in range(7):  # polls at +0, 3, 6, 9, 12, 15, 18 s (slow tier every 10 s)
            clock.now = 1000.0 + 3.0 * step
            gpu.host.step(3.0, True, 40.0)  # the node's own clock and counters move on
            samples.append(await source.sample())
            seen.append(host_reads(server.commands))
    finally:
        await source.aclose()
        await server.close()
    assert SLOW_TIER_S == 10.0
    probes = [c for c in server.commands if "@@sparktop:gpu" in c]
    assert len(probes) == 7 and all("/proc/meminfo" in c for c in probes)  # memory every poll
    # Read at +0, again at +12 (the first poll 10 s or more after): none on the polls between.
    assert seen == [1, 1, 1, 1, 2, 2, 2]
    assert source.host_tier.reads == 2
    assert all(s.ok for s in samples), [s.message for s in samples]
    # Every sample carries a host reading: fresh, or the last one read (its node clock with it).
    uptimes = [s.fabric.uptime_s for s in samples]
    assert uptimes == [uptimes[0]] * 4 + [uptimes[4]] * 3
    assert uptimes[4] == pytest.approx(uptimes[0] + 12.0)
    assert all(s.power.driver == "spbm" and len(s.fabric.ports) == 2 for s in samples)


async def test_a_reconnected_node_reads_its_host_files_at_once(files: ClientFiles) -> None:
    gpu = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
    responder = Gb10Responder(gpu)
    server = await start_ssh_server(responder, authorized_client_keys=[files.key])
    files.trust(server.known_hosts_line())
    clock = Clock()
    source = source_for(files, server.port, clock, stream=False)
    try:
        await source.sample()
        await source.aclose()  # the connection is gone (the node rebooted, say)
        again = await source.sample()
    finally:
        await source.aclose()
        await server.close()
    assert again.ok and source.connects == 2
    assert host_reads(server.commands) == 2


async def test_beside_a_stream_the_host_files_are_read_only_by_the_slow_tier(
    files: ClientFiles,
) -> None:
    gpu = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
    responder = Gb10Responder(gpu)
    server = await start_ssh_server(
        responder, authorized_client_keys=[files.key], streamer=responder.stream
    )
    files.trust(server.known_hosts_line())
    clock = Clock()
    source = source_for(files, server.port, clock, stream=True)
    source.follow_interval(0.25)
    assert source.stream is not None
    try:
        first = await source.sample()  # one-shot: learns the field set, reads the host files
        streamed = [await source.sample() for _ in range(4)]
        before = host_reads(server.commands)
        clock.now += SLOW_TIER_S
        later = [await source.sample() for _ in range(2)]
        slow_task = source.stream._slow_task
        if slow_task is not None:
            await slow_task
    finally:
        await source.aclose()
        await server.close()
    assert first.ok and first.probe.startswith("one-shot")
    assert all(s.ok and s.probe.startswith("stream") for s in streamed + later)
    # The first one-shot probe read the host files (kept as the stream's slow tier); the
    # stream's intervals read none; the slow tier reads them again at its period.
    assert before == 1
    assert host_reads(server.commands) == 2
    assert not any(c for c in server.commands if "-lms" in c and "grep" in c)
    assert all(len(s.fabric.ports) == 2 for s in streamed + later)
