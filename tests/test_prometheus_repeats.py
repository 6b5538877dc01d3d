"""A real Prometheus scraping every few seconds, asked every second: each scrape is one
reading in the history and the SM-clock baseline, however many polls return it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sparktop.cluster import BASELINE_MIN_POINTS, LOADED_UTIL_PCT, ClusterState
from sparktop.inventory import parse_inventory
from sparktop.model import EngineSample, NodeSample, Sample
from sparktop.plan import Plan
from sparktop.poller import Poller
from sparktop.sim.prometheus import prometheus_inventory_yaml
from sparktop.sim.requests import LoadSpec
from tests.prom_helpers import prom_cluster

pytestmark = pytest.mark.prometheus

SCRAPE_S = 2.0
POLL_S = 1.0
READINGS = BASELINE_MIN_POINTS + 1


def in_order_within(points: list[tuple[float, float]], stored: list[tuple[float, float]]) -> bool:
    """True when ``points`` are some of ``stored`` (time and value), in its order."""
    rest = iter(stored)
    return bool(points) and all(point in rest for point in points)


async def test_one_history_point_and_baseline_reading_per_scrape(tmp_path: Path) -> None:
    busy = LoadSpec(think_s=0.0)  # under load at every scrape: each one teaches the baseline
    async with prom_cluster(tmp_path, nodes=1, engines=1, scrape_s=SCRAPE_S, load=busy) as (
        sim,
        prom,
    ):
        text = prometheus_inventory_yaml(sim, prom.url, interval_s=POLL_S)
        sources = Plan.from_inventory(parse_inventory(text, "cluster.yaml")).sources()
        state = ClusterState()
        node_times: list[float] = []
        engine_times: list[float] = []
        seen: list[tuple[int, bool]] = []  # (loaded readings, baseline known) after each poll
        bad: list[str] = []
        enough = asyncio.Event()

        def on_sample(sample: Sample) -> None:
            state.apply(sample)
            if not sample.ok:
                bad.append(sample.message)
            if isinstance(sample, EngineSample):
                engine_times.append(sample.time_s)
                return
            assert isinstance(sample, NodeSample)
            node_times.append(sample.time_s)
            gpu = sample.gpus[0].key
            utils = state.history.get(f"{sample.node}/{gpu}", "utilization_pct").values()
            loaded = sum(u >= LOADED_UTIL_PCT for u in utils)
            seen.append((loaded, state.baseline_mhz(sample.node, gpu) is not None))
            engine_readings = len(set(engine_times))
            repeated = (
                len(node_times) > len(set(node_times)) and len(engine_times) > engine_readings
            )
            if repeated and loaded >= READINGS and engine_readings >= READINGS:
                enough.set()

        poller = Poller(sources, POLL_S, on_sample)
        poller.start()
        try:
            await asyncio.wait_for(enough.wait(), 30 * SCRAPE_S * READINGS)
        finally:
            await poller.aclose()
        node = state.nodes["spark-1"]
        gpu = node.gpus[0].key
        clocks = list(state.history.get(f"spark-1/{gpu}", "sm_clock_mhz"))
        stored = await prom.query("DCGM_FI_DEV_SM_CLOCK[5m]")  # one node, one GPU
        running = list(state.history.get(next(iter(state.engines)), "running"))
        stored_running = await prom.query('{__name__=~"vllm[:_]num_requests_running"}[5m]')

    assert not bad
    # Prometheus was asked about twice per scrape and answered each scrape's sample again...
    assert len(node_times) > len(set(node_times)) and len(engine_times) > len(set(engine_times))
    # ...but each scrape is one point: the history is Prometheus's own samples, each once.
    # (A subsequence: a poll held back past a whole scrape on a loaded machine skips that
    # scrape, which says nothing about repeats.)
    assert [t for t, _ in clocks] == sorted(set(node_times))
    scraped = [(float(t), float(v)) for t, v in stored[0]["values"]]
    assert in_order_within(clocks, scraped)
    assert [t for t, _ in running] == sorted(set(engine_times))
    scraped_running = [(float(t), float(v)) for t, v in stored_running[0]["values"]]
    assert in_order_within(running, scraped_running)
    # The baseline counts the same readings, not polls: known from the fifth loaded one on.
    assert [known for _, known in seen] == [n >= BASELINE_MIN_POINTS for n, _ in seen]
    assert seen[-1][0] >= READINGS
