"""The demo's default tour, watched by sparktop's own sources, cluster state and alert engine:
every fault the tour plays raises its alert within one round (about two minutes at speed 1)."""

from __future__ import annotations

import asyncio
import time

from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.inventory import load_inventory
from sparktop.sources.build import build_sources
from sparktop.sweep.profile import load_profile
from tests.sim_helpers import running_sim

SPEED = 12.0
EXPECTED_RULES = {
    "gpu.throttle",
    "gpu.hidden_low_power",
    "kv.usage",
    "node.down",
    "engine.restarted",
}


async def test_tour_raises_every_alert_within_one_round() -> None:
    async with running_sim(scenario="tour", speed=SPEED) as sim:
        inventory = load_inventory(sim.inventory_path)
        sources = build_sources(inventory, backoff_base_s=0.05, backoff_cap_s=0.2)
        state = ClusterState()
        alerts = AlertEngine(
            # Hold 10 simulated seconds, as the default does in real time.
            Thresholds(hold_s=10.0 / SPEED),
            load_profile(inventory.profile or ""),
            {e.name: tuple(e.nodes) for e in inventory.engines},
            max_num_seqs={e.name: float(e.max_num_seqs or 0) for e in inventory.engines},
        )
        fired: dict[str, float] = {}
        round_s = sim.cluster.now + 125.0
        try:
            while not set(fired) >= EXPECTED_RULES and sim.cluster.now < round_s:
                for sample in await asyncio.gather(*(s.sample() for s in sources)):
                    state.apply(sample)
                for event in alerts.update(state, time.time()):
                    fired.setdefault(event.alert.rule, sim.cluster.now)
                await asyncio.sleep(0.05)
        finally:
            await asyncio.gather(*(s.aclose() for s in sources))
    assert set(fired) >= EXPECTED_RULES, fired
    assert fired["gpu.throttle"] < fired["gpu.hidden_low_power"] < fired["kv.usage"]
    assert fired["node.down"] < fired["engine.restarted"] <= 125.0
