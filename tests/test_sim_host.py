"""The simulated GB10 answers the probe's host reads over SSH as a DGX Spark would, and the
SSH source turns two readings into fabric rates (the node's own clock between them)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from sparktop.model import NodeState
from sparktop.sim.scenarios import Act
from sparktop.snapshot import node_json
from tests.sim_helpers import node_sample, node_sources, num, running_sim, until

# The host files are read on every poll here (not every SLOW_TIER_S): these tests are about
# the readings; tests/test_host_tier.py is about when they are read.


async def test_sim_nodes_show_fabric_pressure_spark_hwmon_and_processes() -> None:
    async with running_sim(speed=10) as sim:
        source = node_sources(sim, host_every_s=0.0)["spark-2"]
        try:
            first = await node_sample(source)
            second = await until(
                lambda: node_sample(source),
                lambda s: s.ok and s.fabric.uptime_s != first.fabric.uptime_s,
            )
        finally:
            await source.aclose()
    assert first.state is NodeState.OK and second.ok
    ports = second.fabric.ports
    assert [(p.name, p.netdev, p.up) for p in ports] == [
        ("rocep1s0f0/1", "enp1s0f0np0", True),
        ("rocep1s0f1/1", "enp1s0f1np1", True),
    ]
    assert all(p.rate_gbps == 200.0 for p in ports)
    assert 8.0 <= num(second.fabric.tx_gbps) <= 16.0  # the TP all-reduce while decoding
    assert 8.0 <= num(second.fabric.rx_gbps) <= 16.0
    assert second.memory.psi_some_pct == 0.0 and second.memory.swap_used_mib == 0.0
    assert num(second.memory.available_mib) > 15_000
    assert second.power.driver == "spbm" and second.power.cap_w["pl1"] == 140.0
    (proc,) = second.processes
    assert proc.name == "python3" and num(proc.share_pct) == pytest.approx(83.0, abs=0.5)
    doc = node_json(second)
    assert doc["fabric"]["ports"][0]["netdev"] == "enp1s0f0np0"  # type: ignore[index]
    assert doc["power"]["cap_w"]["pl1"] == 140.0  # type: ignore[index]
    assert doc["processes"][0]["pid"] == proc.pid  # type: ignore[index]
    assert doc["memory"]["psi_full_pct"] == 0.0  # type: ignore[index]


async def test_sim_link_down_and_memory_pressure_show_in_the_readings() -> None:
    async with running_sim(speed=10) as sim:
        await sim.step()  # the scenario's opening recover
        sim.targets = replace(sim.targets, pressure="spark-2")
        await sim.apply(Act.LINK_DOWN)
        await sim.apply(Act.MEMORY_PRESSURE)
        source = node_sources(sim, host_every_s=0.0)[sim.targets.link]
        try:
            await node_sample(source)
            sample = await until(
                lambda: node_sample(source),
                lambda s: s.ok and num(s.memory.available_mib) < 2_000,
            )
            await asyncio.sleep(0)
        finally:
            await source.aclose()
    down, up = sample.fabric.ports
    assert not down.up and down.state == "1: DOWN" and down.errors["link_downed"] >= 1
    assert up.up
    assert num(sample.memory.swap_used_mib) > 1_000
    assert num(sample.memory.psi_some_pct) > 5.0
    assert any(p.name == "jupyter-lab" for p in sample.processes)
