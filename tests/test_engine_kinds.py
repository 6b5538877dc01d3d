"""The engine-kind registry: the inventory accepts exactly its kinds, each reader knows
each kind, a llama.cpp page is read through the names its spec declares, and SGLang read
through a real Prometheus gives its own series."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from sparktop.errors import UserError
from sparktop.inventory import parse_inventory
from sparktop.inventory.models import EngineConfig
from sparktop.model import Quantile, is_num
from sparktop.sim.promrun import PROMETHEUS, start_prometheus
from sparktop.sources.engines.kinds import KINDS, spec_for, through_prometheus
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.props import read_props
from sparktop.sources.engines.reading import WANTED, parse_engine_page
from sparktop.sources.prometheus.build import prometheus_sources
from sparktop.sources.prometheus.promql import Target, engine_query
from sparktop.testing.http_stub import Reply, StubServer
from sparktop.testing.llamacpp_stub import real_page
from sparktop.testing.shared import FIXTURES
from tests.prom_helpers import require


def test_the_inventorys_kinds_are_the_registrys() -> None:
    accepted = set(get_args(EngineConfig.model_fields["kind"].annotation))
    assert accepted == set(KINDS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_source_prometheus_is_accepted_for_the_kinds_with_promql(kind: str) -> None:
    text = (
        "prometheus:\n  url: http://127.0.0.1:9090\n"
        f"engines:\n  - name: e\n    kind: {kind}\n    source: prometheus\n"
        "    instance: 127.0.0.1:8080\n"
    )
    if KINDS[kind] in through_prometheus():
        assert parse_inventory(text, "cluster.yaml").engines[0].kind == kind
    else:
        with pytest.raises(UserError, match=f"kind {kind} is read from its own /metrics only"):
            parse_inventory(text, "cluster.yaml")


def test_every_spec_is_filed_under_its_own_kind_and_prefix() -> None:
    for kind, spec in KINDS.items():
        assert spec.kind == kind and spec.metric_prefix == f"{kind}:"
        names = [n for table in (spec.gauges, spec.counters) for a in table.values() for n in a]
        names += [n for _slot, n, _label in spec.labelled.values()]
        names += [n + "_count" for aliases in spec.histograms.values() for n in aliases]
        names += [spec.info] if spec.info else []
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


def test_one_engine_query_asks_each_kind_for_its_own_series() -> None:
    query = engine_query(
        [Target("v", "10.0.0.1:8000", kind="vllm"), Target("s", "10.0.0.2:30000", kind="sglang")],
        30.0,
    )
    vllm = r'timestamp({__name__=~"vllm[:_]num_requests_running",instance=~"10\\.0\\.0\\.1:8000"})'
    sglang = r'timestamp({__name__=~"sglang[:_]num_running_reqs",instance=~"10\\.0\\.0\\.2:30000"})'
    assert vllm in query and sglang in query  # each kind's series, for its own targets only
    assert "sum by (instance, job, dp_rank)" in query and "sum by (instance, job, engine)" in query
    assert "sglang[:_]max_total_num_tokens" in query


SGLANG_PAGE = FIXTURES / "metrics" / "sglang-docs-early-sample.prom"
"""A real SGLang ``/metrics`` page (SGLang's production-metrics docs, whole code block)."""


def _after(page: str, scrapes: int) -> str:
    """The captured SGLang page after ``scrapes`` more scrapes' worth of work: 1,000 prompt
    and 100 generated tokens, and one first token in (0.25, 0.5] s, per scrape."""
    out = []
    for line in page.splitlines():
        if not line or line.startswith("#"):
            out.append(line)
            continue
        series, value = line.rsplit(" ", 1)
        number = float(value)
        if series.startswith("sglang:prompt_tokens_total"):
            number += 1000 * scrapes
        elif series.startswith("sglang:generation_tokens_total"):
            number += 100 * scrapes
        elif series.startswith("sglang:time_to_first_token_seconds_count"):
            number += scrapes
        elif series.startswith("sglang:time_to_first_token_seconds_bucket"):
            le = re.search(r'le="([^"]+)"', series)
            number += scrapes if le and float(le[1]) >= 0.5 else 0
        out.append(f"{series} {number!r}")
    return "\n".join(out) + "\n"


@pytest.mark.prometheus
async def test_sglang_through_a_real_prometheus_reads_sglang_series(tmp_path: Path) -> None:
    """A loopback SGLang page scraped every second by a real Prometheus, read by an
    ``kind: sglang``, ``source: prometheus`` engine: SGLang's gauges, its pool (used ÷ usage),
    its own hit-rate gauge, and rates and quantiles Prometheus computed from its counters."""
    require(PROMETHEUS)
    page = SGLANG_PAGE.read_text(encoding="utf-8")
    scrapes = [0]

    def metrics() -> Reply:
        scrapes[0] += 1
        return Reply(body=_after(page, scrapes[0]).encode())

    async with StubServer({"/metrics": metrics}) as server:
        address = server.url.removeprefix("http://")
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": "sglang", "static_configs": [{"targets": [address]}]}],
        }
        prom = await start_prometheus(config, tmp_path / "prometheus")
        try:
            # rate() and histogram_quantile() need at least two scrapes in the window.
            await prom.until_series("count_over_time(sglang:num_running_reqs[30s]) >= 3")
            text = (
                f"prometheus:\n  url: {prom.url}\n"
                "engines:\n  - name: sg\n    kind: sglang\n    source: prometheus\n"
                f"    instance: {address}\n"
            )
            _nodes, engines = prometheus_sources(parse_inventory(text, "cluster.yaml"))
            try:
                sample = await engines["sg"].sample()
            finally:
                await engines["sg"].aclose()
        finally:
            prom.close()
    assert sample.ok, sample.message
    assert sample.kind == "sglang"
    assert sample.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert (sample.running, sample.waiting, sample.kv_usage) == (162.0, 2826.0, 0.28)
    # sglang:num_used_tokens 123,859 ÷ sglang:token_usage 0.28, to a token
    assert (sample.kv_pool_tokens, sample.kv_pool_source) == (
        442354.0,
        "num_used_tokens÷token_usage",
    )
    assert sample.prefix_hit_rate == pytest.approx(0.007507552643049313)  # sglang:cache_hit_rate
    assert is_num(sample.prefill_tps) and sample.prefill_tps > 0
    assert sample.prefill_tps == pytest.approx(10 * sample.decode_tps)  # type: ignore[operator]
    # Every first token of the window fell in (0.25, 0.5]: Prometheus interpolates inside it.
    assert isinstance(sample.ttft_p50, Quantile) and isinstance(sample.ttft_p95, Quantile)
    assert sample.ttft_p50.value_s == pytest.approx(0.375)
    assert sample.ttft_p95.value_s == pytest.approx(0.4875)
