"""The monitor on an inventory whose nodes and engines come from a real Prometheus, with
``--serve-metrics``: rows, the engine block and the budget pane from Prometheus data, and the
judgements on ``/metrics`` while it runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from sparktop.exporter.server import MetricsEndpoint
from sparktop.model import is_num
from sparktop.plan import Plan
from sparktop.sim.promrun import free_port
from sparktop.ui.app import SparktopApp, serve_metrics
from sparktop.ui.widgets.node_table import NodeTable
from sparktop.ui.widgets.text_block import TextBlock
from tests.prom_helpers import prom_cluster, prom_inventory
from tests.ui.fakes import open_budget

pytestmark = pytest.mark.prometheus


async def test_monitor_and_budget_on_prometheus_with_served_metrics(tmp_path: Path) -> None:
    async with prom_cluster(tmp_path, nodes=3) as (sim, prom):
        inventory, _ = prom_inventory(sim, prom, tmp_path)
        plan = Plan.from_inventory(inventory, interval_s=2.0)
        app = SparktopApp(plan, plan.sources())
        endpoint = MetricsEndpoint(f"127.0.0.1:{free_port()}")
        serve_metrics(app, endpoint)
        async with app.run_test(size=(140, 44)) as pilot:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not (
                sum(s.ok for s in app.state.nodes.values()) == 3
                and any(e.ok and is_num(e.kv_free_tokens) for e in app.state.engines.values())
            ):
                assert loop.time() < deadline, (app.state.nodes, app.state.engines)
                await pilot.pause(0.2)
            app.tick()
            await pilot.pause()
            table = app.query_one(NodeTable)
            assert {key.split("\x1f")[0] for key in table.row_keys} == {
                "spark-1",
                "spark-2",
                "spark-3",
            }
            states = [table.cell_text(key, "state") for key in table.row_keys]
            assert states == ["ok"] * 3, states
            await open_budget(pilot)
            await pilot.pause()
            budget = str(app.query_one("#budget-out", TextBlock).render())
            assert "[server]" in budget  # the free part of the pool, live from Prometheus
            async with httpx.AsyncClient(trust_env=False) as client:
                page = (await client.get(endpoint.url)).text
            assert 'sparktop_node_up{node="spark-2"} 1.0' in page
            assert 'sparktop_source_up{kind="engine",source="dsv41"} 1.0' in page
            assert "DCGM_FI_DEV" not in page and "vllm:" not in page
            await pilot.press("escape", "q")
