"""The monitor's expected strip and the alert rules share one window-matched expected row:
with both active, each engine sample's row is estimated once (the app on the loopback
simulator, real SSH and HTTP)."""

from __future__ import annotations

import asyncio

import pytest

from sparktop.alerts.context import Expected
from sparktop.inventory import load_inventory
from sparktop.model import EngineSample, is_num
from sparktop.plan import Plan
from sparktop.sweep.expected import matched
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from tests.sim_helpers import running_sim

DEADLINE_S = 30.0


async def test_each_engine_sample_is_estimated_once_for_the_strip_and_the_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    estimated: list[EngineSample] = []
    real = matched.window_expected

    def counted(*args: object, **kwargs: object) -> object:
        estimated.append(args[1])  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(matched, "window_expected", counted)
    async with running_sim(nodes=2, scenario="normal", speed=5.0) as sim:
        plan = Plan.from_inventory(load_inventory(sim.inventory_path), interval_s=0.5)
        alerts = plan.alert_engine()
        rules_asked: list[EngineSample] = []
        rules_expected = alerts.expected
        assert rules_expected is not None and plan.matched is not None

        def asked(sample: EngineSample) -> Expected | None:
            rules_asked.append(sample)
            return rules_expected(sample)

        alerts.expected = asked
        app = SparktopApp(plan, plan.sources(), alerts, autostart=False)
        async with app.run_test(size=(160, 50)) as pilot:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            strip_rows = 0
            while strip_rows < 3:
                assert loop.time() < deadline, f"no busy engine sample: {app.state.engines}"
                await app.poll_now()
                await pilot.pause()
                app.tick()  # a second tick on the same samples: nothing estimated again
                (sample,) = app.state.engines.values()
                if sample.ok and is_num(sample.running) and sample.running >= 1:
                    block = app.query_one(EnginePanel).blocks[sample.engine]
                    strip = str(block.query_one("ExpectedStrip").render())
                    shown = "mix of running" in strip or "for running" in strip
                    if shown and sample in rules_asked:
                        strip_rows += 1
    # Both consumers read each busy sample; each sample was estimated once.
    assert strip_rows == 3 and rules_asked
    assert len(estimated) == len({id(s) for s in estimated}), "a sample estimated twice"
    assert plan.matched.computed == len(estimated)
    assert {id(s) for s in rules_asked} <= {id(s) for s in estimated}
