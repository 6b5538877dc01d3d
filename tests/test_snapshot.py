"""``sparktop snapshot``: the one-shot poll, its JSON document, its table and the command line.

Nodes are asyncssh servers on loopback answering from the nvidia-smi cases
(gb10-query-with-header.csv, gb10-thermal-slowdown.csv, gb10-hidden-low-power.csv,
driver-mismatch.txt).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import subprocess
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from rich.console import Console

from sparktop.alerts.oneshot import judge_now
from sparktop.cli import main
from sparktop.cluster import ClusterState
from sparktop.inventory import parse_inventory
from sparktop.model import NA, EngineSample, EngineState, GpuSample, NodeMemory, NodeSample
from sparktop.plan import Plan
from sparktop.report.snapshot_table import render_table
from sparktop.sim.sshserver import SshServerHandle, start_ssh_server
from sparktop.snapshot import SCHEMA, Snapshot, snapshot_json, take_snapshot
from sparktop.sources.ssh.source import SshSource
from sparktop.ui import views
from tests.ssh_helpers import (
    GB10_CSV,
    LOW_POWER_CSV,
    THERMAL_CSV,
    ClientFiles,
    FakeNvidiaSmi,
    asyncssh_responder,
    client_files,
    login_user,
    node,
    ssh_source,
)

T = TypeVar("T")


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return client_files(tmp_path / "client")


async def _start(files: ClientFiles, fake: FakeNvidiaSmi) -> SshServerHandle:
    server = await start_ssh_server(asyncssh_responder(fake), authorized_client_keys=[files.key])
    files.trust(server.known_hosts_line())
    return server


@pytest.fixture
async def cluster(files: ClientFiles) -> AsyncIterator[list[SshServerHandle]]:
    """spark-1 normal, spark-2 thermal slowdown, spark-3 hung (low-power case), spark-4 driver
    mismatch."""
    fakes = [
        FakeNvidiaSmi(GB10_CSV),
        FakeNvidiaSmi(THERMAL_CSV),
        FakeNvidiaSmi(LOW_POWER_CSV),
        FakeNvidiaSmi(driver="mismatch"),
    ]
    servers = [await _start(files, fake) for fake in fakes]
    servers[2].hang()
    yield servers
    for server in servers:
        await server.close()


async def _snapshot(files: ClientFiles, servers: list[SshServerHandle]) -> Snapshot:
    sources = [ssh_source(files, node(f"spark-{i}", s.port)) for i, s in enumerate(servers, 1)]
    return await take_snapshot(sources, cluster="loopback", timeout_s=30)


async def test_snapshot_json_document(files: ClientFiles, cluster: list[SshServerHandle]) -> None:
    snap = await _snapshot(files, cluster)
    doc = json.loads(json.dumps(snapshot_json(snap), allow_nan=False))

    assert doc["schema"] == SCHEMA and doc["cluster"] == "loopback"
    assert doc["time"].endswith("Z") and doc["complete"] is False and doc["engines"] == []
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert list(nodes) == ["spark-1", "spark-2", "spark-3", "spark-4"]  # inventory order

    gpu = nodes["spark-1"]["gpus"][0]
    assert gpu["sm_clock_mhz"] == 2509 and gpu["max_sm_clock_mhz"] == 3003
    assert gpu["temperature_c"] == 55 and gpu["power_w"] == 41.37
    assert gpu["utilization_pct"] == 97 and gpu["clock_event_mask"] == "0x0"
    assert gpu["memory_used_mib"] is None and gpu["missing"]["memory_used_mib"] == "[N/A]"
    assert gpu["slowdown_counters_us"]["sw_thermal_us"] == 0
    memory = nodes["spark-1"]["memory"]
    assert memory["unified"] is True and memory["gpu_held_mib"] == 19135
    assert memory["total_mib"] == pytest.approx(127600748 / 1024)

    assert nodes["spark-2"]["gpus"][0]["slowdowns"] == ["sw_thermal_slowdown"]
    hung = nodes["spark-3"]
    assert hung["state"] == "nvidia-smi not answering" and hung["ok"] is False
    assert hung["message"].endswith("(probe timed out after 1 s)") and hung["since"]
    mismatch = nodes["spark-4"]
    assert mismatch["state"] == "driver/library mismatch"
    assert mismatch["message"] == "driver/library mismatch (reboot or reload the driver)"
    # The SSH probe reads the driver; unknown text is null with a reason, never "".
    assert nodes["spark-1"]["message"] is None and nodes["spark-1"]["driver_version"] == "580.95.05"
    assert nodes["spark-1"]["missing"] == {}
    assert mismatch["driver_version"] is None
    assert mismatch["missing"] == {"driver_version": "not reported"}
    assert not list(_empty_strings(doc))


def _empty_strings(value: object, path: str = "") -> Iterator[str]:
    """Where ``""`` occurs in a JSON document (keys included)."""
    if value == "":
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            if key == "":
                yield f"{path}.<key>"
            yield from _empty_strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _empty_strings(item, f"{path}[{i}]")


def test_unknown_text_is_null_in_json() -> None:
    gpu = GpuSample(index=0, uuid="", name="", pstate="")
    node_ = NodeSample(node="n", time_s=0.0, gpus=(gpu,), driver_version="")
    engine = EngineSample(engine="e", time_s=0.0, model="", message="")
    doc = snapshot_json(Snapshot("c", 0.0, (node_,), (engine,)))
    assert not list(_empty_strings(doc))
    entry: Any = doc["nodes"]
    g = entry[0]["gpus"][0]
    assert (g["uuid"], g["name"], g["pstate"]) == (None, None, None)
    assert g["missing"]["uuid"] == "not reported"
    e: Any = doc["engines"]
    assert (e[0]["model"], e[0]["message"]) == (None, None)
    assert e[0]["missing"]["model"] == "not reported"
    known = NodeSample(node="n", time_s=0.0, driver_version="580.95.05", message="x")
    node_doc: Any = snapshot_json(Snapshot("c", 0.0, (known,)))["nodes"]
    assert node_doc[0]["driver_version"] == "580.95.05" and node_doc[0]["missing"] == {}


async def test_snapshot_table(files: ClientFiles, cluster: list[SshServerHandle]) -> None:
    snap = await _snapshot(files, cluster)
    out = io.StringIO()
    render_table(snap, Console(file=out, width=200, color_system=None))
    text = out.getvalue()

    assert "2509/3003" in text and "1833/3003" in text
    assert "·GPU 19G" in text and "U = unified" in text
    assert "sw_thermal_slowdown" in text
    # A node that did not answer is a failure; one that answered with no GPU data to read
    # (a driver/library mismatch) is degraded, under its own heading.
    failures, no_gpu = text.split("failures:")[1], text.split("no GPU data:")[1]
    assert "spark-3: nvidia-smi not answering (probe timed out after 1 s)" in failures
    no_gpu = no_gpu.split("failures:")[0]
    assert "spark-4: driver/library mismatch (reboot or reload the driver)" in no_gpu
    assert "spark-4" not in failures and "spark-3" not in no_gpu


def test_table_prints_remote_text_literally() -> None:
    gpu = GpuSample(index=0, uuid="GPU-x", name="[bold red]evil[/bold red]", clock_event_mask=0x40)
    sample = NodeSample(node="spark-1", time_s=0.0, gpus=(gpu,), memory=NodeMemory(unified=True))
    out = io.StringIO()
    render_table(Snapshot("c", 0.0, (sample,)), Console(file=out, width=200, color_system=None))
    assert "[bold red]evil[/bold red]" in out.getvalue()
    assert "hw_thermal_slowdown" in out.getvalue()


class _Raises:
    name = "broken"
    kind = "node"

    async def sample(self) -> NodeSample:
        raise RuntimeError("source bug")

    async def aclose(self) -> None:
        return None


class _Never:
    name = "stuck"
    kind = "engine"

    def __init__(self) -> None:
        self.closed = False

    async def sample(self) -> EngineSample:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        self.closed = True


async def test_a_raising_or_silent_source_is_reported_not_fatal() -> None:
    stuck = _Never()
    snap = await take_snapshot([_Raises(), stuck], cluster="c", timeout_s=0.05)
    assert snap.nodes[0].state.value == "error" and "source bug" in snap.nodes[0].message
    # It may be connected and sending (a page that drips in): not answering, not unreachable.
    assert snap.engines[0].state is EngineState.NOT_ANSWERING
    assert snap.engines[0].message == "no complete answer within the snapshot's 0.05 s deadline"
    assert stuck.closed and not snap.complete


class _SlowStart:
    """A source whose start holds the loop (connection set-up for 2,000 nodes on one loop)
    for longer than the whole snapshot deadline, before it ever awaits."""

    name = "slow-start"
    kind = "node"

    async def sample(self) -> NodeSample:
        import time

        time.sleep(0.3)  # CPU-bound start: the loop is held, as a real one holds it
        return NodeSample(node=self.name, time_s=0.0)

    async def aclose(self) -> None:
        return None


class _Late(_Never):
    """A silent source that notes whether it ran past its first step."""

    def __init__(self) -> None:
        super().__init__()
        self.ran_on = False

    async def sample(self) -> EngineSample:
        await asyncio.sleep(0)
        self.ran_on = True  # still inside the deadline after its first step
        return await super().sample()


async def test_the_deadline_is_counted_from_the_call_for_every_source() -> None:
    """Trial 34 item 13: 2,000 held nodes under --timeout 3 took 11.8 s; each task's timeout
    started when the task did, so the ones started late ran past the stated deadline. Here
    the first source holds the loop for 0.3 s under a 0.2 s deadline: the next one starts
    after the deadline and is cut at its first step, not given 0.2 s of its own."""
    late = _Late()
    snap = await take_snapshot([_SlowStart(), late], cluster="c", timeout_s=0.2)
    assert not late.ran_on
    assert snap.engines[0].message == "no complete answer within the snapshot's 0.2 s deadline"
    assert late.closed


def test_engine_json_keeps_missing_reasons() -> None:
    engine = EngineSample(engine="dsv41", time_s=0.0, running=3.0, kv_usage=NA("metric absent"))
    doc = snapshot_json(Snapshot("c", 0.0, (), (engine,)))
    engines = doc["engines"]
    assert isinstance(engines, list) and len(engines) == 1
    entry: Any = engines[0]
    assert entry["running"] == 3.0 and entry["kv_usage"] is None
    assert entry["missing"]["kv_usage"] == "metric absent"
    assert entry["state"] == "ok" and doc["complete"] is True


def test_build_sources_follows_the_inventory() -> None:
    inventory = parse_inventory(
        "cluster: c\n"
        "ssh: {user: ops, command_timeout_s: 2}\n"
        "nodes:\n"
        "  - {name: spark-1, host: 192.0.2.10}\n"
        "  - {name: spark-2, host: 192.0.2.11, port: 2202, command_timeout_s: 7}\n"
        "  - {name: here, local: true}\n"
        "engines:\n"
        "  - {name: dsv41, url: 'http://192.0.2.10:8015', nodes: [spark-1, spark-2]}\n",
        "cluster.yaml",
    )
    sources = Plan.from_inventory(inventory).sources()
    assert [s.name for s in sources] == ["spark-1", "spark-2", "here", "dsv41"]
    first, second = sources[0], sources[1]
    assert isinstance(first, SshSource) and isinstance(second, SshSource)
    assert first.settings.user == "ops" and first.command_timeout_s == 2
    assert second.settings.port == 2202 and second.command_timeout_s == 7
    assert getattr(sources[2], "kind", None) == "node"
    assert getattr(sources[3], "kind", None) == "engine"


# -- the command line ----------------------------------------------------------------------------


class _Loop:
    """An event loop in a thread, so servers keep running while ``main()`` runs its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def background() -> Iterator[_Loop]:
    loop = _Loop()
    yield loop
    loop.stop()


def _inventory(tmp_path: Path, files: ClientFiles, ports: list[int]) -> Path:
    doc = {
        "cluster": "loopback",
        "ssh": {
            "user": login_user(),
            "identity_file": str(files.identity_file),
            "known_hosts": str(files.known_hosts),
            "config": str(files.config),
            "command_timeout_s": 1,
        },
        "nodes": [
            {"name": f"spark-{i}", "host": "127.0.0.1", "port": p} for i, p in enumerate(ports, 1)
        ],
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(
    ("csvs", "expected_status"),
    [((GB10_CSV, GB10_CSV), 0), ((GB10_CSV, THERMAL_CSV), 4)],
    ids=["all-well-0", "throttled-degraded-4"],
)
def test_cli_table_exit_0_all_well_4_degraded_when_every_node_answers(
    tmp_path: Path,
    files: ClientFiles,
    background: _Loop,
    capsys: pytest.CaptureFixture[str],
    csvs: tuple[Path, Path],
    expected_status: int,
) -> None:
    """Every node answered: 0 when all is well; 4 (degraded, not "all is well") when one is
    throttled, even in a single poll with nothing critical (issue 31)."""
    servers = [background.run(_start(files, FakeNvidiaSmi(csv))) for csv in csvs]
    try:
        ports = [s.port for s in servers]
        status = main(["snapshot", "--inventory", str(_inventory(tmp_path, files, ports))])
    finally:
        for server in servers:
            background.run(server.close())
    out = capsys.readouterr().out
    assert status == expected_status
    assert "spark-1" in out and "spark-2" in out and "failures:" not in out
    assert ("throttled" in out) == (expected_status == 4)


def test_cli_exit_1_and_reasons_when_a_node_is_down(
    tmp_path: Path, files: ClientFiles, background: _Loop, capsys: pytest.CaptureFixture[str]
) -> None:
    up = background.run(_start(files, FakeNvidiaSmi()))
    down = background.run(_start(files, FakeNvidiaSmi()))
    background.run(down.go_away())
    try:
        ports = [up.port, down.port]
        status = main(["snapshot", "-i", str(_inventory(tmp_path, files, ports)), "--json"])
    finally:
        for server in (up, down):
            background.run(server.close())
    doc = json.loads(capsys.readouterr().out)
    assert status == 1  # did not answer: exit 1 (issue 2); 3 is for conditions seen in data
    assert [n["state"] for n in doc["nodes"]] == ["ok", "unreachable"]
    assert doc["nodes"][1]["message"] == "connection refused"  # since when: its own field
    # "critical" says what the alerts say; the exit status keeps 3 for data that answered.
    assert doc["critical"] is True
    down_alerts = [a for a in doc["alerts"] if a["rule"] == "node.down"]
    assert [(a["node"], a["severity"]) for a in down_alerts] == [
        (doc["nodes"][1]["node"], "critical")
    ]


def test_cli_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot"]) == 2  # neither --inventory nor --endpoint
    assert "-i/--inventory --endpoint is required" in capsys.readouterr().err
    assert main(["snapshot", "--inventory", str(tmp_path / "missing.yaml")]) == 2
    path = tmp_path / "c.yaml"
    path.write_text("nodes:\n  - {name: a, host: 127.0.0.1}\n")
    assert main(["snapshot", "--inventory", str(path), "--timeout", "0"]) == 2
    err = capsys.readouterr().err
    assert "missing.yaml" in err and "--timeout must be a positive number" in err
    assert "Traceback" not in err


README_JQ_NOT_OK = ".nodes[] | select(.ok|not) | .node"
"""The README's filter for the nodes to look at (``… | .node`` to compare names)."""


def test_snapshot_states_are_the_monitors(
    tmp_path: Path, files: ClientFiles, background: _Loop, capsys: pytest.CaptureFixture[str]
) -> None:
    """A throttled (91 °C, SW thermal slowdown) or hidden-low-power node is not ``ok`` in the
    JSON, as it is not in the monitor's state column, and the README's jq example finds it."""
    csvs = (GB10_CSV, THERMAL_CSV, LOW_POWER_CSV)
    servers = [background.run(_start(files, FakeNvidiaSmi(csv))) for csv in csvs]
    try:
        path = _inventory(tmp_path, files, [s.port for s in servers])
        status = main(["snapshot", "-i", str(path), "--json"])
        out = capsys.readouterr().out
        table_status = main(["snapshot", "-i", str(path)])
        table = capsys.readouterr().out
    finally:
        for server in servers:
            background.run(server.close())
    doc = json.loads(out)
    states = {n["node"]: (n["state"], n["ok"]) for n in doc["nodes"]}
    assert states == {
        "spark-1": ("ok", True),
        "spark-2": ("throttled", False),
        "spark-3": ("low-power", False),
    }
    assert [g["state"] for g in doc["nodes"][1]["gpus"]] == ["throttled"]
    assert status == table_status  # warnings only: answered, nothing critical
    assert "throttled" in table and "low-power" in table

    # The README's jq example over this document names exactly the two.
    assert f"jq '{README_JQ_NOT_OK.removesuffix(' | .node')}'" in Path("README.md").read_text()
    jq = subprocess.run(
        ["jq", "-r", README_JQ_NOT_OK], input=out, capture_output=True, text=True, check=True
    )
    assert jq.stdout.split() == ["spark-2", "spark-3"]

    # "critical" agrees with the alerts' severities.
    severities = {a["severity"] for a in doc["alerts"]}
    assert doc["critical"] is ("critical" in severities)


async def test_snapshot_and_monitor_name_one_state(files: ClientFiles) -> None:
    """The monitor's state column and ``snapshot``'s JSON, over the same samples and plan."""
    servers = [
        await _start(files, FakeNvidiaSmi(c)) for c in (GB10_CSV, THERMAL_CSV, LOW_POWER_CSV)
    ]
    try:
        snap = await _snapshot(files, servers)
    finally:
        for server in servers:
            await server.close()
    plan = Plan.from_layout("loopback", {})
    alerts, gpu_states = judge_now(snap.nodes, plan.alert_engine(hold_s=0.0), snap.time_s)
    doc = snapshot_json(dataclasses.replace(snap, alerts=alerts, gpu_states=gpu_states))
    state = ClusterState()
    for sample in snap.nodes:
        state.apply(sample)
    rows = views.node_rows(state, {}, snap.time_s, views.ViewConfig.from_plan(plan))
    monitor = {node: cell[0] for node, cell in views.node_states(rows).items()}
    assert monitor == {"spark-1": "ok", "spark-2": "throttled", "spark-3": "low-power?"}
    assert {n["node"]: n["state"] for n in doc["nodes"]} == {
        node: text.removesuffix("?") for node, text in monitor.items()
    }


def test_table_has_the_monitors_ttft_split_and_spec_decode_per_engine() -> None:
    """One line per engine as the monitor's engine block says it: mean queue + prefill of the
    requests finished in the window, and speculative decoding acceptance."""
    from tests.ui.fakes import engine

    split = engine(
        queue_time_mean_s=0.42,
        prefill_time_mean_s=8.61,
        spec_acceptance_rate=0.54,
        spec_mean_accept_len=3.69,
    )
    plain = engine("plain")
    out = io.StringIO()
    snap = Snapshot("c", 0.0, (), (split, plain))
    render_table(snap, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "dsv41: means of finished: queue 420 ms + prefill 8.61 s · spec 54% ×3.69" in text
    assert "plain: means" not in text and "plain: spec" not in text


async def test_an_engine_slow_within_its_own_deadline_is_not_cut_by_the_snapshots(
    tmp_path: Path,
) -> None:
    """Each scrape answers in 3.5 s, inside the engine's own 10 s deadline; with --window 1
    the poll takes two scrapes plus the window (~8 s). The snapshot's default deadline used
    to cover SSH nodes only (5 + 1.25 s + the window), so a real vLLM slowed by a loaded CPU
    was reported "no complete answer" and the command exited 1."""
    from aiohttp import web

    from sparktop.testing.vllm_page import FakeVllm
    from tests.sweep_helpers import run_cli
    from tests.test_engine_hostile import aiohttp_server, serve_bytes

    fake = FakeVllm(kv_cache_size_tokens=100_000)
    fake.set_gauges(running=1, waiting=0, kv_usage=0.1)
    page = await serve_bytes(fake.page())

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(3.5)
        return await page(request)

    async with aiohttp_server({"/metrics": slow}) as url:
        inventory = tmp_path / "cluster.yaml"
        inventory.write_text(f"cluster: c\nengines:\n  - {{name: slow, url: '{url}'}}\n")
        status, out, err = await run_cli(
            tmp_path, "snapshot", "--inventory", str(inventory), "--window", "1", "--json"
        )
    doc = json.loads(out)
    assert [e["state"] for e in doc["engines"]] == ["ok"], out + err
    assert status == 0, out + err


async def test_an_engine_that_answered_with_a_page_without_gauges_is_degraded_not_down(
    tmp_path: Path,
) -> None:
    """The FakeVllm page with its samples cut (HELP/TYPE lines only): the engine answered,
    so ``snapshot`` exits 4 (degraded) and lists it under "incomplete pages:", not 1 with it
    among the failures ("did not answer")."""
    from sparktop.testing.http_stub import StubServer, text
    from sparktop.testing.vllm_page import FakeVllm
    from tests.sweep_helpers import run_cli

    fake = FakeVllm(kv_cache_size_tokens=100_000)
    fake.set_gauges(running=1, waiting=0, kv_usage=0.1)
    page = fake.page()
    page_text = page.decode() if isinstance(page, bytes) else page
    headers = "".join(line + "\n" for line in page_text.splitlines() if line.startswith("#"))
    assert "# TYPE vllm:num_requests_running gauge" in headers
    async with StubServer({"/metrics": text(headers)}) as server:
        inventory = tmp_path / "cluster.yaml"
        inventory.write_text(f"cluster: c\nengines:\n  - {{name: e, url: '{server.url}'}}\n")
        status, out, err = await run_cli(tmp_path, "snapshot", "--inventory", str(inventory))
        json_status, doc_text, _ = await run_cli(
            tmp_path, "snapshot", "--inventory", str(inventory), "--json"
        )
    assert status == 4 and json_status == 4, out + err
    assert [e["state"] for e in json.loads(doc_text)["engines"]] == ["degraded"]
    assert "incomplete pages:" in out and "failures:" not in out
    assert "e: degraded: metric families declared but no samples" in out
