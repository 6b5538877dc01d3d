"""The demo with ``--llamacpp``: the simulator serves a llama.cpp engine (llama-server's
``/metrics`` families, ``/props``, ``/tokenize``) beside the vLLM one, and the monitor,
polling both over loopback HTTP, shows it through Textual's pilot: its row with the slots
from ``/props``, its rates, TTFT ``n/a`` with llama.cpp's reason, and the vLLM engine
unchanged beside it."""

from __future__ import annotations

import asyncio

from sparktop.inventory import load_inventory
from sparktop.model import is_num
from sparktop.plan import Plan
from sparktop.sim.llamacpp import SLOTS
from sparktop.sim.runner import LLAMACPP_ENGINE
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.sim_helpers import running_sim

DEADLINE_S = 60.0


async def test_the_demo_shows_a_llamacpp_engine_beside_the_vllm_one() -> None:
    async with running_sim(nodes=4, scenario="normal", speed=4.0, llamacpp=True) as sim:
        inventory = load_inventory(sim.inventory_path)
        kinds = {e.name: e.kind for e in inventory.engines}
        assert kinds == {"dsv41": "vllm", LLAMACPP_ENGINE: "llamacpp"}
        plan = Plan.from_inventory(inventory, interval_s=0.5)
        app = SparktopApp(plan, plan.sources())
        async with app.run_test(size=(150, 50)) as pilot:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S

            def llama_ready() -> bool:
                sample = app.state.engines.get(LLAMACPP_ENGINE)
                return bool(sample and sample.ok and is_num(sample.decode_tps))

            while not llama_ready():
                assert loop.time() < deadline, f"llama never ready: {app.state.engines}"
                await pilot.pause(0.2)
            panel = app.query_one(EnginePanel)
            lines = ""
            while not lines:  # the engine block mounts, then renders on a later tick
                assert loop.time() < deadline, "the llama.cpp block never rendered"
                app.tick()
                await pilot.pause(0.1)
                block = panel.blocks.get(LLAMACPP_ENGINE)
                lines = str(block.query_one(".engine-lines", TextBlock).render()) if block else ""
            # The sample those lines were drawn from: the state may hold a newer one by now,
            # its running count another.
            sample = block.sample if block is not None and block.sample is not None else None
            assert sample is not None and sample.kind == "llamacpp"
            assert sample.max_num_seqs == SLOTS  # total_slots from /props
            assert f"running {sample.running:.0f}/{SLOTS}" in lines
            assert "no vLLM" not in lines
            reason = "llama.cpp exports no latency histograms"
            assert sample.ttft_p50.reason == reason  # type: ignore[union-attr]
            assert sample.itl_p50.reason == reason  # type: ignore[union-attr]
            assert set(panel.blocks) == {"dsv41", LLAMACPP_ENGINE}
            assert app.state.engines["dsv41"].kind == "vllm"
            screen = app.export_screenshot()
            assert LLAMACPP_ENGINE in screen and "dsv41" in screen
