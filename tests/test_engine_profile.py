"""An engine entry's own ``profile:``: a vLLM and a llama.cpp engine in one inventory each get
an expected row from their own sweep (a profile names the engine it measured, and another
kind's figures give no row). Checked like the top-level ``profile:`` (file, line, key), and
used by the expected row, the alert rules and exporter (through the alert engine's expected
figures), ``snapshot``, the budget pane and a recording's header."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest
import yaml

from sparktop.errors import UserError
from sparktop.inventory import load_inventory, parse_inventory
from sparktop.plan import Plan
from sparktop.sim.runner import LLAMACPP_ENGINE
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from tests.sim_helpers import running_sim

LLAMA_ENGINE = "llama.cpp server version b11434"
NODES = "nodes:\n  - {name: spark-1, host: 127.0.0.1}\n"


def _llama_profile(folder: Path, name: str = "llama-sweep") -> Path:
    """The default seed's figures, as if swept from a llama.cpp server."""
    folder.mkdir(parents=True, exist_ok=True)
    source = resources.files("sparktop.sweep").joinpath("profiles", f"{DEFAULT_PROFILE}.yaml")
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    doc["name"], doc["engine"] = name, LLAMA_ENGINE
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def _inventory(folder: Path, llama_profile: str, top: str = DEFAULT_PROFILE) -> Path:
    path = folder / "cluster.yaml"
    path.write_text(
        f"cluster: mixed\nprofile: {top}\n{NODES}engines:\n"
        "  - {name: dsv, url: 'http://127.0.0.1:9', nodes: [spark-1]}\n"
        "  - name: llama\n"
        "    url: http://127.0.0.1:8\n"
        "    kind: llamacpp\n"
        f"    profile: {llama_profile}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture(autouse=True)
def _no_user_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKTOP_PROFILE_DIR", str(tmp_path / "no-user-profiles"))


def test_each_engine_gets_its_own_profile_and_limits_the_rest_the_top_level_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "site"
    _llama_profile(folder / "sweeps")
    monkeypatch.chdir(tmp_path)  # the path is the inventory's, not the working directory's
    inventory = load_inventory(_inventory(folder, "./sweeps/llama-sweep.yaml"))
    assert inventory.engines[1].profile == str(folder / "sweeps" / "llama-sweep.yaml")
    plan = Plan.from_inventory(inventory)
    assert plan.profile_name_for("dsv") == plan.profile_name == DEFAULT_PROFILE
    assert plan.profile_name_for("llama") == "llama-sweep"
    assert plan.matched_for("dsv") is plan.matched
    own = plan.matched_for("llama")
    assert own is not None and own is not plan.matched and own.profile.engine == LLAMA_ENGINE
    # Its limits are its profile's (it describes that engine), whatever the top-level says.
    llama = plan.engine("llama")
    assert llama is not None and llama.limit("max_num_seqs")[1] == "profile"
    # --profile replaces the top-level profile only: the engine keeps its own.
    other = Plan.from_inventory(inventory, profile="2x-spark-dsv4-flash-0731")
    assert other.profile_name_for("dsv") == "2x-spark-dsv4-flash-0731"
    assert other.profile_name_for("llama") == "llama-sweep"


def test_a_bad_engine_profile_is_refused_at_its_own_line(tmp_path: Path) -> None:
    path = _inventory(tmp_path, "nosuch")
    with pytest.raises(UserError) as exc:
        load_inventory(path)
    assert str(exc.value).startswith(
        f"{path}:10:14: engines[1].profile: unknown profile 'nosuch'; built-in: "
    )
    path = _inventory(tmp_path, "./sweeps/gone.yaml")
    with pytest.raises(UserError, match=rf"^{path}:10:14: engines\[1\]\.profile: profile file "):
        load_inventory(path)
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "gone.yaml").write_text("name: [", encoding="utf-8")
    inventory = load_inventory(path)  # it exists: the plan loads it and says where
    with pytest.raises(UserError, match=rf"^{path}:10:14: engines\[1\]\.profile: .*gone\.yaml:1:"):
        Plan.from_inventory(inventory)
    with pytest.raises(UserError, match=r"cluster\.yaml:4:51: engines\[0\]\.profile: empty"):
        parse_inventory(
            f"{NODES}engines:\n  - {{name: e, url: 'http://127.0.0.1:9', profile: ''}}\n",
            "cluster.yaml",
        )
    # Where the loader records the key's place is not a key an inventory may set.
    with pytest.raises(UserError, match=r"engines\[0\]: unknown key 'profile_at'"):
        parse_inventory(
            f"{NODES}engines:\n  - {{name: e, url: 'http://127.0.0.1:9', profile_at: x}}\n",
            "cluster.yaml",
        )


def test_a_recording_keeps_each_engines_profile(tmp_path: Path) -> None:
    """A replay draws each engine's row from the profile it was recorded with, even when
    the file has gone since."""
    profile = _llama_profile(tmp_path / "sweeps")
    plan = Plan.from_inventory(load_inventory(_inventory(tmp_path, str(profile))))
    header = json.loads(json.dumps(plan.header()))
    profile.unlink()
    again = Plan.from_header(header)
    assert again.profile_name_for("llama") == "llama-sweep"
    assert again.profile_name_for("dsv") == DEFAULT_PROFILE
    assert again.engine("llama").limits() == plan.engine("llama").limits()  # type: ignore[union-attr]


async def test_a_vllm_and_a_llamacpp_engine_each_get_an_expected_row(tmp_path: Path) -> None:
    """The simulator's vLLM and llama.cpp engines under an inventory whose top-level profile
    is the vLLM seed: the llama.cpp engine's own profile gives it a row too (without it, that
    engine's row says the profile measured a vLLM engine)."""
    _llama_profile(tmp_path / "sweeps")
    async with running_sim(nodes=2, speed=5, llamacpp=True) as sim:
        doc = yaml.safe_load(sim.inventory_path.read_text(encoding="utf-8"))
        doc["profile"] = DEFAULT_PROFILE  # names a vLLM build: no row for llama.cpp by itself
        outs = []
        for own in (True, False):
            for engine in doc["engines"]:
                engine.pop("profile", None)
                if own and engine["name"] == LLAMACPP_ENGINE:
                    engine["profile"] = "sweeps/llama-sweep.yaml"
            path = tmp_path / f"cluster-{own}.yaml"
            path.write_text(yaml.safe_dump(doc), encoding="utf-8")
            cmd = [sys.executable, "-m", "sparktop", "snapshot", "-i", str(path)]
            proc = await asyncio.create_subprocess_exec(
                *cmd, "--window", "8", "--json", stdout=asyncio.subprocess.PIPE
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 120)
            outs.append({e["engine"]: e["expected"] for e in json.loads(out)["engines"]})
    with_own, without = outs
    llama = with_own[LLAMACPP_ENGINE]
    assert llama["profile"] == "llama-sweep" and llama["missing"] is None, llama
    assert llama["figures"]["aggregate_tps"]["expected_tps"] > 0
    assert without[LLAMACPP_ENGINE]["missing"] == (
        "no expected row: the profile measured a vLLM engine; this engine is llama.cpp"
    )
    vllm = [name for name in with_own if name != LLAMACPP_ENGINE]
    assert vllm and all(with_own[n]["profile"] == DEFAULT_PROFILE for n in vllm)
    assert all(with_own[n]["missing"] is None or "no expected row" not in with_own[n]["missing"]
               for n in vllm)  # fmt: skip


def test_the_alert_rules_and_exporter_judge_each_engine_by_its_own_profile(
    tmp_path: Path,
) -> None:
    """The alert engine's expected figures (which the deficit rules and the exporter's
    ``sparktop_engine_expected`` read) come from the engine's own profile."""
    from sparktop.sources.engines.metrics import MetricsDeriver
    from sparktop.sources.engines.reading import WANTED
    from sparktop.sources.exposition.page import parse_page
    from sparktop.testing.vllm_page import FakeVllm, Load

    fake = FakeVllm()
    deriver = MetricsDeriver("llama", window_s=30)
    fake.load["0"] = Load(decode_tps=300, requests_per_s=1, prompt_tokens=3800)
    fake.set_gauges(running=8, waiting=0, kv_usage=0.3)
    for t in range(21):
        fake.advance(1)
        page = parse_page(fake.page().decode(), WANTED)
        sample = deriver.derive(page, now_s=float(t), wall_s=float(t))
    llama = replace(sample, kind="llamacpp")
    profile = _llama_profile(tmp_path / "sweeps")
    own = Plan.from_inventory(load_inventory(_inventory(tmp_path, str(profile))))
    expected = own.alert_engine().expected
    assert expected is not None
    got = expected(llama)
    assert got is not None and got.decode_tps is not None and got.decode_tps > 0
    row = own.row(llama)
    assert not isinstance(row, str) and got.ttft_s == row.ttft_s.value
    # The same engine judged by the top-level (vLLM) profile alone: nothing to compare.
    shared = Plan.from_inventory(load_inventory(_inventory(tmp_path, DEFAULT_PROFILE)))
    shared_expected = shared.alert_engine().expected
    assert shared_expected is not None and shared_expected(llama) is None


def test_snapshot_plot_draws_each_engine_on_its_own_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``snapshot --plot``: each engine's curves are its own profile's (the engines here do
    not answer: the curves are drawn bare, with the reason)."""
    from sparktop.cli import main

    profile = _llama_profile(tmp_path / "sweeps")
    inventory = tmp_path / "engines.yaml"
    inventory.write_text(
        f"cluster: mixed\nprofile: {DEFAULT_PROFILE}\nengines:\n"
        "  - {name: dsv, url: 'http://127.0.0.1:9'}\n"
        f"  - {{name: llama, url: 'http://127.0.0.1:9', kind: llamacpp, profile: {profile}}}\n",
        encoding="utf-8",
    )
    plot = tmp_path / "plot.svg"
    status = main(["snapshot", "-i", str(inventory), "--plot", str(plot), "--timeout", "5"])
    assert status == 1, capsys.readouterr().err  # neither engine answered
    svg = plot.read_text(encoding="utf-8").replace("&#160;", " ")
    assert "engine llama () · TTFT · llama-sweep" in svg
    assert f"engine dsv () · TTFT · {DEFAULT_PROFILE}" in svg
