"""The monitor on one ``kind: llamacpp`` engine: a loopback llama-server stand-in serving the
REAL captured page, driven through Textual's pilot: one engine row, its load, and TTFT
n/a with llama.cpp's reason."""

from __future__ import annotations

import asyncio

from sparktop.inventory import parse_inventory
from sparktop.plan import Plan
from sparktop.testing.llamacpp_stub import serve_llamacpp
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.test_app_pilot import static_text


async def test_one_llamacpp_engine_row_in_the_monitor() -> None:
    with serve_llamacpp("load") as llama:
        text = f"cluster: test\nengines:\n  - {{name: llama, url: '{llama.url}', kind: llamacpp}}\n"
        plan = Plan.from_inventory(parse_inventory(text, "cluster.yaml"), interval_s=1.0)
        app = SparktopApp(plan, plan.sources())
        async with app.run_test(size=(140, 44)) as pilot:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not (app.state.engines.get("llama") and app.state.engines["llama"].ok):
                assert loop.time() < deadline, app.state.engines
                await pilot.pause(0.1)
            panel = app.query_one(EnginePanel)
            lines = ""
            while not lines:  # the engine block mounts, then renders on a later tick
                assert loop.time() < deadline, "the engine block never rendered"
                app.tick()
                await pilot.pause(0.05)
                block = panel.blocks.get("llama")
                lines = static_text(block.query_one(".engine-lines", TextBlock)) if block else ""
            assert list(panel.blocks) == ["llama"]
            assert "running 2/2" in lines  # slots from /props
            assert "no vLLM" not in lines
            sample = app.state.engines["llama"]
            assert sample.kind == "llamacpp" and sample.waiting == 6
            assert sample.ttft_p50.reason == "llama.cpp exports no latency histograms"  # type: ignore[union-attr]
            app.save_screenshot("llamacpp-monitor.svg", "/tmp")
            await pilot.press("q")
