"""The request breakdown (queue/prefill/decode/e2e/TPOT, prompt tokens by source, waiting by
reason, finish reasons, admission rejections, spec decode per position, SGLang's equivalents):
read from real published pages (where they lack a family: null with the reason naming it), from
the simulator's page over loopback HTTP, and into ``snapshot --json``."""

from __future__ import annotations

import math
import re

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from sparktop.model import NA, EngineSample, Quantile, is_num
from sparktop.report.engines import engine_json
from sparktop.sim.engine import SPEC_ACCEPT, LoadSpec
from sparktop.sim.httpserver import SIM_TIME_HEADER
from sparktop.sim.stats import ITL_BUCKETS_S, REQUEST_LATENCY_BUCKETS_S, SPEC_TOKENS
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import parse_engine_page, read_page
from tests.conftest import SHARED
from tests.sim_helpers import samples, sim_client, until

FIXTURES = SHARED / "fixtures" / "metrics"

NEW_FIELDS = {
    "queue_time_mean_s": "vllm:request_queue_time_seconds",
    "queue_time_p50": "vllm:request_queue_time_seconds",
    "prefill_time_mean_s": "vllm:request_prefill_time_seconds",
    "prefill_time_p50": "vllm:request_prefill_time_seconds",
    "decode_time_mean_s": "vllm:request_decode_time_seconds",
    "decode_time_p50": "vllm:request_decode_time_seconds",
    "e2e_latency_mean_s": "vllm:e2e_request_latency_seconds",
    "e2e_latency_p50": "vllm:e2e_request_latency_seconds",
    "tpot_mean_s": "vllm:request_time_per_output_token_seconds",
    "tpot_p50": "vllm:request_time_per_output_token_seconds",
    "prefill_computed_tps": "vllm:prompt_tokens_by_source_total",
    "waiting_capacity": "vllm:num_requests_waiting_by_reason",
    "waiting_deferred": "vllm:num_requests_waiting_by_reason",
    "requests_finished_per_s": "vllm:request_success_total",
    "requests_aborted_per_s": "vllm:request_success_total",
    "requests_errored_per_s": "vllm:request_success_total",
    "admission_rejections_per_s": "vllm:admission_rejections_total",
}


def derive_twice(text: str, kind: str = "vllm", dt: float = 5.0) -> EngineSample:
    deriver = MetricsDeriver("e", kind=kind)
    deriver.derive(parse_engine_page(text), now_s=0.0, wall_s=1.7e9)
    return deriver.derive(parse_engine_page(text), now_s=dt, wall_s=1.7e9 + dt)


def test_real_vllm_08_page_has_none_of_them_and_says_which() -> None:
    text = (FIXTURES / "vllm-0.8-v1-prodstack318-excerpt-a.prom").read_text()
    s = derive_twice(text)
    assert is_num(s.running)  # the page itself reads
    for name, metric in NEW_FIELDS.items():
        value = getattr(s, name)
        assert isinstance(value, NA), name
        assert value.reason == f"{metric} not exported by this server", name
    assert s.spec_accept_by_position == () and dict(s.prompt_tps_by_source) == {}
    assert isinstance(s.retracted_reqs, NA) and s.retracted_reqs.reason == (
        "vllm exports no equivalent"
    )
    out = engine_json(s)
    for key in ("queue_time_mean_s", "prefill_time_p50_s", "tpot_mean_s", "waiting_capacity"):
        assert out[key] is None
        assert "not exported by this server" in out["missing"][key]  # type: ignore[index]
    assert out["spec_accept_by_position"] is None
    assert out["missing"]["spec_accept_by_position"] == "no speculative decoding"  # type: ignore[index]
    assert out["prompt_tok_per_s_by_source"] is None


def _promql_table_as_page(*names: str) -> str:
    """Rows ``name{labels} | value`` of a published Prometheus query result as exposition
    lines (the Prometheus-added ``instance``/``job`` labels kept; they are labels like any)."""
    lines = []
    for name in names:
        for row in (FIXTURES / name).read_text().splitlines():
            head, sep, value = row.partition(" | ")
            if sep and head.startswith("vllm:") and not head.split("{")[0].endswith("_created"):
                lines.append(re.sub(r",\s+", ",", head) + " " + value)
    return "\n".join(lines) + "\n"


def test_real_dp8_spec_decode_counters_are_read_per_rank_and_position() -> None:
    page = parse_engine_page(
        _promql_table_as_page(
            "vllm-dp8-specdecode-pr24049-promql-table-a.txt",
            "vllm-dp8-specdecode-pr24049-promql-table-b.txt",
        )
    )
    reading = read_page(page, "vllm")
    drafts = {r: reading.ranks[r].counters["spec_drafts"] for r in reading.ranks}
    assert drafts == {"0": 22, "1": 15, "2": 29, "3": 20, "4": 25, "5": 24, "6": 27, "7": 26}
    assert reading.ranks["0"].counters["spec_accepted_pos/4"] == 2
    assert reading.ranks["6"].counters["spec_accepted_pos/3"] == 24
    assert "spec_accepted_pos/3" not in reading.ranks["0"].counters
    # The published window holds positions 3 and 4 only: no figure is shown under the
    # wrong position (index k is position k), and none is invented for 0-2.
    deriver = MetricsDeriver("e")
    s = deriver.derive(page, now_s=0.0, wall_s=1.7e9)
    assert s.spec_accept_by_position == ()
    assert isinstance(s.spec_acceptance_rate, NA)
    assert "spec_decode_num_accepted_tokens_total not exported" in s.spec_acceptance_rate.reason


def test_real_cache_config_info_gives_no_scheduler_limits() -> None:
    # vLLM 0.11.0's cache_config_info carries CacheConfig labels only: max_num_seqs and
    # max_num_batched_tokens fall through to the inventory, then the profile, with origin.
    from sparktop.sources.engines.pool import Limits

    text = (FIXTURES / "vllm-0.11.0-cache-config-info-issue28924.prom").read_text()
    text += 'vllm:num_requests_running{engine="0"} 1\n'
    page = parse_engine_page(text)
    s = MetricsDeriver(
        "e", inventory=Limits(max_num_seqs=6), profile=Limits(max_num_batched_tokens=8192)
    ).derive(page, now_s=0.0, wall_s=1.7e9)
    assert (s.max_num_seqs, s.limit_sources["max_num_seqs"]) == (6, "inventory")
    assert (s.max_num_batched_tokens, s.limit_sources["max_num_batched_tokens"]) == (
        8192,
        "profile",
    )
    told = text.replace('block_size="16"', 'block_size="16",max_num_seqs="12"')
    s = MetricsDeriver("e", inventory=Limits(max_num_seqs=6)).derive(
        parse_engine_page(told), now_s=0.0, wall_s=1.7e9
    )
    assert (s.max_num_seqs, s.limit_sources["max_num_seqs"]) == (12, "cache_config_info")


def test_real_sglang_page_names_what_it_lacks() -> None:
    text = (FIXTURES / "sglang-docs-early-sample.prom").read_text()
    s = derive_twice(text, kind="sglang")
    assert isinstance(s.queue_time_mean_s, NA)
    assert s.queue_time_mean_s.reason == "sglang:queue_time_seconds not exported by this server"
    assert isinstance(s.prefill_time_mean_s, NA)
    assert s.prefill_time_mean_s.reason == "sglang exports no equivalent"
    assert isinstance(s.retracted_reqs, NA) and "sglang:num_retracted_reqs" in (
        s.retracted_reqs.reason
    )
    assert isinstance(s.spec_acceptance_rate, NA)


class _SglangNow(Collector):
    """A page with SGLang's names for the equivalents (collector.py), made by
    prometheus_client as SGLang makes it."""

    def __init__(self) -> None:
        self.queue_sum, self.queue_count, self.retracted_total = 0.0, 0, 0

    def collect(self):  # type: ignore[no-untyped-def]
        labels = ["model_name", "engine_type", "tp_rank", "dp_rank"]
        values = ["glm", "unified", "0", "0"]

        def gauge(name: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, name, labels=labels)
            g.add_metric(values, value)
            return g

        yield gauge("sglang:num_running_reqs", 3)
        yield gauge("sglang:num_queue_reqs", 1)
        yield gauge("sglang:token_usage", 0.5)
        yield gauge("sglang:max_total_num_tokens", 100_000)
        yield gauge("sglang:kv_available_tokens", 48_000)
        yield gauge("sglang:num_retracted_reqs", 2)
        yield gauge("sglang:max_prefill_tokens", 16_384)
        yield gauge("sglang:spec_accept_rate", 0.55)
        yield gauge("sglang:spec_accept_length", 1.55)
        c = CounterMetricFamily("sglang:num_retracted_requests", "retracted", labels=labels)
        c.add_metric(values, self.retracted_total)
        yield c
        h = HistogramMetricFamily("sglang:queue_time_seconds", "queue", labels=labels)
        h.add_metric(
            values, [("0.5", float(self.queue_count)), ("+Inf", float(self.queue_count))],
            self.queue_sum,
        )  # fmt: skip
        yield h


def test_sglang_equivalents() -> None:
    collector = _SglangNow()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    d = MetricsDeriver("e", kind="sglang")
    d.derive(parse_engine_page(generate_latest(registry).decode()), now_s=0.0, wall_s=1.7e9)
    collector.queue_sum, collector.queue_count, collector.retracted_total = 1.0, 4, 10
    s = d.derive(parse_engine_page(generate_latest(registry).decode()), now_s=5.0, wall_s=1.7e9)
    assert s.queue_time_mean_s == pytest.approx(0.25)
    assert s.preemptions_per_s == pytest.approx(2.0)  # retractions are SGLang's preemptions
    assert s.retracted_reqs == 2
    assert s.kv_free_tokens == 48_000  # said by the server, not pool − used
    assert s.spec_acceptance_rate == pytest.approx(0.55)
    assert s.spec_mean_accept_len == pytest.approx(1.55)
    assert (s.max_num_batched_tokens, s.limit_sources["max_num_batched_tokens"]) == (
        16_384,
        "server",
    )


async def test_simulator_exports_them_with_vllm_names_and_edges() -> None:
    load = LoadSpec(clients=4, prompt_tokens=(1004,), output_tokens=64, think_s=0.2, jitter=0)
    async with sim_client(speed=20, load=load) as (_sim, client):

        async def page() -> tuple[float, str]:
            r = await client.get("/metrics")
            return float(r.headers[SIM_TIME_HEADER]), r.text

        def finished(text: str) -> float:
            return samples(text)["vllm:request_success_total"]

        t1, first = await until(page, lambda p: finished(p[1]) >= 4)
        t2, second = await until(
            page, lambda p: p[0] >= t1 + 20 and finished(p[1]) >= finished(first) + 8
        )
    counted = samples(second)
    for name in (
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:e2e_request_latency_seconds",
    ):
        assert _edges(second, name) == list(REQUEST_LATENCY_BUCKETS_S)
    assert _edges(second, "vllm:request_time_per_output_token_seconds") == list(ITL_BUCKETS_S)
    assert counted["vllm:spec_decode_num_draft_tokens_total"] == pytest.approx(
        SPEC_TOKENS * counted["vllm:spec_decode_num_drafts_total"]
    )

    d = MetricsDeriver("dsv41")
    d.derive(parse_engine_page(first), now_s=t1, wall_s=1.7e9)
    s = d.derive(parse_engine_page(second), now_s=t2, wall_s=1.7e9 + t2 - t1)
    for name in NEW_FIELDS:
        if name.startswith(("waiting_", "requests_", "admission_")):
            continue
        value = getattr(s, name)
        assert is_num(value) or isinstance(value, Quantile), (name, value)
    assert is_num(s.queue_time_mean_s) and is_num(s.prefill_time_mean_s)
    assert is_num(s.e2e_latency_mean_s) and is_num(s.decode_time_mean_s)
    # one request's life: queue + prefill + decode = end to end (means over the same requests)
    assert s.queue_time_mean_s + s.prefill_time_mean_s + s.decode_time_mean_s == pytest.approx(
        s.e2e_latency_mean_s, rel=1e-6
    )
    assert is_num(s.prefill_computed_tps) and is_num(s.prefill_tps)
    assert s.prefill_computed_tps <= s.prefill_tps + 1e-9
    assert set(s.prompt_tps_by_source) == {
        "local_compute",
        "local_cache_hit",
        "external_kv_transfer",
    }
    assert s.waiting_capacity == s.waiting and s.waiting_deferred == 0
    assert is_num(s.requests_finished_per_s) and s.requests_finished_per_s > 0
    assert s.requests_aborted_per_s == 0 and s.requests_errored_per_s == 0
    assert s.admission_rejections_per_s == 0
    # MTP, 5 tokens: position k accepted in 0.8^(k+1) of drafts (integer counters: ±1 draft)
    assert len(s.spec_accept_by_position) == SPEC_TOKENS
    expected = [SPEC_ACCEPT ** (k + 1) for k in range(SPEC_TOKENS)]
    assert list(s.spec_accept_by_position) == pytest.approx(expected, rel=0.05)
    assert s.spec_mean_accept_len == pytest.approx(1 + sum(expected), rel=0.03)
    assert s.spec_acceptance_rate == pytest.approx(sum(expected) / SPEC_TOKENS, rel=0.03)
    out = engine_json(s)
    assert out["spec_accept_by_position"] == list(s.spec_accept_by_position)
    assert out["queue_time_mean_s"] == s.queue_time_mean_s
    assert "queue_time_mean_s" not in out["missing"]  # type: ignore[operator]


def _edges(text: str, name: str) -> list[float]:
    pattern = re.compile(rf'^{re.escape(name)}_bucket\{{[^}}]*le="([^"]+)"', re.MULTILINE)
    return [float(e) for e in pattern.findall(text) if not math.isinf(float(e))]
