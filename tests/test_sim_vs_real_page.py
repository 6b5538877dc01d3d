"""The simulator's ``/metrics`` page held to a real vLLM 0.32.0's (issue 27 item 3).

Every family the simulator emits exists on the real page with the same type, label names,
HELP text and bucket edges; the token-count histograms' edges follow each server's own
``max_model_len`` (vLLM's 1-2-5 buckets). Checked against the page captured from a real
server under load (``../shared/fixtures/real``) and against the live real server of this
run. What vLLM exports only in a configuration the real server was not run with is in
:data:`ONLY_WHEN_CONFIGURED`, each entry with its reason and the labels vLLM gives it.
"""

from __future__ import annotations

import pytest

from sparktop.sim.stats import buckets_1_2_5
from tests.real_page import REAL_LOAD_PAGE, REAL_MAX_MODEL_LEN, Shape, fetch_page, shapes
from tests.real_vllm_plugin import RealVllm
from tests.sim_helpers import sim_client

PER_ENGINE = frozenset({"engine", "model_name"})
_SPEC = (
    "exported only with speculative decoding configured (vllm/v1/spec_decode/metrics.py in "
    "0.32.0, created with the per-engine labels); the real server runs without a draft model"
)
ONLY_WHEN_CONFIGURED: dict[str, tuple[str, frozenset[str]]] = {
    "vllm:spec_decode_num_drafts": (_SPEC, PER_ENGINE),
    "vllm:spec_decode_num_drafts_created": (_SPEC, PER_ENGINE),
    "vllm:spec_decode_num_draft_tokens": (_SPEC, PER_ENGINE),
    "vllm:spec_decode_num_draft_tokens_created": (_SPEC, PER_ENGINE),
    "vllm:spec_decode_num_accepted_tokens": (_SPEC, PER_ENGINE),
    "vllm:spec_decode_num_accepted_tokens_created": (_SPEC, PER_ENGINE),
    "vllm:spec_decode_num_accepted_tokens_per_pos": (_SPEC, PER_ENGINE | {"position"}),
    "vllm:spec_decode_num_accepted_tokens_per_pos_created": (_SPEC, PER_ENGINE | {"position"}),
}


async def _sim_page() -> tuple[str, int]:
    """The simulator's page after some load, and its max_model_len."""
    async with sim_client(speed=20) as (sim, client):
        engine = next(iter(sim.http.values())).engine
        done = await client.post("/v1/completions", json={"prompt": "hi there", "max_tokens": 4})
        assert done.status_code == 200
        text = (await client.get("/metrics")).text
        return text, engine.limits.max_model_len


def _docs(text: str) -> dict[str, str]:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f.documentation for f in text_string_to_metric_families(text)}


def _mismatches(sim_text: str, sim_max_len: int, real_text: str) -> list[str]:
    sim, real = shapes(sim_text), shapes(real_text)
    sim_docs, real_docs = _docs(sim_text), _docs(real_text)
    real_token_edges = buckets_1_2_5(REAL_MAX_MODEL_LEN)
    wrong: list[str] = []
    for name, mine in sim.items():
        if not name.startswith("vllm:") and name != "process_start_time_seconds":
            wrong.append(f"{name}: not a vLLM family")
            continue
        if name in ONLY_WHEN_CONFIGURED:
            _reason, labels = ONLY_WHEN_CONFIGURED[name]
            if mine.labels != labels:
                wrong.append(f"{name}: labels {sorted(mine.labels)}, vLLM's {sorted(labels)}")
            continue
        theirs = real.get(name)
        if theirs is None:
            wrong.append(f"{name}: not on the real page")
            continue
        wrong += _compare(name, mine, theirs, sim_max_len, real_token_edges)
        if sim_docs[name] != real_docs[name]:
            wrong.append(f"{name}: HELP {sim_docs[name]!r}, real {real_docs[name]!r}")
    return wrong


def _compare(
    name: str, mine: Shape, theirs: Shape, sim_max_len: int, real_token_edges: tuple[float, ...]
) -> list[str]:
    wrong = []
    if mine.type != theirs.type:
        wrong.append(f"{name}: type {mine.type}, real {theirs.type}")
    if mine.labels != theirs.labels:
        wrong.append(f"{name}: labels {sorted(mine.labels)}, real {sorted(theirs.labels)}")
    # Token-count histograms use 1-2-5 buckets up to the server's own max_model_len.
    want = buckets_1_2_5(sim_max_len) if theirs.edges == real_token_edges else theirs.edges
    if mine.edges != want:
        wrong.append(f"{name}: bucket edges {mine.edges}, real {theirs.edges}")
    return wrong


async def test_the_simulator_page_matches_the_captured_real_page() -> None:
    sim_text, sim_max_len = await _sim_page()
    assert _mismatches(sim_text, sim_max_len, REAL_LOAD_PAGE.read_text(encoding="utf-8")) == []


@pytest.mark.real_vllm
async def test_the_simulator_page_matches_the_live_real_server(real_vllm: RealVllm) -> None:
    sim_text, sim_max_len = await _sim_page()
    assert _mismatches(sim_text, sim_max_len, fetch_page(real_vllm.url)) == []


def test_the_allow_list_names_only_what_the_real_page_lacks() -> None:
    real = shapes(REAL_LOAD_PAGE.read_text(encoding="utf-8"))
    assert [name for name in ONLY_WHEN_CONFIGURED if name in real] == []


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("vllm:admission_rejections", {"model_name", "reason"}),
        ("vllm:request_success", {"engine", "model_name", "finished_reason"}),
    ],
)
async def test_what_the_real_page_taught_is_on_the_simulator_page(
    name: str, labels: set[str]
) -> None:
    sim_text, _ = await _sim_page()
    sim = shapes(sim_text)
    assert sim[name].labels == labels
    assert f"{name}_created" in sim
    assert 'finished_reason="repetition"' in sim_text
    assert sim["vllm:time_to_first_token_seconds_created"].type == "gauge"
    assert (
        sim["vllm:cache_config_info"].labels
        == shapes(REAL_LOAD_PAGE.read_text())["vllm:cache_config_info"].labels
    )
