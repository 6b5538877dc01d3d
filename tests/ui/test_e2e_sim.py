"""End to end: the app polls the loopback simulator (real SSH and HTTP) and shows it all."""

from __future__ import annotations

import asyncio

from sparktop.inventory import load_inventory
from sparktop.model import is_num
from sparktop.plan import Plan
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.node_table import NodeTable
from sparktop.ui.widgets.text_block import TextBlock
from tests.sim_helpers import running_sim

DEADLINE_S = 30.0


def _ready(app: SparktopApp, nodes: int) -> bool:
    state = app.state
    engines = list(state.engines.values())
    return (
        sum(1 for s in state.nodes.values() if s.ok) == nodes
        and bool(engines)
        and all(e.ok and is_num(e.decode_tps) and is_num(e.running) for e in engines)
    )


async def test_app_shows_every_simulated_node_and_the_engine_numbers() -> None:
    async with running_sim(nodes=4, scenario="normal", speed=4.0) as sim:
        inventory = load_inventory(sim.inventory_path)
        run = Plan.from_inventory(inventory, interval_s=0.5)
        app = SparktopApp(run, run.sources())
        async with app.run_test(size=(120, 40)) as pilot:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while not _ready(app, 4):
                assert loop.time() < deadline, f"not ready: {app.state.nodes} {app.state.engines}"
                await pilot.pause(0.2)
            app.tick()
            await pilot.pause()
            app.tick()  # a new engine block renders on the tick after it mounts
            await pilot.pause()

            table = app.query_one(NodeTable)
            shown = {key.split("\x1f")[0] for key in table.row_keys}
            assert shown == {n.name for n in inventory.nodes}
            for key in table.row_keys:
                assert table.cell_text(key, "state") == "ok"

            (engine_name,) = [e.name for e in inventory.engines]
            block = app.query_one(EnginePanel).blocks[engine_name]
            sample = block.sample  # the sample the block last rendered
            assert sample is not None
            text = str(block.query_one(".engine-lines", TextBlock).render())
            assert f"running {sample.running:.0f}" in text
            assert f"decode {sample.decode_tps:,.0f} tok/s" in text
            assert "expected" in str(block.query_one("ExpectedStrip").render())

            screen = app.export_screenshot()
            for node in inventory.nodes:
                assert node.name in screen
