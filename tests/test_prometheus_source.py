"""Nodes and engines read through a real Prometheus scraping the simulator's exporter pages,
against the same simulated cluster read over SSH and HTTP."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest

from sparktop.alerts.model import Alert
from sparktop.alerts.oneshot import alerts_now
from sparktop.cli import main
from sparktop.inventory import load_inventory, parse_inventory
from sparktop.model import EngineSample, NodeSample, NodeState, Quantile, is_num
from sparktop.plan import Plan
from sparktop.poller import Poller
from sparktop.sim.gpu import Fault
from sparktop.sim.prometheus import prometheus_inventory_yaml
from sparktop.sim.promrun import start_node_exporter
from tests.prom_helpers import NODE_EXPORTER, prom_cluster, prom_inventory, require

pytestmark = pytest.mark.prometheus


async def _poll(sources: list) -> list:  # type: ignore[type-arg]
    return list(await asyncio.gather(*(s.sample() for s in sources)))


async def _close(sources: list) -> None:  # type: ignore[type-arg]
    await asyncio.gather(*(s.aclose() for s in sources))


async def test_same_rows_states_and_alerts_as_over_ssh(tmp_path: Path) -> None:
    async with prom_cluster(tmp_path, nodes=4, seed=3) as (sim, prom):
        sim.cluster.set_fault(sim.targets.thermal, Fault.THERMAL)
        sim.cluster.set_fault(sim.targets.low_power, Fault.LOW_POWER)
        # Both faults visible in Prometheus (sw thermal bit, 513 MHz stuck clock).
        await prom.until_series("DCGM_FI_DEV_CLOCKS_EVENT_REASONS == 32")
        await prom.until_series("DCGM_FI_DEV_SM_CLOCK < 600 and DCGM_FI_DEV_GPU_UTIL > 90")
        inventory, _ = prom_inventory(sim, prom, tmp_path)
        over_ssh = Plan.from_inventory(load_inventory(sim.inventory_path)).sources()
        over_prom = Plan.from_inventory(inventory).sources()
        try:
            ssh_samples, prom_samples = await asyncio.gather(_poll(over_ssh), _poll(over_prom))
            # Poll again: engine rates need a second scrape over HTTP (Prometheus has a window).
            ssh_samples = await _poll(over_ssh)
        finally:
            await _close(over_ssh)
            await _close(over_prom)
        by_ssh = {_name(s): s for s in ssh_samples}
        by_prom = {_name(s): s for s in prom_samples}
        assert list(by_prom) == list(by_ssh)
        for name, ssh in by_ssh.items():
            got = by_prom[name]
            assert got.state == ssh.state, (name, got.message)
            if isinstance(ssh, NodeSample):
                assert isinstance(got, NodeSample)
                assert [g.uuid for g in got.gpus] == [g.uuid for g in ssh.gpus]
                for a, b in zip(got.gpus, ssh.gpus, strict=True):
                    assert a.name == b.name
                    assert a.clock_events == b.clock_events
                    assert abs(float(a.sm_clock_mhz) - float(b.sm_clock_mhz)) < 60
                    assert a.max_sm_clock_mhz == b.max_sm_clock_mhz
                assert got.memory.total_mib == ssh.memory.total_mib
                assert got.memory.unified and ssh.memory.unified
            else:
                assert isinstance(got, EngineSample) and isinstance(ssh, EngineSample)
                assert got.kv_pool_tokens == ssh.kv_pool_tokens
                assert got.kv_pool_source == ssh.kv_pool_source
                assert got.max_num_seqs == ssh.max_num_seqs
                assert is_num(got.decode_tps) and got.decode_tps >= 0
                ttft = got.ttft_p50
                assert isinstance(ttft, Quantile) or "no requests finished" in ttft.reason
        now = max(s.time_s for s in ssh_samples)
        ssh_plan = Plan.from_inventory(load_inventory(sim.inventory_path))
        ssh_alerts = alerts_now(ssh_samples, ssh_plan.alert_engine(hold_s=0.0), now)
        prom_plan = Plan.from_inventory(inventory)
        prom_alerts = alerts_now(prom_samples, prom_plan.alert_engine(hold_s=0.0), now)
        # The expected-row rules compare windowed figures: Prometheus already holds up to 30 s
        # of history, the HTTP source only what it scraped since it started, so those may
        # differ at startup; every other alert must be the same.
        assert _judged(prom_alerts) == _judged(ssh_alerts)
        assert {"gpu.throttle", "gpu.hidden_low_power"} <= {r for r, _ in _judged(prom_alerts)}


async def test_queries_per_tick_do_not_grow_with_nodes(tmp_path: Path) -> None:
    async with prom_cluster(tmp_path, nodes=6, engines=2) as (sim, prom):
        text = prometheus_inventory_yaml(sim, prom.url, interval_s=0.2)
        sources = Plan.from_inventory(parse_inventory(text, "cluster.yaml")).sources()
        counts: Counter[str] = Counter()
        enough = asyncio.Event()
        bad: list[str] = []

        def on_sample(sample: NodeSample | EngineSample) -> None:
            counts[_name(sample)] += 1
            if not sample.ok:
                bad.append(sample.message)
            if len(counts) == len(sources) and min(counts.values()) >= 5:
                enough.set()

        poller = Poller(sources, 0.2, on_sample)
        poller.start()
        try:
            await asyncio.wait_for(enough.wait(), 30)
        finally:
            await poller.aclose()
        assert not bad
        ticks = max(counts.values())
        hub = sources[0].hub  # type: ignore[attr-defined]
        # One node query and one engine query a tick for 6 nodes and 2 engines (a tick may
        # straddle the reuse window once in a while).
        assert 2 * min(counts.values()) <= hub.queries <= 2 * ticks + 2


async def test_target_down_and_missing_series(tmp_path: Path) -> None:
    async with prom_cluster(tmp_path, nodes=2) as (sim, prom):
        text = prom_inventory(sim, prom, tmp_path)[1].read_text()
        text = text.replace("  instance: 127.77.0.2\n", "  match: {Hostname: no-such-host}\n", 1)
        inventory = parse_inventory(text, "cluster.yaml")
        sources = Plan.from_inventory(inventory).sources()
        try:
            first, missing, _engine = await _poll(sources)
            assert first.ok
            assert missing.state is NodeState.ERROR
            assert 'Hostname="no-such-host"' in missing.message
            assert "found nothing" in missing.message
            await sim.dcgm["spark-1"].go_away()
            await sim.node_exporter["spark-1"].go_away()
            await prom.until_series('up{instance=~"127\\\\.77\\\\.0\\\\.1:.*"} == 0', 2)
            # The hub reuses one query's answer within a tick, so the first poll after the
            # targets went down may still read the answer from before: poll (bounded) until
            # a fresh query has been made.
            for _ in range(40):
                down = (await _poll(sources))[0]
                if down.state is NodeState.UNREACHABLE:
                    break
                await asyncio.sleep(0.25)
            assert down.state is NodeState.UNREACHABLE, down
            assert "up=0" in down.message and "127.77.0.1" in down.message
        finally:
            await _close(sources)


async def test_real_node_exporter_memory(tmp_path: Path) -> None:
    require(NODE_EXPORTER)
    exporter = await start_node_exporter(tmp_path / "node_exporter")
    try:
        async with prom_cluster(tmp_path, nodes=1, extra_jobs={"here": [exporter.address]}) as (
            sim,
            prom,
        ):
            text = prom_inventory(sim, prom, tmp_path)[1].read_text()
            text = text.replace(
                "nodes:\n",
                f"nodes:\n- {{name: here, source: prometheus, instance: '{exporter.address}'}}\n",
                1,
            )
            sources = Plan.from_inventory(parse_inventory(text, "cluster.yaml")).sources()
            try:
                here = (await _poll(sources))[0]
            finally:
                await _close(sources)
    finally:
        exporter.close()
    assert here.state is NodeState.NO_GPU
    assert "DCGM_FI_DEV_" in here.message
    total_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    assert here.memory.total_mib == pytest.approx(total_kb / 1024)
    assert is_num(here.memory.used_mib) and 0 < here.memory.used_mib < here.memory.total_mib


async def test_snapshot_json_from_prometheus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with prom_cluster(tmp_path, nodes=2) as (sim, prom):
        _, path = prom_inventory(sim, prom, tmp_path)
        status = await asyncio.to_thread(main, ["snapshot", "-i", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    # Everything answered: 0, or 4 (degraded) when the simulated load raised a warning.
    warned = any(a["severity"] == "warning" for a in doc["alerts"])
    assert status == (4 if warned else 0), doc
    assert [n["node"] for n in doc["nodes"]] == ["spark-1", "spark-2"]
    assert all(n["state"] == "ok" for n in doc["nodes"])
    assert doc["engines"][0]["state"] == "ok"
    assert doc["nodes"][0]["gpus"][0]["sm_clock_mhz"] > 0


def _judged(alerts: tuple[Alert, ...]) -> set[tuple[str, str]]:
    return {(a.rule, a.subject) for a in alerts if not a.rule.startswith("expected.")}


def _name(sample: NodeSample | EngineSample) -> str:
    return sample.node if isinstance(sample, NodeSample) else f"engine:{sample.engine}"
