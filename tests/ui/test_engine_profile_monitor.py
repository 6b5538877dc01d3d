"""The monitor with a llama.cpp engine whose inventory entry names its own ``profile:`` while
the top-level one is a vLLM sweep: its expected strip and the budget pane use its own profile
(the top-level one would give it no expected row at all)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sparktop.inventory import parse_inventory
from sparktop.plan import Plan
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from sparktop.testing.llamacpp_stub import serve_llamacpp
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.budget import BudgetPane
from sparktop.ui.widgets.budget_curve import BudgetCurve
from sparktop.ui.widgets.engine_panel import EnginePanel, ExpectedStrip
from tests.test_engine_profile import _llama_profile
from tests.ui.fakes import open_budget
from tests.ui.test_app_pilot import static_text

MEASURED_VLLM = "the profile measured a vLLM engine"


@pytest.mark.parametrize("own", [True, False])
async def test_the_llamacpp_engine_is_read_against_its_own_profile(
    tmp_path: Path, own: bool
) -> None:
    _llama_profile(tmp_path / "sweeps")
    with serve_llamacpp("load") as llama:
        entry = f"  - {{name: llama, url: '{llama.url}', kind: llamacpp"
        entry += ", profile: sweeps/llama-sweep.yaml}\n" if own else "}\n"
        text = f"cluster: test\nprofile: {DEFAULT_PROFILE}\nengines:\n{entry}"
        plan = Plan.from_inventory(parse_inventory(text, "cluster.yaml", base_dir=tmp_path))
        app = SparktopApp(plan, plan.sources())
        async with app.run_test(size=(160, 44)) as pilot:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            strip = ""
            while not strip:  # the block mounts, then renders its strip on a later tick
                assert loop.time() < deadline, "the expected strip never rendered"
                app.tick()
                await pilot.pause(0.05)
                block = app.query_one(EnginePanel).blocks.get("llama")
                strip = static_text(block.query_one(ExpectedStrip)) if block else ""
            assert (MEASURED_VLLM in strip) is not own, strip
            await open_budget(pilot)
            pane = app.query_one(BudgetPane)
            wanted = "llama-sweep" if own else DEFAULT_PROFILE
            assert pane.profile is not None and pane.profile.name == wanted
            assert app.query_one(BudgetCurve).profile is pane.profile
            assert pane.profile_limits  # a profile the inventory names describes its engines
            await pilot.press("q")
