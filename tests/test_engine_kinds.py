"""The engine-kind registry: the inventory accepts exactly its kinds, each reader knows
each kind, and a llama.cpp page is read through the names its spec declares."""

from __future__ import annotations

from typing import get_args

import pytest

from sparktop.errors import UserError
from sparktop.inventory import parse_inventory
from sparktop.inventory.models import EngineConfig
from sparktop.sources.engines.kinds import KINDS, spec_for
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.props import read_props
from sparktop.sources.engines.reading import FLAVOURS, WANTED, parse_engine_page
from sparktop.testing.llamacpp_stub import real_page


def test_the_inventorys_kinds_are_the_registrys() -> None:
    accepted = set(get_args(EngineConfig.model_fields["kind"].annotation))
    assert accepted == set(KINDS)
    assert set(FLAVOURS) == set(KINDS)  # every kind is read from /metrics


def test_every_spec_is_filed_under_its_own_kind_and_prefix() -> None:
    for kind, spec in KINDS.items():
        assert spec.kind == kind and spec.metric_prefix == f"{kind}:"
        names = [
            n
            for table in (spec.gauges, spec.counters, spec.histograms)
            for aliases in table.values()
            for n in aliases
        ]
        assert all(n.startswith(spec.metric_prefix) for n in names)
        assert set(names) <= WANTED  # the page filter keeps what the spec declares
    assert spec_for("no-such-kind") is KINDS["vllm"]


def test_every_llamacpp_sample_on_the_real_page_is_declared_or_deliberately_not() -> None:
    """The 15 families of the real page: each is read, or is a throughput average over the
    server's life (llama.cpp's own ``*_tokens_seconds`` gauges) or a high-water mark."""
    spec = KINDS["llamacpp"]
    declared = {n for t in (spec.gauges, spec.counters) for a in t.values() for n in a}
    on_page = {
        line.split()[0]
        for line in real_page("load").splitlines()
        if line and not line.startswith("#")
    }
    assert len(on_page) == 15
    assert on_page - declared == {
        "llamacpp:prompt_tokens_seconds",
        "llamacpp:predicted_tokens_seconds",
        "llamacpp:n_tokens_max",
    }


def test_the_tokenize_requests_differ_by_kind() -> None:
    assert KINDS["llamacpp"].tokenize.request("hi") == {"content": "hi"}
    assert KINDS["vllm"].tokenize.request("hi", special=False) == {
        "prompt": "hi",
        "add_special_tokens": False,
    }


def test_a_real_llamacpp_page_is_read_with_rates_from_its_counters() -> None:
    deriver = MetricsDeriver("llama", kind="llamacpp")
    idle = deriver.derive(parse_engine_page(real_page("idle")), now_s=100.0, wall_s=1.0)
    assert (idle.kind, idle.state.value, idle.running, idle.waiting) == ("llamacpp", "ok", 0, 0)
    load = deriver.derive(parse_engine_page(real_page("load")), now_s=110.0, wall_s=11.0)
    assert (load.running, load.waiting) == (2.0, 6.0)  # processing, deferred
    # Δprompt_tokens_total 3,414 and Δtokens_predicted_total 516 over 10 s.
    assert load.prefill_tps == pytest.approx(341.4)
    assert load.decode_tps == pytest.approx(51.6)
    for name in ("ttft_p50", "ttft_p95", "itl_p50", "e2e_latency_p50"):
        assert str(getattr(load, name)) == "n/a" and getattr(load, name).reason == (
            "llama.cpp exports no latency histograms"
        )
    assert "llama.cpp exports no KV-pool size" in load.kv_pool_tokens.reason  # type: ignore[union-attr]


def test_a_llamacpp_page_is_found_whatever_the_configured_kind() -> None:
    sample = MetricsDeriver("x").derive(parse_engine_page(real_page("load")), now_s=1, wall_s=1)
    assert sample.kind == "llamacpp" and sample.answered and "no vLLM" not in sample.message


def test_props_give_the_slot_context_and_the_slot_count() -> None:
    props = read_props(
        {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 2, "build_info": "b1"}
    )
    assert props.limits == {"max_model_len": 2048.0, "max_num_seqs": 2.0}
    assert props.version == "b1"
    bad = read_props({"default_generation_settings": {"n_ctx": -5}, "total_slots": True})
    assert str(bad.limits["max_model_len"].reason) == "/props says n_ctx -5: not plausible"  # type: ignore[union-attr]
    assert bad.limits["max_num_seqs"].reason == "/props has no total_slots"  # type: ignore[union-attr]
    assert read_props([1, 2]).limits["max_num_seqs"].reason == "/props answered no JSON object"  # type: ignore[union-attr]


def test_llamacpp_through_prometheus_is_refused_with_the_reason() -> None:
    text = (
        "prometheus:\n  url: http://127.0.0.1:9090\n"
        "engines:\n  - name: llama\n    kind: llamacpp\n    source: prometheus\n"
        "    instance: 127.0.0.1:8080\n"
    )
    with pytest.raises(UserError, match="kind llamacpp is read from its own /metrics only"):
        parse_inventory(text, "cluster.yaml")
