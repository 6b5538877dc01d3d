"""sparktop against a real vLLM 0.32.0 (issue 27 item 2): snapshot, the monitor, budget
``--endpoint``, sweep and the exporter, each on the run's real server (``real_vllm``
fixture: a tiny Llama on the CPU backend, ``--max-model-len 2048 --max-num-seqs 4
--max-num-batched-tokens 512``; see ``tests/real_vllm_plugin.py``).

The server is shared by both xdist workers, so another test's requests may be running:
the assertions hold whatever the load (structure, exact counts, limits the server states).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktop.inventory import load_inventory
from sparktop.model import is_num
from sparktop.plan import Plan
from sparktop.sim.promrun import free_port, until
from sparktop.sweep.profiles.loader import load_profile_file
from sparktop.sweep.runner.bench_client import stream_completion
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.real_page import fetch_page, shapes
from tests.real_vllm_plugin import RealVllm
from tests.sweep_helpers import cli_env, run_cli

pytestmark = pytest.mark.real_vllm
ENGINE = "tiny"


def _inventory(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"cluster: real\nengines:\n  - {{name: {ENGINE}, url: '{url}'}}\n")
    return path


def _pool_tokens(url: str) -> int:
    """``kv_cache_size_tokens`` as the server's own page states it."""
    for family in text_string_to_metric_families(fetch_page(url)):
        if family.name == "vllm:cache_config_info":
            return int(family.samples[0].labels["kv_cache_size_tokens"])
    raise AssertionError("no vllm:cache_config_info on the real page")


async def _tokenize(url: str, text: str) -> int:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        answer = (await client.post("/tokenize", json={"prompt": text})).json()
    return int(answer["count"])


async def _complete(url: str, model: str, text: str, max_tokens: int) -> httpx.Response:
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        body = {"model": model, "prompt": text, "max_tokens": max_tokens, "ignore_eos": True}
        return await client.post("/v1/completions", json=body)


async def test_snapshot_json_and_text_of_an_engine_only_inventory(
    real_vllm: RealVllm, tmp_path: Path
) -> None:
    inventory = _inventory(tmp_path, real_vllm.url)
    status, out, err = await run_cli(
        tmp_path, "snapshot", "--inventory", str(inventory), "--json", "--window", "1"
    )
    assert status in (0, 4), err  # 4: degraded, e.g. another test's load preempted
    doc = json.loads(out)
    assert doc["nodes"] == []
    (engine,) = doc["engines"]
    assert (engine["engine"], engine["kind"], engine["state"]) == (ENGINE, "vllm", "ok")
    assert engine["model"] == real_vllm.model
    assert engine["max_model_len_tokens"] == real_vllm.max_model_len
    assert engine["limit_sources"]["max_model_len_tokens"] == "/v1/models"
    assert engine["kv_pool_tokens"] == _pool_tokens(real_vllm.url)
    assert engine["kv_pool_source"] == "cache_config_info"
    assert is_num(engine["running"]) and is_num(engine["waiting"])
    assert [rank["rank"] for rank in engine["ranks"]] == ["0"]

    status, out, err = await run_cli(
        tmp_path, "snapshot", "--inventory", str(inventory), "--window", "1"
    )
    assert status in (0, 4), err
    assert "Traceback" not in err
    lines = out.splitlines()
    row = next(line for line in lines if line.startswith(ENGINE + " "))
    assert f"{_pool_tokens(real_vllm.url) / 1000:.1f}k" in row
    assert f"{ENGINE}: pool from cache_config_info" in out


async def test_the_monitor_shows_the_real_engine(real_vllm: RealVllm, tmp_path: Path) -> None:
    plan = Plan.from_inventory(load_inventory(_inventory(tmp_path, real_vllm.url)), interval_s=0.5)
    app = SparktopApp(plan, plan.sources())
    async with app.run_test(size=(140, 40)) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while not any(e.ok and is_num(e.running) for e in app.state.engines.values()):
            assert loop.time() < deadline, f"engine never ok: {app.state.engines}"
            await pilot.pause(0.2)
        app.tick()
        await pilot.pause()
        app.tick()  # a new engine block renders on the tick after it mounts
        await pilot.pause()
        block = app.query_one(EnginePanel).blocks[ENGINE]
        sample = block.sample
        assert sample is not None and sample.ok
        text = str(block.query_one(".engine-lines", TextBlock).render())
        assert f"running {sample.running:.0f}" in text
        assert sample.kv_pool_tokens == _pool_tokens(real_vllm.url)
        assert ENGINE in app.export_screenshot()


async def test_budget_counts_exactly_and_takes_the_limits_from_the_server(
    real_vllm: RealVllm, tmp_path: Path
) -> None:
    text = "the KV cache of a tiny llama " * 40
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(text)
    count = await _tokenize(real_vllm.url, text)
    status, out, err = await run_cli(
        tmp_path, "budget", "--file", str(prompt), "--endpoint", real_vllm.url,
        "--output-tokens", "64", "--json",
    )  # fmt: skip
    assert status == 0, err
    doc = json.loads(out)
    assert doc["tokens"]["prompt_tokens"] == count
    assert (doc["tokens"]["method"], doc["tokens"]["exact"]) == ("exact (/tokenize)", True)
    ceiling = doc["ceiling"]
    assert ceiling["max_model_len"] == {
        "value": real_vllm.max_model_len,
        "origin": "from the server",
        "reason": None,
    }
    assert ceiling["verdict"] == "fits"
    pool = _pool_tokens(real_vllm.url)
    assert doc["kv"]["pool_tokens"]["value"] == pool
    free = doc["kv"]["free_tokens_now"]
    assert free["origin"] == "from the server" and 0 <= free["value"] <= pool


async def test_budget_verdict_is_what_the_real_server_does_over_max_model_len(
    real_vllm: RealVllm, tmp_path: Path
) -> None:
    """Issue 27 item 1: a prompt + max_tokens over max_model_len is served shortened by
    vLLM 0.32; a prompt that alone exceeds it is refused. The budget says the same."""
    limit = real_vllm.max_model_len
    text = "hello world " * 197
    count = await _tokenize(real_vllm.url, text)
    assert count < limit
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(text)
    status, out, err = await run_cli(
        tmp_path, "budget", "--file", str(prompt), "--endpoint", real_vllm.url,
        "--output-tokens", str(limit), "--json",
    )  # fmt: skip
    assert status == 0, err
    ceiling = json.loads(out)["ceiling"]
    served = await _complete(real_vllm.url, real_vllm.model, text, limit)
    assert served.status_code == 200, served.text
    body = served.json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["prompt_tokens"] == count
    assert body["usage"]["completion_tokens"] == limit - count
    assert (ceiling["verdict"], ceiling["rejected"]) == ("shortened", False)
    assert ceiling["served_output_tokens"] == limit - count

    long_text = "hello world " * 500
    assert await _tokenize(real_vllm.url, long_text) > limit
    prompt.write_text(long_text)
    status, out, err = await run_cli(
        tmp_path, "budget", "--file", str(prompt), "--endpoint", real_vllm.url,
        "--output-tokens", "16", "--json",
    )  # fmt: skip
    assert status == 0, err
    refused = await _complete(real_vllm.url, real_vllm.model, long_text, 16)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "input_tokens"
    assert "exceeds this limit even without any output tokens" in error["message"]
    ceiling = json.loads(out)["ceiling"]
    assert (ceiling["verdict"], ceiling["rejected"]) == ("rejected", True)


async def test_a_refused_sweep_request_says_what_vllm_said(real_vllm: RealVllm) -> None:
    """vLLM 0.32 nests its error ({"error": {"message": ...}}): the sweep's failed request
    carries the message, not the JSON around it."""
    too_long = list(range(10, 10 + real_vllm.max_model_len + 1))
    async with httpx.AsyncClient(base_url=real_vllm.url, timeout=60) as client:
        result = await stream_completion(
            client, real_vllm.model, too_long, 4, sent_prompt_tokens=len(too_long)
        )
    assert not result.ok
    assert result.error.startswith(
        f"HTTP 400: This model's maximum context length is {real_vllm.max_model_len} tokens."
    ), result.error


async def test_a_tiny_sweep_of_the_real_server(real_vllm: RealVllm, tmp_path: Path) -> None:
    out = tmp_path / "tiny.yaml"
    status, _stdout, err = await run_cli(
        tmp_path, "sweep", "--endpoint", real_vllm.url, "--prompts", "128,512",
        "--concurrency", "1,2", "--runs", "1", "--output-tokens", "16", "--yes",
        "--allow-busy", "-o", str(out), timeout_s=600,
    )  # fmt: skip
    assert status == 0, err
    assert "cell 4/4" in err and "Traceback" not in err
    profile = load_profile_file(out)
    assert profile.model == real_vllm.model
    assert profile.max_model_len == real_vllm.max_model_len
    assert profile.kv_pool_tokens == _pool_tokens(real_vllm.url)
    assert [(r.prompt_tokens, r.concurrency) for r in profile.rows] == [
        (128, 1),
        (512, 1),
        (128, 2),
        (512, 2),
    ]  # exact lengths, from the real /tokenize
    for row in profile.rows:
        assert row.ttft_s > 0 and row.decode_tps > 0 and row.prefill_tps > 0, row
    assert "server version 0.32.0" in "\n".join(profile.notes)


async def test_the_exporter_serves_the_real_engine(real_vllm: RealVllm, tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    inventory = _inventory(tmp_path, real_vllm.url)
    exporter = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktop", "exporter", "-i", str(inventory), "--listen", listen,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=cli_env(tmp_path),
    )  # fmt: skip

    async def page() -> str:
        async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
            try:
                response = await client.get(f"http://{listen}/metrics")
            except httpx.HTTPError:
                return ""
        return response.text if response.status_code == 200 else ""

    try:
        text = await until(
            page,
            lambda t: f'sparktop_engine_kv_free_tokens{{engine="{ENGINE}"}}' in t,
            60,
            "the engine's free KV",
        )
    finally:
        exporter.send_signal(signal.SIGTERM)
        _out, err = await asyncio.wait_for(exporter.communicate(), 30)
    assert exporter.returncode == 0, err.decode()
    families = shapes(text)
    assert "sparktop_engine_up" in families
    up = next(s for f in text_string_to_metric_families(text) if f.name == "sparktop_engine_up"
              for s in f.samples)  # fmt: skip
    assert (up.labels["engine"], up.value) == (ENGINE, 1.0)
    free = next(s for f in text_string_to_metric_families(text)
                if f.name == "sparktop_engine_kv_free_tokens" for s in f.samples)  # fmt: skip
    assert 0 <= free.value <= _pool_tokens(real_vllm.url)
