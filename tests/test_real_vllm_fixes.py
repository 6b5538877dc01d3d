"""Issue 27 defects 1, 2, 3 and 7, each against the real vLLM 0.32.0 server (``real_vllm``).

- 1, 2: ``budget --endpoint`` keys its verdict on the server's ``/version``; the request it
  calls shortened is served with exactly the output it announced (``finish_reason:
  length``), the ones it calls rejected get HTTP 400, and its advice names the output.
- 3: after a burst, the engine reads ``now 0 tok/s`` within seconds while the 30 s window
  keeps the figure, labelled.
- 7: the server's ``admission_rejections_total`` has no ``engine`` label; on its page made
  data-parallel the figure is the whole server's, not engine 0's.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from sparktop.cli import main
from sparktop.model import is_num
from sparktop.sources.engines.metrics import NOW_WINDOW_S, MetricsDeriver
from sparktop.sources.engines.reading import parse_engine_page, read_page
from sparktop.sources.engines.source import EngineSource, scrape_once
from sparktop.sweep.budget.budget import compute_budget
from sparktop.sweep.budget.ceiling import Verdict
from sparktop.sweep.profiles.loader import load_profile
from tests.real_vllm_plugin import RealVllm
from tests.sim_helpers import until
from tests.test_budget_ceiling import CASES
from tests.test_rate_windows import line_text
from tests.test_whole_server_labels import data_parallel

TWO = "2x-spark-dsv4-flash-0731"


class _Cfg:
    def __init__(self, url: str) -> None:
        self.name, self.url, self.kind, self.api_key_env = "real", url, "vllm", None


async def _complete(url: str, model: str, prompt: int, max_tokens: int) -> httpx.Response:
    """A completion of ``prompt`` token ids that runs to its length (``ignore_eos``: the
    random-weight model would otherwise stop at any point)."""
    body = {
        "model": model,
        "prompt": [10 + i % 3000 for i in range(prompt)],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
    }
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:
        return await client.post("/v1/completions", json=body)


async def test_the_budget_verdict_is_what_the_real_server_does(real_vllm: RealVllm) -> None:
    live = await scrape_once(real_vllm.url)
    assert live.ok and live.server_version == "0.32.0"
    assert live.max_model_len == real_vllm.max_model_len == 2048
    profile = load_profile(TWO)
    for prompt, output in CASES:
        b = compute_budget(prompt, 1, profile, output, live=live)
        answer = await _complete(real_vllm.url, real_vllm.model, prompt, output)
        if b.ceiling.verdict is Verdict.REJECTED:
            assert answer.status_code == 400, (prompt, output, answer.text)
            assert b.send_now.refused and b.send_now.ttft_s is None
            continue
        assert answer.status_code == 200, (prompt, output, answer.text)
        doc = answer.json()
        assert doc["usage"]["completion_tokens"] == b.ceiling.served_output_tokens
        assert doc["choices"][0]["finish_reason"] == "length"  # ignore_eos: runs to its cap
    issue = compute_budget(985, 1, profile, 2048, live=live).ceiling
    assert (issue.verdict, issue.served_output_tokens) == (Verdict.SHORTENED, 1063)
    assert issue.advice == "lower the output to ≤ 1,063 tokens"


def test_budget_endpoint_text_on_the_real_server(
    real_vllm: RealVllm, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["budget", "--prompt-tokens", "985", "--output-tokens", "2048"]
    code = main([*argv, "--endpoint", real_vllm.url, "--profile", TWO])
    out = capsys.readouterr().out
    assert code == 0
    assert "[server]  server                    vLLM 0.32.0" in out
    assert "✂ output shortened" in out and "rejects" not in out.split("Warnings")[0]
    send_now = out.split("If sent now")[1].split("\n\n")[0]
    assert "cut to 1,063 tokens of the 2,048 asked (finish_reason length)" in send_now
    assert "TTFT now" in send_now and "not sent" not in send_now
    code = main([*argv, "--endpoint", real_vllm.url, "--profile", TWO, "--json"])
    doc = json.loads(capsys.readouterr().out)["ceiling"]
    assert (doc["verdict"], doc["served_output_tokens"], doc["rule"]) == (
        "shortened", 1063, "vLLM 0.32.0",
    )  # fmt: skip


async def test_a_stop_shows_within_seconds_on_the_real_server(real_vllm: RealVllm) -> None:
    source = EngineSource(_Cfg(real_vllm.url), window_s=30.0)
    try:
        await source.sample()
        burst = asyncio.gather(
            *(_complete(real_vllm.url, real_vllm.model, 200, 400) for _ in range(4))
        )
        task = asyncio.ensure_future(burst)
        while not task.done():
            await asyncio.wait({task}, timeout=1.0)  # a scrape a second, as the monitor
            loaded = await source.sample()
        answers = await task
        assert all(a.status_code == 200 for a in answers)
        assert is_num(loaded.decode_tps) and loaded.decode_tps > 0
        stopped = await until(source.sample, lambda s: s.decode_tps_now == 0, NOW_WINDOW_S + 6)
    finally:
        await source.aclose()
    assert is_num(stopped.decode_tps) and stopped.decode_tps > 0  # the window keeps it
    shown = line_text(stopped)
    assert "now 0 tok/s" in shown and f"over {stopped.window_s:.0f} s" in shown


async def test_admission_rejections_are_the_whole_servers(real_vllm: RealVllm) -> None:
    async with httpx.AsyncClient(base_url=real_vllm.url, timeout=30) as client:
        text = (await client.get("/metrics")).text
    lines = [ln for ln in text.splitlines() if ln.startswith("vllm:admission_rejections_total")]
    assert lines and not any("engine=" in ln for ln in lines)
    one = read_page(parse_engine_page(text), "vllm")
    assert list(one.ranks) == ["0"] and one.server is None  # one engine: the whole server
    dp = data_parallel(text)
    reading = read_page(parse_engine_page(dp), "vllm")
    assert sorted(reading.ranks) == ["0", "1"] and reading.server is not None
    assert not any(k.startswith("admission_rejections/") for k in reading.ranks["0"].counters)
    deriver = MetricsDeriver("real")
    deriver.derive(parse_engine_page(dp), now_s=0.0, wall_s=1.8e9)
    sample = deriver.derive(parse_engine_page(dp), now_s=2.0, wall_s=1.8e9 + 2)
    assert sample.admission_rejections_per_s == 0.0  # a figure, not "engine 1: not exported"
