"""The monitor loads only what its plan needs: on engines alone (as vllm-top watches one
server) neither SSH, cryptography, the Prometheus client, the recorder, the simulator, the
plot library nor httpx's command-line client is imported. Each is megabytes of RSS
(asyncssh with cryptography ~15 MB); docs/performance.md has the figures.

The check runs in a fresh interpreter: the command line's parser, the plan, its sources and
the app (headless) as ``sparktop --inventory FILE`` builds them, until the engine's first
sample from a loopback server serving the REAL captured vLLM 0.32.0 page has arrived."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from sparktop.testing.http_stub import StubServer, text
from tests.real_page import REAL_LOAD_PAGE

NOT_FOR_ENGINES = (
    "asyncssh",
    "cryptography",
    "prometheus_client",
    "plotext",
    "textual_plotext",
    "click",
    "pygments",
    "importlib.metadata",
    "sparktop.sources.ssh.source",
    "sparktop.record.writer",
    "sparktop.commands.sim",
    "sparktop.sim",
    "sparktop.report.snapshot_table",
    "sparktop.ui.widgets.budget",
    "sparktop.sweep.budget.budget",
    "sparktop.ui.screens.help",
    "sparktop.ui.screens.node_detail",
    "sparktop.ui.screens.engine_detail",
    "sparktop.ui.screens.curve",
    "textual.widgets._data_table",
    "httpx",
    "httpcore",
    "anyio",
    "urllib.request",
    "email",
    "http.cookiejar",
    "zstandard",
)
"""Loaded only when a plan or a key asks: SSH nodes, a page the fast reader refuses,
``--record``, the ``sim`` command, ``c``, ``b`` (the budget pane, built when first opened),
``?`` (help, which lists every widget's keys) or Enter (a node's or an engine's detail screen,
with the ``DataTable`` they alone use); httpx's CLI and pydantic's plugin scan
(``importlib.metadata``) never. Engines are read over h11 directly
(:mod:`sparktop.sources.engines.wire`): httpx, httpcore, anyio and what httpx imports
(``urllib.request``, ``email``, ``http.cookiejar``, zstandard) are not loaded."""

MONITOR = """
import asyncio, json, sys
from sparktop import cli

argv = ["--inventory", sys.argv[1]]
args = cli.parse_args(cli.build_parser(cli.wanted_commands(argv)), argv)
from sparktop.alerts.pipeline import AlertOutputs
from sparktop.inventory import load_inventory
from sparktop.plan import Plan
from sparktop.ui.app import SparktopApp

plan = Plan.from_inventory(load_inventory(args.inventory))
outputs = AlertOutputs.from_args(args)
alerts = outputs.wrap(plan.alert_engine(), plan.header)


async def main():
    app = SparktopApp(plan, plan.sources(), alerts)
    async with app.run_test(size=(160, 48)) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not (app.state.engines.get("vllm") and app.state.engines["vllm"].ok):
            if loop.time() > deadline:
                return "no sample: " + repr(app.state.engines)
            await pilot.pause(0.05)
        app.tick()
        await pilot.pause()
    return "ok"


print(json.dumps([asyncio.run(main()), sorted(sys.modules)]))
"""


async def test_an_engine_only_monitor_loads_no_ssh_and_nothing_its_plan_does_not_use(
    tmp_path: Path,
) -> None:
    routes = {"/metrics": text(REAL_LOAD_PAGE.read_bytes())}
    async with StubServer(routes) as server:
        inventory = tmp_path / "cluster.yaml"
        inventory.write_text(f"cluster: one\nengines:\n  - {{name: vllm, url: '{server.url}'}}\n")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", MONITOR, str(inventory),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 240)
        assert server.count("/metrics") >= 1
    assert proc.returncode == 0, err.decode()[-3000:]
    status, modules = json.loads(out.decode().splitlines()[-1])
    assert status == "ok"
    loaded = set(modules)
    assert "sparktop.ui.app" in loaded and "h11" in loaded  # the monitor did run
    wrong = [m for m in NOT_FOR_ENGINES if m in loaded]
    assert wrong == [], f"an engine-only monitor imported {wrong}"
