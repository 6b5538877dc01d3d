"""The plan: one resolution of profile, TP groups and limits that ``snapshot`` and the monitor
share, so they judge the same inventory alike (loopback HTTP servers, the real CLI and app)."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from sparktop.cli import main
from sparktop.errors import UserError
from sparktop.inventory import load_inventory
from sparktop.plan import Plan
from sparktop.report.engines import KEY_OF
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from sparktop.testing.http_stub import Reply, models_route
from sparktop.testing.vllm_page import FakeVllm
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.test_snapshot_engines import serving

LIMITS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len_tokens", "kv_pool_tokens")
SAMPLE_ATTR = {"max_model_len_tokens": "max_model_len"}


def _closed_port() -> int:
    """A loopback port nobody listens on (the nodes are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _inventory(tmp_path: Path, url: str, profile: str | None) -> Path:
    port = _closed_port()
    head = f"cluster: agree\n{f'profile: {profile}' if profile else ''}\n"
    path = tmp_path / "cluster.yaml"
    path.write_text(
        head + "ssh: {connect_timeout_s: 1, command_timeout_s: 1}\nnodes:\n"
        f"  - {{name: spark-1, host: 127.0.0.1, port: {port}}}\n"
        f"  - {{name: spark-2, host: 127.0.0.1, port: {port}}}\n"
        f"  - {{name: spark-3, host: 127.0.0.1, port: {port}}}\n"
        "engines:\n"
        f"  - {{name: big, url: '{url}', nodes: [spark-2, spark-1], max_num_seqs: 32}}\n"
        f"  - {{name: small, url: '{url}', nodes: [spark-3]}}\n",
        encoding="utf-8",
    )
    return path


def _page() -> bytes:
    fake = FakeVllm(engines=1, num_gpu_blocks="None")  # the pool: inventory's or profile's
    fake.set_gauges("0", running=5, waiting=0, kv_usage=0.4)
    return fake.page()


async def _monitor(path: Path) -> tuple[SparktopApp, dict[str, str]]:
    """The monitor on the same inventory, polled once: its engines' samples and what each
    engine block's running cell says."""
    plan = Plan.from_inventory(load_inventory(path))
    app = SparktopApp(plan, plan.sources(), plan.alert_engine(), autostart=False)
    running: dict[str, str] = {}
    async with app.run_test(size=(160, 50)) as pilot:
        await app.poll_now()
        # The engine blocks refresh on the UI tick after the poll: wait (bounded) for each
        # block to show its running cell.
        for _ in range(100):
            await pilot.pause()
            texts = {
                name: str(block.query_one(".engine-lines", TextBlock).render())
                for name, block in app.query_one(EnginePanel).blocks.items()
            }
            if texts and all("running " in t for t in texts.values()):
                break
        for name, text in texts.items():
            running[name] = text.split("running ", 1)[1].split()[0]
    return app, running


@pytest.mark.parametrize("profile", [DEFAULT_PROFILE, None])
def test_snapshot_and_the_monitor_agree_on_every_limit_and_tp_group(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, profile: str | None
) -> None:
    page = _page()
    routes = {"/metrics": lambda: Reply(body=page), "/v1/models": models_route()}
    with serving(routes) as url:
        path = _inventory(tmp_path, url, profile)
        # 1: the nodes are refused (3 if a rule also finds something critical in the engine)
        assert main(["snapshot", "--inventory", str(path), "--json", "--window", "0"]) in (1, 3)
        snap: dict[str, Any] = {
            e["engine"]: e for e in json.loads(capsys.readouterr().out)["engines"]
        }
        app, running = asyncio.run(_monitor(path))

    assert set(snap) == set(app.state.engines) == {"big", "small"}
    for name, reported in snap.items():
        sample = app.state.engines[name]
        for key in LIMITS:
            value = getattr(sample, SAMPLE_ATTR.get(key, key))
            assert reported[key] == (value if isinstance(value, float) else None), (name, key)
        assert reported["limit_sources"] == {
            KEY_OF.get(k, k): origin for k, origin in sample.limit_sources.items()
        }
        assert reported["kv_pool_source"] == sample.kv_pool_source
        assert tuple(reported["tp_nodes"]) == app.view_config.engine_nodes[name]
        limit = reported["max_num_seqs"]
        assert running[name] == (f"{reported['running']:.0f}/{limit:.0f}" if limit else "5/?")
    assert snap["big"]["tp_nodes"] == ["spark-2", "spark-1"]  # head first, as listed
    assert snap["big"]["max_num_seqs"] == 32 and snap["big"]["limit_sources"]["max_num_seqs"] == (
        "inventory"
    )
    named = load_profile(DEFAULT_PROFILE)
    if profile:  # the inventory names the profile: its limits describe these engines
        assert snap["small"]["max_num_seqs"] == named.max_num_seqs
        assert snap["small"]["limit_sources"]["max_num_seqs"] == "profile"
        assert snap["small"]["kv_pool_tokens"] == named.kv_pool_tokens
    else:  # the default profile is another setup's: its limits are not this engine's
        assert snap["small"]["max_num_seqs"] is None
        assert snap["small"]["limit_sources"]["max_num_seqs"] == "unknown"
        assert snap["small"]["kv_pool_tokens"] is None
        assert app.plan.profile_name == DEFAULT_PROFILE  # still there for the expected row


def test_the_plan_resolves_each_limit_once_with_its_origin(tmp_path: Path) -> None:
    path = _inventory(tmp_path, "http://127.0.0.1:9", DEFAULT_PROFILE)
    plan = Plan.from_inventory(load_inventory(path))
    big, small = plan.engines
    assert big.limit("max_num_seqs") == (32.0, "inventory")
    assert small.limit("max_num_seqs") == (8.0, "profile")
    assert plan.max_num_seqs() == {"big": 32.0, "small": 8.0}
    assert plan.tp_groups == {"big": ("spark-2", "spark-1"), "small": ("spark-3",)}
    engine = plan.alert_engine(hold_s=0.0)
    assert engine.thresholds.hold_s == 0.0 and engine.max_num_seqs == plan.max_num_seqs()
    assert plan.header()["profile"]["name"] == DEFAULT_PROFILE
    # --profile names a profile too; an unknown one is a usage error before anything starts.
    with pytest.raises(UserError, match="unknown profile 'nosuch'"):
        Plan.from_inventory(load_inventory(path), profile="nosuch")


def test_a_recording_header_gives_back_the_plan_it_was_made_with(tmp_path: Path) -> None:
    path = _inventory(tmp_path, "http://127.0.0.1:9", DEFAULT_PROFILE)
    plan = Plan.from_inventory(load_inventory(path), interval_s=2.0)
    again = Plan.from_header(json.loads(json.dumps(plan.header())))
    assert (again.cluster, again.interval_s, again.profile_name) == ("agree", 2.0, DEFAULT_PROFILE)
    assert again.tp_groups == plan.tp_groups and again.max_num_seqs() == plan.max_num_seqs()


def test_profiles_are_loaded_through_the_plans_one_loader() -> None:
    """Issue 12's done-when: ``load_profile(`` is called by the plan (``load_named``) and the
    ``profiles``/``budget`` commands only; the simulator, demo, sim and sweep go through it."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "sparktop"
    callers = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if any(
            "load_profile(" in line and "def load_profile(" not in line
            for line in path.read_text(encoding="utf-8").splitlines()
        )
    }
    assert callers == {"plan.py", "commands/profiles.py", "commands/budget.py"}
