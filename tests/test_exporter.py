"""``sparktop exporter`` scraped by a real Prometheus, its listen rules, and the shipped
Prometheus config and rules checked with ``promtool``."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktop.errors import UserError
from sparktop.exporter.server import MetricsEndpoint, parse_listen
from sparktop.sim.gpu import Fault
from sparktop.sim.promrun import Prometheus, binary, free_port, start_prometheus, until
from tests.prom_helpers import require
from tests.sim_helpers import running_sim

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "prometheus"


def _exporter(inventory: Path, listen: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sparktop", "exporter", "-i", str(inventory), "--listen", listen],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def _page(url: str) -> str:
    async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
        try:
            response = await client.get(url)
        except httpx.HTTPError:
            return ""
    return response.text if response.status_code == 200 else ""


@pytest.mark.prometheus
async def test_prometheus_scrapes_the_exporters_judgements(tmp_path: Path) -> None:
    require()
    async with running_sim(nodes=4, alert_hold_s=1.0) as sim:
        await sim.step()  # the scenario's opening recovery, so it cannot undo the fault
        sim.cluster.set_fault(sim.targets.thermal, Fault.THERMAL)
        listen = f"127.0.0.1:{free_port()}"
        exporter = _exporter(sim.inventory_path, listen)
        prom: Prometheus | None = None
        try:
            page = await until(
                lambda: _page(f"http://{listen}/metrics"),
                lambda text: 'sparktop_alert{rule="gpu.throttle"' in text,
                60,
                "the throttle alert",
            )
            families = {f.name for f in text_string_to_metric_families(page)}
            assert {"sparktop_gpu_throttled", "sparktop_engine_kv_free_tokens"} <= families
            assert not [f for f in families if f.startswith(("vllm", "DCGM", "node_"))]
            config = {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                "scrape_configs": [
                    {"job_name": "sparktop", "static_configs": [{"targets": [listen]}]}
                ],
            }
            prom = await start_prometheus(config, tmp_path / "prometheus")
            thermal = sim.targets.thermal
            (throttled,) = await prom.until_series(
                f'sparktop_gpu_throttled{{node="{thermal}"}} == 1', timeout_s=60
            )
            assert throttled["metric"]["job"] == "sparktop"
            alerts = await prom.until_series(
                f'sparktop_alert{{rule="gpu.throttle",subject=~"{thermal}.*"}}', timeout_s=60
            )
            assert alerts[0]["metric"]["severity"] in ("warning", "critical")
            healthy = await prom.query('sparktop_gpu_throttled{node="spark-1"}')
            assert healthy and healthy[0]["value"][1] == "0"
            assert await prom.until_series("sparktop_gpu_baseline_sm_clock_mhz > 2000", 3)
            polls = await prom.until_series('sparktop_source_polls_total{kind="node"} > 2', 4)
            assert {p["metric"]["source"] for p in polls} == set(sim.ssh)
        finally:
            if prom is not None:
                prom.close()
            exporter.send_signal(signal.SIGTERM)
            _out, err = await asyncio.to_thread(exporter.communicate, timeout=15)
        assert exporter.returncode == 0, err.decode()
        assert f"serving http://{listen}/metrics" in err.decode()
        assert "Traceback" not in err.decode()


def test_listen_addresses() -> None:
    assert parse_listen("9464") == ("127.0.0.1", 9464)
    assert parse_listen(":9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    assert parse_listen("0.0.0.0:9464") == ("0.0.0.0", 9464)
    for bad in ("spark-1:9464", "127.0.0.1:0", "127.0.0.1:http", "127.0.0.1:70000"):
        with pytest.raises(UserError, match="--listen"):
            parse_listen(bad)


def test_a_taken_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    taken = MetricsEndpoint(f"127.0.0.1:{free_port()}")
    try:
        inventory = tmp_path / "cluster.yaml"
        inventory.write_text("nodes:\n  - {name: a, host: 127.0.0.1, port: 1}\n")
        result = subprocess.run(
            [sys.executable, "-m", "sparktop", "exporter", "-i", str(inventory),
             "--listen", f"127.0.0.1:{taken.port}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        taken.sock.close()
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot listen there" in result.stderr


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("command", "path"),
    [("config", EXAMPLES / "prometheus.yml"), ("rules", EXAMPLES / "sparktop.rules.yml")],
)
def test_shipped_prometheus_files_pass_promtool(command: str, path: Path) -> None:
    promtool = binary("promtool")
    if promtool is None:
        require("promtool")
    assert promtool is not None
    result = subprocess.run(
        [promtool, "check", command, str(path)],
        capture_output=True, text=True, timeout=60, cwd=path.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_exporter_stops_cleanly_with_the_status_of_the_signal(
    tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    """Ctrl-C ends ``sparktop exporter`` with 130 like every other command; SIGTERM (a service
    manager's stop) with 0; neither prints a traceback."""
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text("cluster: here\nnodes: [{name: here, local: true}]\n")
    exporter = _exporter(inventory, f"127.0.0.1:{free_port()}")
    try:
        assert exporter.stderr is not None
        line = exporter.stderr.readline().decode()  # written once it serves
        assert "serving http://127.0.0.1:" in line
        exporter.send_signal(sig)
        _out, err = exporter.communicate(timeout=15)
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait()
    assert exporter.returncode == status, err.decode()
    assert "Traceback" not in err.decode()
