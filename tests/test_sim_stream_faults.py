"""The simulator plays faults on an open ``nvidia-smi -lms`` stream (issue 30): a stream that
stalls and one that starts printing garbage, after it streamed fine. The monitor's node
source is driven through the stream into each (before, the simulator could only start a
stream bad, so these paths were tested through one-shot only)."""

from __future__ import annotations

import pytest

from sparktop.model import NodeSample
from sparktop.sources.ssh.source import SshSource
from tests.sim_helpers import node_sources, running_sim


async def _streaming(source: SshSource) -> NodeSample:
    source.follow_interval(0.25)
    for _ in range(40):
        sample = await source.sample()
        assert isinstance(sample, NodeSample)
        if sample.probe.startswith("stream"):
            return sample
    raise AssertionError(f"never streamed: {sample.probe}")


async def _until_probe(source: SshSource, prefix: str, polls: int = 40) -> NodeSample:
    probes = []
    for _ in range(polls):
        sample = await source.sample()
        assert isinstance(sample, NodeSample)
        assert sample.ok, sample.message  # every poll answered: the row never goes blank
        probes.append(sample.probe)
        if sample.probe.startswith(prefix):
            return sample
    raise AssertionError(f"no {prefix!r} probe in {probes}")


async def test_an_open_stream_that_stalls_restarts_and_one_that_garbles_falls_back() -> None:
    async with running_sim(nodes=2, engines=0) as sim:
        sources = node_sources(sim)
        stalling, garbling = (sources[name] for name in sim.ssh)
        assert isinstance(stalling, SshSource) and isinstance(garbling, SshSource)
        try:
            await _streaming(stalling)
            await _streaming(garbling)
            stall_node, garbage_node = (s.name for s in (stalling, garbling))
            sim.stream_fault(stall_node, "stall")
            sim.stream_fault(garbage_node, "garbage")
            stale = await _until_probe(stalling, "one-shot while the stream restarts")
            fallen = await _until_probe(
                garbling, "one-shot: the stream printed what is not nvidia-smi CSV"
            )
            sim.stream_fault(stall_node, "ok")
            back = await _until_probe(stalling, "stream (nvidia-smi -lms")
            with pytest.raises(ValueError, match="expected stall, garbage or ok"):
                sim.stream_fault(stall_node, "hang")
        finally:
            for source in sources.values():
                await source.aclose()
    assert "no output for" in stale.probe
    assert fallen.gpus and back.gpus
    assert stalling.stream is not None and stalling.stream.starts >= 2  # the same node, again
