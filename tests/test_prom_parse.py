"""Every metrics fixture (real public captures) parses and yields the values it contains."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from sparktop.model import EngineSample, Quantile
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.exposition.page import PromPage, normalise, parse_page, promql_table_to_text
from tests.conftest import FIXTURES

METRICS = FIXTURES / "metrics"


def page_of(name: str, wanted: frozenset[str] | None = None) -> PromPage:
    text = (METRICS / name).read_text()
    if name.endswith(".txt"):
        text = promql_table_to_text(text)
    return parse_page(text, wanted)


def derive(name: str) -> EngineSample:
    return MetricsDeriver("e").derive(page_of(name, WANTED), now_s=1.0, wall_s=time.time())


def value(page: PromPage, metric: str, **labels: str) -> float:
    hits = [
        s.value for s in page.get(metric) if all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(hits) == 1, (metric, labels, hits)
    return hits[0]


def test_every_fixture_file_parses_without_a_bad_line() -> None:
    files = sorted(p for p in METRICS.iterdir() if p.suffix in (".prom", ".txt"))
    assert len(files) == 9
    for path in files:
        page = page_of(path.name)
        assert page.error == "", (path.name, page.error)
        assert page.sample_count > 0 or page.declared, path.name


def test_sglang_docs_early_sample() -> None:
    page = page_of("sglang-docs-early-sample.prom")
    assert value(page, "sglang:prompt_tokens_total") == 8.128902e06
    assert value(page, "sglang:generation_tokens_total") == 7.557572e06
    assert value(page, "sglang:token_usage") == 0.28
    assert value(page, "sglang:num_running_reqs") == 162
    assert value(page, "sglang:num_queue_reqs") == 2826
    assert value(page, "sglang:time_to_first_token_seconds_count") == 11008
    assert value(page, "sglang:time_to_first_token_seconds_bucket", le="30.0") == 2513
    assert value(page, "sglang:func_latency_seconds_count", name="generate_request") == 14007

    s = derive("sglang-docs-early-sample.prom")
    assert s.kind == "sglang"
    assert (s.running, s.waiting, s.kv_usage) == (162, 2826, 0.28)
    assert s.prefix_hit_rate == pytest.approx(0.007507552643049313)
    # 2513 of 11008 requests finished under 30 s: the median is only known to be above it.
    assert s.ttft_p50 == Quantile(30.0, ">")
    # ITL read through the old alias time_per_output_token_seconds, interpolated in (0.075, 0.1].
    expected = 0.075 + 0.025 * (7.400757e06 / 2 - 433413) / (4.950195e06 - 433413)
    assert isinstance(s.itl_p50, Quantile)
    assert s.itl_p50.value_s == pytest.approx(expected) and s.itl_p50.bound == ""
    assert "ttft_p50" in s.since_start


def test_sglang_first_metrics_limits_from_the_page() -> None:
    page = page_of("sglang-first-metrics-pr1853-excerpt.prom")
    label = "/shared/public/elr-models/meta-llama/Llama-3.2-3B/" + (
        "5cc0ffe09ee49f7be6ca7c794ee6bd7245e84e60/"
    )
    assert value(page, "sglang:max_total_num_tokens", name=label) == 570979
    assert value(page, "sglang:max_prefill_tokens") == 16384
    assert value(page, "sglang:prompt_tokens_total") == 230794
    s = derive("sglang-first-metrics-pr1853-excerpt.prom")
    assert (s.kv_pool_tokens, s.kv_pool_source) == (570979, "max_total_num_tokens")
    assert (s.max_model_len, s.limit_sources["max_model_len"]) == (131072, "server")
    assert (s.max_num_seqs, s.limit_sources["max_num_seqs"]) == (2231, "server")
    assert s.model == label


def test_sglang_044_engine_type_label_is_tolerated() -> None:
    page = page_of("sglang-0.4.4-engine-type-pr4444-excerpt.prom")
    assert value(page, "sglang:num_used_tokens", engine_type="unified") == 0
    assert "sglang:gen_throughput" in page.declared
    s = derive("sglang-0.4.4-engine-type-pr4444-excerpt.prom")
    assert (s.running, s.kv_usage, s.state.value) == (0, 0, "ok")


def test_vllm_011_cache_config_info_pool() -> None:
    page = page_of("vllm-0.11.0-cache-config-info-issue28924.prom")
    labels = page.get("vllm:cache_config_info")[0].labels
    assert (labels["num_gpu_blocks"], labels["block_size"], labels["num_cpu_blocks"]) == (
        "9271",
        "16",
        "None",
    )
    s = derive("vllm-0.11.0-cache-config-info-issue28924.prom")
    assert (s.kv_pool_tokens, s.kv_pool_source) == (9271 * 16, "num_gpu_blocks×block_size")


def test_vllm_08_excerpts_old_names() -> None:
    a = page_of("vllm-0.8-v1-prodstack318-excerpt-a.prom")
    assert value(a, "process_start_time_seconds") == 1.74262400557e09
    assert value(a, "process_max_fds") == 1.048576e06
    assert value(a, "vllm:gpu_cache_usage_perc") == 0.0
    assert "vllm:gpu_prefix_cache_queries_total" in a.declared
    s = derive("vllm-0.8-v1-prodstack318-excerpt-a.prom")
    assert (s.running, s.waiting, s.kv_usage) == (0, 0, 0)  # KV through the old alias
    assert s.model == "Qwen/Qwen2.5-Coder-32B-Instruct"

    b = page_of("vllm-0.8-v1-prodstack318-excerpt-b.prom")
    assert value(b, "vllm:request_params_max_tokens_bucket", le="20.0") == 5
    assert value(b, "vllm:request_params_max_tokens_bucket", le="5000.0") == 11


def test_vllm_dp2_running_per_engine() -> None:
    page = page_of("vllm-dp2-num-requests-running-gaie2950.prom")
    assert value(page, "vllm:num_requests_running", engine="0") == 0
    assert value(page, "vllm:num_requests_running", engine="1") == 0
    s = derive("vllm-dp2-num-requests-running-gaie2950.prom")
    assert [r.rank for r in s.ranks] == ["0", "1"] and s.running == 0


def test_vllm_dp8_specdecode_promql_tables() -> None:
    a = page_of("vllm-dp8-specdecode-pr24049-promql-table-a.txt")
    drafts = {s.labels["engine"]: s.value for s in a.get("vllm:spec_decode_num_drafts_total")}
    assert drafts == {"0": 22, "1": 15, "2": 29, "3": 20, "4": 25, "5": 24, "6": 27, "7": 26}
    assert not a.get("vllm:spec_decode_num_drafts_created")  # _created dropped
    b = page_of("vllm-dp8-specdecode-pr24049-promql-table-b.txt")
    name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    assert value(b, name, engine="6", position="3") == 24
    assert value(b, name, engine="5", position="4") == 17
    assert len(b.get(name)) == 8


def test_normalise_prefixes() -> None:
    assert normalise("vllm_num_requests_running") == "vllm:num_requests_running"
    assert normalise("sglang_token_usage") == "sglang:token_usage"
    assert normalise("process_open_fds") == "process_open_fds"


def test_openmetrics_body_from_prometheus_client() -> None:
    registry = CollectorRegistry()
    Counter("vllm:prompt_tokens", "p", ["engine"], registry=registry).labels("0").inc(42)
    Gauge("vllm:num_requests_running", "r", ["engine"], registry=registry).labels("0").set(2)
    body = generate_openmetrics(registry).decode()  # type: ignore[no-untyped-call]
    assert "# EOF" in body and "_created" in body
    page = parse_page(body)
    assert value(page, "vllm:prompt_tokens_total", engine="0") == 42
    assert value(page, "vllm:num_requests_running") == 2
    assert not any(name.endswith("_created") for name in page.samples)


def test_an_invalid_line_refuses_the_page_as_prometheus_does() -> None:
    """prometheus_client (and Prometheus) reject a page with one bad line: numbers from the
    rest of it are not shown as if it had read, and the row says why."""
    text = 'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_waiting{engine="0" 1\n'
    page = parse_page(text)
    assert page.error.startswith("page is not valid Prometheus text (prometheus_client: ")
    assert page.parser == "prometheus_client" and not page.samples
    s = MetricsDeriver("e").derive(parse_page(text, WANTED), now_s=0.0, wall_s=0.0)
    assert s.state.value == "unavailable" and s.message == page.error


def test_nan_and_inf_are_kept_for_the_reader() -> None:
    page = parse_page('a{x="1"} NaN\nb +Inf\nc 1\n')
    assert math.isnan(value(page, "a")) and value(page, "b") == math.inf
    assert [s.finite for s in page.get("a")] == [False]


def test_wanted_filter_keeps_only_those_samples() -> None:
    text = Path(METRICS / "sglang-docs-early-sample.prom").read_text()
    page = parse_page(text, {"sglang:token_usage"})
    assert set(page.samples) == {"sglang:token_usage"}
    assert "sglang:num_queue_reqs" in page.declared
