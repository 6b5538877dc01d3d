"""The monitor on ``--endpoint`` servers (no inventory), through Textual's pilot: each engine's
block is titled by its address, its kind read from its page."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktop.inventory.endpoints import endpoint_engines
from sparktop.plan import Plan
from sparktop.testing.llamacpp_stub import serve_llamacpp
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.test_app_pilot import static_text


async def test_endpoint_engines_are_shown_by_their_address(tmp_path: Path) -> None:
    with serve_llamacpp("load") as llama:
        name = llama.url.removeprefix("http://")
        plan = Plan.from_inventory(None, engines=endpoint_engines([llama.url + "/"]))
        app = SparktopApp(plan, plan.sources())
        async with app.run_test(size=(100, 30)) as pilot:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            lines = ""
            while not lines:  # the first scrape, then the block mounts and renders
                assert loop.time() < deadline, app.state.engines
                app.tick()
                await pilot.pause(0.05)
                block = app.query_one(EnginePanel).blocks.get(name)
                lines = static_text(block.query_one(".engine-lines", TextBlock)) if block else ""
            assert list(app.query_one(EnginePanel).blocks) == [name]
            assert app.state.engines[name].kind == "llamacpp"
            assert "running 2/2" in lines
            app.save_screenshot("endpoint-monitor.svg", str(tmp_path))
            await pilot.press("q")
    assert (tmp_path / "endpoint-monitor.svg").stat().st_size > 0


def test_without_a_server_the_engines_pane_names_endpoint() -> None:
    from sparktop.ui.notices import no_engine_text

    text = no_engine_text(Plan.from_inventory(None), [])
    assert "name yours with --endpoint URL" in text
