"""The metrics cases (../shared/cases/metrics) and the deriver's windowed arithmetic.

Each case file is read through the same path as a live scrape (parse → MetricsDeriver) and
must show the behaviour ../shared/cases/README.md lists for it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sparktop.model import NA, EngineSample, EngineState, Quantile, is_num
from sparktop.sources.engines.breakdown import PHASE_VALUES
from sparktop.sources.engines.histread import Hist
from sparktop.sources.engines.lifetime import ENGINE_VALUES, LIFETIME_FIELDS
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.pool import Limits
from sparktop.sources.engines.quantile import histogram_quantile
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.exposition.page import parse_page
from sparktop.testing.vllm_page import FakeVllm, Load
from tests.conftest import CASES

METRIC_CASES = CASES / "metrics"


def scrape(deriver: MetricsDeriver, case: str, now_s: float = 0.0) -> EngineSample:
    page = parse_page((METRIC_CASES / case).read_text(), WANTED)
    return deriver.derive(page, now_s=now_s, wall_s=1.7e9 + now_s)


def one(case: str, **kwargs: object) -> EngineSample:
    return scrape(MetricsDeriver("dsv4", **kwargs), case)  # type: ignore[arg-type]


def test_every_case_file_is_named_here() -> None:
    source = Path(__file__).read_text(encoding="utf-8")
    for path in METRIC_CASES.iterdir():
        assert path.name in source, f"{path.name} has no test"


def test_nan_gauge() -> None:
    s = one("nan-gauge.prom")
    assert s.state is EngineState.DEGRADED and s.judged  # incomplete, its other gauges judged
    assert s.message == "waiting n/a: vllm:num_requests_waiting is nan"
    assert s.running == 3 and s.kv_usage == pytest.approx(0.412)
    assert isinstance(s.waiting, NA) and "nan" in s.waiting.reason
    # the generation counter was parsed: with a second scrape it has a rate
    d = MetricsDeriver("dsv4")
    scrape(d, "nan-gauge.prom", 0.0)
    assert scrape(d, "nan-gauge.prom", 2.0).decode_tps == 0.0


def test_openmetrics_body() -> None:
    s = one("openmetrics-body.prom")
    assert s.state is EngineState.OK
    assert s.running == 2 and s.kv_usage == 0.25
    page = parse_page((METRIC_CASES / "openmetrics-body.prom").read_text())
    assert page.get("vllm:prompt_tokens_total")[0].value == 4521873
    assert page.get("vllm:generation_tokens_total")[0].value == 90311
    assert not [n for n in page.samples if n.endswith("_created")]


def test_headers_only_is_degraded_with_values_unavailable_not_zero() -> None:
    s = one("headers-only.prom")
    assert s.state is EngineState.DEGRADED  # the server answered (cases/README.md)
    assert "no samples" in s.message and "vllm:num_requests_running" in s.message
    for value in (s.running, s.waiting, s.kv_usage):
        assert isinstance(value, NA)


def test_cache_config_none_pool_unknown_then_inventory_then_profile() -> None:
    s = one("cache-config-none.prom")
    assert s.kv_usage == 0.5
    assert s.kv_pool_source == "unknown" and isinstance(s.kv_pool_tokens, NA)
    assert "num_gpu_blocks='None'" in s.kv_pool_tokens.reason
    assert isinstance(s.kv_free_tokens, NA)

    s = one("cache-config-none.prom", inventory=Limits(kv_pool_tokens=2_493_464))
    assert (s.kv_pool_tokens, s.kv_pool_source) == (2_493_464, "inventory")
    assert s.kv_free_tokens == pytest.approx(2_493_464 * 0.5)

    s = one("cache-config-none.prom", profile=Limits(kv_pool_tokens=11_434_628))
    assert (s.kv_pool_tokens, s.kv_pool_source) == (11_434_628, "profile")


def test_dp2_engines_sum_and_max() -> None:
    s = one("dp2-engines.prom")
    assert s.running == 7 and s.waiting == 1
    assert s.kv_usage == 0.81
    per_engine = 89_332 * 256 / 2
    assert [r.rank for r in s.ranks] == ["0", "1"]
    assert [r.kv_usage for r in s.ranks] == [0.81, 0.47]
    assert [r.kv_pool_tokens for r in s.ranks] == [per_engine, per_engine]
    assert s.ranks[0].kv_free_tokens == pytest.approx(per_engine * 0.19)
    assert s.kv_pool_source == "num_gpu_blocks×block_size"
    assert s.kv_free_tokens == pytest.approx(per_engine * (0.19 + 0.53))


def test_counter_reset_pair_restarts_without_negative_rate() -> None:
    d = MetricsDeriver("dsv4")
    first = scrape(d, "counter-reset-1.prom", 0.0)
    assert not first.restarted
    second = scrape(d, "counter-reset-2.prom", 1.0)
    assert second.restarted
    assert "restarted" in second.message
    for rate in (second.prefill_tps, second.decode_tps):
        assert isinstance(rate, NA)  # never negative
    page = parse_page(
        (METRIC_CASES / "counter-reset-2.prom").read_text().replace("310.0", "410.0"), WANTED
    )
    third = d.derive(page, now_s=3.0, wall_s=0.0)
    assert not third.restarted
    assert third.decode_tps == pytest.approx(50.0)  # (410 − 310) / 2 s from the new baseline
    assert third.prefill_tps == 0.0


def test_itl_first_bucket_is_less_than_10_ms() -> None:
    s = one("itl-first-bucket.prom")
    assert s.itl_p50 == Quantile(0.01, "<")
    assert str(s.itl_p50) == "< 10 ms"
    assert "itl_p50" in s.since_start


# -- the deriver's arithmetic on a page built with prometheus_client ---------------------------


def fake_scrape(d: MetricsDeriver, fake: FakeVllm, now_s: float) -> EngineSample:
    return d.derive(parse_page(fake.page().decode(), WANTED), now_s=now_s, wall_s=now_s)


def test_rates_quantiles_and_means_over_the_window() -> None:
    fake = FakeVllm(engines=2, kv_cache_size_tokens=500_000)
    for e, scale in (("0", 1.0), ("1", 2.0)):
        fake.load[e] = Load(prefill_tps=4700 * scale, decode_tps=65 * scale, preemptions_per_s=0.5,
                            requests_per_s=20, prompt_tokens=2048)  # fmt: skip
        fake.set_gauges(e, running=3, waiting=1, kv_usage=0.4)
    d = MetricsDeriver("dsv4", window_s=30)
    fake.advance(100)  # lifetime history that the window must ignore
    fake.load["0"].ttft_range_s = (0.25, 0.5)
    fake_scrape(d, fake, 0.0)
    fake.advance(10)
    s = fake_scrape(d, fake, 10.0)
    assert s.window_s == 10.0 and not s.since_start
    assert s.prefill_tps == pytest.approx(4700 * 3)
    assert s.decode_tps == pytest.approx(65 * 3)
    assert s.preemptions_per_s == pytest.approx(1.0)
    assert [r.prefill_tps for r in s.ranks] == pytest.approx([4700, 9400])
    assert s.running == 6 and s.waiting == 2
    assert (s.kv_pool_tokens, s.kv_pool_source) == (1_000_000, "cache_config_info")
    assert s.kv_free_tokens == pytest.approx(600_000)
    # rank 0 saw TTFT uniform in (0.25, 0.5] during the window, rank 1 uniform in (0.1, 1.0]
    assert isinstance(s.ranks[0].ttft_p50, Quantile)
    assert s.ranks[0].ttft_p50.value_s == pytest.approx(0.375, rel=0.01)
    assert isinstance(s.ranks[1].ttft_p95, Quantile)
    assert s.ranks[1].ttft_p95.value_s == pytest.approx(0.955, rel=0.05)
    assert isinstance(s.itl_p50, Quantile) and s.itl_p50.value_s == pytest.approx(0.075, rel=0.05)
    assert s.mean_prompt_tokens == 2048
    assert s.prefix_hit_rate == pytest.approx(0.25)
    assert isinstance(s.spec_acceptance_rate, NA) and "speculative" in s.spec_acceptance_rate.reason


def test_no_requests_in_window_says_so() -> None:
    fake = FakeVllm()
    fake.load["0"] = Load(requests_per_s=5)
    fake.advance(10)
    d = MetricsDeriver("dsv4")
    first = fake_scrape(d, fake, 0.0)
    assert isinstance(first.ttft_p50, Quantile) and "ttft_p50" in first.since_start
    second = fake_scrape(d, fake, 5.0)
    # An empty window shows the server's lifetime figures, marked, as a first scrape does
    # (snapshot and the monitor derive the same); the rates stay the window's.
    assert second.ttft_p50 == first.ttft_p50 and "ttft_p50" in second.since_start
    assert second.mean_prompt_tokens == first.mean_prompt_tokens
    assert "mean_prompt_tokens" in second.since_start
    assert second.decode_tps == 0.0


def test_a_window_where_no_request_finished_takes_only_those_fields_from_the_lifetime() -> None:
    """First tokens in the window, no request finished (long requests): TTFT is the
    window's, the per-request phases the lifetime's, equal to a first scrape's of the page."""
    fake = FakeVllm(engines=2, full=True)
    for e in fake.engines:
        fake.load[e] = Load(requests_per_s=5)
    fake.advance(10)
    d = MetricsDeriver("dsv4")
    fake_scrape(d, fake, 0.0)
    fake.advance(5)
    second = fake_scrape(d, fake, 5.0)
    lifetime = fake_scrape(MetricsDeriver("dsv4"), fake, 5.0)
    assert set(LIFETIME_FIELDS) <= ENGINE_VALUES | PHASE_VALUES  # each is derived somewhere
    assert set(second.since_start) == PHASE_VALUES
    assert {k: getattr(second, k) for k in PHASE_VALUES} == {
        k: getattr(lifetime, k) for k in PHASE_VALUES
    }
    assert "ttft_p50" not in second.since_start  # the window's own, as are the rows
    assert second.prompt_tokens_dist != lifetime.prompt_tokens_dist
    assert second.ranks[0].ttft_p50 == second.ttft_p50


def test_spec_decode_acceptance() -> None:
    fake = FakeVllm(spec_decode=True)
    d = MetricsDeriver("dsv4")
    fake_scrape(d, fake, 0.0)
    fake.advance(4)
    s = fake_scrape(d, fake, 4.0)
    assert s.spec_acceptance_rate == pytest.approx(180 / 300)
    assert s.spec_mean_accept_len == pytest.approx(1 + 180 / 100)


def test_window_slides() -> None:
    fake = FakeVllm()
    d = MetricsDeriver("dsv4", window_s=10)
    for t in range(0, 31):
        fake.load["0"].decode_tps = 10.0 if t < 20 else 40.0
        s = fake_scrape(d, fake, float(t))
        fake.advance(1)
    assert s.window_s == 10.0
    assert s.decode_tps == pytest.approx(40.0)  # the first 20 s are out of the window


def test_stale_gauges_while_no_counter_moves() -> None:
    fake = FakeVllm()
    fake.set_gauges("0", running=5, waiting=2, kv_usage=0.6)
    d = MetricsDeriver("dsv4", stale_after_s=60)
    samples = [fake_scrape(d, fake, float(t)) for t in (0, 30, 59, 61)]
    states = [s.state for s in samples]
    assert states == [EngineState.OK, EngineState.OK, EngineState.OK, EngineState.STALE]
    assert "(running 5, waiting 2): gauges may be frozen" in samples[-1].message
    fake.load["0"].decode_tps = 10
    fake.advance(1)
    assert fake_scrape(d, fake, 62.0).state is EngineState.OK  # a counter moved


def test_idle_server_is_not_stale() -> None:
    fake = FakeVllm()
    d = MetricsDeriver("dsv4", stale_after_s=10)
    assert all(fake_scrape(d, fake, float(t)).state is EngineState.OK for t in range(0, 40, 5))


def test_quantile_open_ends_and_interpolation() -> None:
    inf = math.inf
    hist = Hist((0.01, 0.025, inf), (0.0, 10.0, 10.0), 0.2, 10.0)
    q = histogram_quantile(0.5, hist, "empty")
    assert isinstance(q, Quantile) and q.value_s == pytest.approx(0.0175) and q.bound == ""
    assert histogram_quantile(
        0.5, Hist((1.0, 2560.0, inf), (0.0, 1.0, 9.0), 0, 9.0), "e"
    ) == Quantile(2560.0, ">")
    assert str(Quantile(2560.0, ">")) == "> 2560 s"
    assert str(Quantile(8.43)) == "8.43 s"
    assert histogram_quantile(0.5, Hist((1.0, inf), (0.0, 0.0), 0, 0), "empty") == NA("empty")


def test_pool_and_limits_sources() -> None:
    fake = FakeVllm(num_gpu_blocks="None")
    d = MetricsDeriver(
        "dsv4",
        inventory=Limits(max_num_seqs=8),
        profile=Limits(max_num_seqs=6, max_num_batched_tokens=8192, kv_pool_tokens=11_434_628),
    )
    s = d.derive(
        parse_page(fake.page().decode(), WANTED), now_s=0, wall_s=0, max_model_len=1_048_576
    )
    assert (s.max_num_seqs, s.limit_sources["max_num_seqs"]) == (8, "inventory")
    assert (s.max_num_batched_tokens, s.limit_sources["max_num_batched_tokens"]) == (
        8192,
        "profile",
    )
    assert (s.max_model_len, s.limit_sources["max_model_len"]) == (1_048_576, "/v1/models")
    assert (s.kv_pool_tokens, s.kv_pool_source) == (11_434_628, "profile")
    assert is_num(s.kv_free_tokens)


def test_inf_counter_makes_only_that_rate_unavailable() -> None:
    text = (
        'vllm:num_requests_running{engine="0"} 2\n'
        'vllm:generation_tokens_total{engine="0"} +Inf\n'
        'vllm:prompt_tokens_total{engine="0"} 100\n'
    )
    d = MetricsDeriver("dsv4")
    d.derive(parse_page(text, WANTED), now_s=0.0, wall_s=0.0)
    s = d.derive(parse_page(text.replace(" 100", " 300"), WANTED), now_s=2.0, wall_s=2.0)
    assert s.state is EngineState.OK and s.running == 2
    assert isinstance(s.decode_tps, NA) and "inf" in s.decode_tps.reason
    assert s.prefill_tps == 100.0


def test_sglang_dp_ranks_and_gauges() -> None:
    text = "".join(
        f'sglang:{name}{{dp_rank="{r}",model_name="m"}} {value}\n'
        for r, values in (("0", (3, 1, 0.5, 100000)), ("1", (2, 0, 0.25, 100000)))
        for name, value in zip(
            ("num_running_reqs", "num_queue_reqs", "token_usage", "max_total_num_tokens"),
            values,
            strict=True,
        )
    )
    s = MetricsDeriver("sg", kind="sglang").derive(parse_page(text, WANTED), now_s=0, wall_s=0)
    assert (s.kind, s.running, s.waiting, s.kv_usage) == ("sglang", 5, 1, 0.5)
    assert (s.kv_pool_tokens, s.kv_pool_source) == (200000, "max_total_num_tokens")
    assert s.kv_free_tokens == pytest.approx(50000 + 75000)


# -- the text format as prometheus_client reads it (cases/README.md rows 18-21) -----------------

RUNNING_WAITING_KV = (4, 0, 0.010902)


def read(text: str) -> EngineSample:
    return MetricsDeriver("dsv4").derive(parse_page(text, WANTED), now_s=0.0, wall_s=0.0)


def test_tab_separator_reads_as_a_space() -> None:
    s = one("tab-separator.prom")
    assert (s.running, s.waiting, s.kv_usage) == RUNNING_WAITING_KV
    assert s.state is EngineState.OK and s.model == "dsv41-flash"
    # the whole kind: a tab wherever the format allows blanks, with or without labels
    for line in (
        "vllm:num_requests_running\t3\n",
        'vllm:num_requests_running\t{engine="0"}\t3\n',
        'vllm:num_requests_running{engine="0"} \t 3\t1700000000000\n',
    ):
        assert read(line).running == 3, repr(line)


@pytest.mark.parametrize("char", ["\x0c", "\r", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028"])
def test_raw_control_in_a_label_value_never_splits_the_line(char: str) -> None:
    s = one("label-formfeed.prom")
    assert (s.running, s.waiting, s.kv_usage) == RUNNING_WAITING_KV
    assert s.model == "dsv41\x0cflash"  # kept as the server sent it; outputs make it visible
    text = (METRIC_CASES / "label-formfeed.prom").read_text().replace("\x0c", char)
    s = read(text)
    assert (s.running, s.waiting, s.kv_usage) == RUNNING_WAITING_KV
    assert s.model == f"dsv41{char}flash"


def test_quoted_names_read_as_the_same_metrics() -> None:
    s = one("quoted-name.prom")
    assert (s.running, s.waiting, s.kv_usage) == RUNNING_WAITING_KV
    page = parse_page((METRIC_CASES / "quoted-name.prom").read_text(), WANTED)
    assert page.get("vllm:num_requests_running")[0].labels == {
        "engine": "0",
        "model_name": "dsv41-flash",
    }
    # quoted in HELP/TYPE too, spaces around, and an OpenMetrics-style underscore spelling
    text = (
        '# TYPE "vllm:num_requests_waiting" gauge\n'
        '{ "vllm:num_requests_waiting" , engine="0"} 2\n'
        '{"vllm_num_requests_running"} 5\n'
    )
    page = parse_page(text, WANTED)
    assert "vllm:num_requests_waiting" in page.declared
    assert read(text).waiting == 2 and read(text).running == 5


def test_duplicated_block_is_one_series_but_dp_ranks_sum() -> None:
    s = one("duplicated-block.prom")
    assert (s.running, s.waiting, s.kv_usage) == RUNNING_WAITING_KV
    assert "3 repeated series ignored" in s.message
    text = (METRIC_CASES / "duplicated-block.prom").read_text()
    rank1 = text.replace('engine="0"', 'engine="1"')
    s = read(text + rank1)
    assert s.running == 8 and [r.running for r in s.ranks] == [4, 4]
    # same labels in another order are the same series, and the same value is no conflict
    s = read('vllm:num_requests_running{a="1",b="2"} 4\nvllm:num_requests_running{b="2",a="1"} 4\n')
    assert s.running == 4 and "1 repeated series ignored" in s.message


def test_a_series_repeated_with_another_value_is_ambiguous_not_the_first() -> None:
    """The duplicated block with its second running gauge 300 instead of 4: which one is the
    engine's is unknown. The first used to be read silently, under the same note as an exact
    repeat; now running is n/a and the note names the conflict apart from the repeats."""
    text = (METRIC_CASES / "duplicated-block.prom").read_text()
    line = 'vllm:num_requests_running{engine="0",model_name="dsv41-flash"} 4.0\n'
    assert text.count(line) == 2
    head, _, tail = text.rpartition(line)
    s = read(head + line.replace("4.0", "300") + tail)
    assert isinstance(s.running, NA)
    assert (s.waiting, s.kv_usage) == RUNNING_WAITING_KV[1:]
    assert (
        "1 series repeated with different values, shown n/a (ambiguous): "
        'vllm:num_requests_running{engine="0",model_name="dsv41-flash"}: 4 then 300'
    ) in s.message
    assert "2 repeated series ignored (the first is read)" in s.message
    # the other order of labels is the same series: a conflict too
    s = read(
        'vllm:num_requests_running{a="1",b="2"} 3\nvllm:num_requests_running{b="2",a="1"} 300\n'
    )
    assert isinstance(s.running, NA) and 'a="1",b="2"}: 3 then 300' in s.message


# -- a window base that did not read a counter (issue 19 item 6) --------------------------------


def counter_page(prompt: float | None, generation: float) -> str:
    lines = ['vllm:num_requests_running{engine="0"} 1\n']
    if prompt is not None:
        lines.append(f'vllm:prompt_tokens_total{{engine="0"}} {prompt}\n')
    lines.append(f'vllm:generation_tokens_total{{engine="0"}} {generation}\n')
    return "".join(lines)


@pytest.mark.parametrize("fault", ["NaN", "absent"])
def test_a_scrape_without_a_counter_never_becomes_a_zero_base(fault: str) -> None:
    """995 tok/s of prefill on a server that has counted 28.9 M tokens: one scrape where the
    counter is NaN or missing must not make the rate read lifetime ÷ window 30 s later."""
    d = MetricsDeriver("dsv4", window_s=30)
    lifetime = 28_947 * 30 - 995 * 10
    rates = []
    for t in range(0, 75):
        prompt: float | None = lifetime + 995 * t
        if t == 10:
            prompt = math.nan if fault == "NaN" else None
        s = d.derive(parse_page(counter_page(prompt, 50.0 * t), WANTED), now_s=t, wall_s=t)
        rates.append(s.prefill_tps)
    assert isinstance(rates[10], NA)  # that scrape itself cannot say
    assert all(r == pytest.approx(995) for r in rates[1:10] + rates[11:]), rates
    assert s.decode_tps == pytest.approx(50.0)


def test_a_restart_with_an_unread_counter_does_not_spike() -> None:
    d = MetricsDeriver("dsv4", window_s=30)
    for t in range(0, 5):
        d.derive(parse_page(counter_page(1e6 + 995 * t, 1e5 + 50 * t), WANTED), now_s=t, wall_s=t)
    # the server restarts; the scrape that shows it has no readable prompt counter
    s = d.derive(parse_page(counter_page(math.nan, 50.0), WANTED), now_s=5, wall_s=5)
    assert s.restarted
    rates = []
    for t in range(6, 40):
        page = counter_page(995.0 * (t - 5), 50.0 * (t - 4))
        rates.append(d.derive(parse_page(page, WANTED), now_s=t, wall_s=t).prefill_tps)
    assert isinstance(rates[0], NA) and "unreadable on the earlier scrapes" in rates[0].reason
    assert all(r == pytest.approx(995) for r in rates[1:]), rates


# -- histograms that are not cumulative histograms (issue 19 item 8) ----------------------------


TTFT = "vllm:time_to_first_token_seconds"


def ttft_page(buckets: list[tuple[str, float]], count: float) -> str:
    lines = ['vllm:num_requests_running{engine="0"} 1\n']
    lines += [f'{TTFT}_bucket{{engine="0",le="{le}"}} {v}\n' for le, v in buckets]
    lines += [f'{TTFT}_sum{{engine="0"}} 12.5\n', f'{TTFT}_count{{engine="0"}} {count}\n']
    return "".join(lines)


@pytest.mark.parametrize(
    ("buckets", "why"),
    [
        ([("0.5", 7), ("0.001", 1), ("1.0", 9), ("+Inf", 10)], "out of order"),
        ([("0.001", 8), ("0.5", 3), ("1.0", 9), ("+Inf", 10)], "not cumulative"),
        ([("0.001", 1), ("0.5", 7), ("1.0", 9), ("+Inf", 8)], "not cumulative"),
        ([("0.001", 1), ("0.5", 7), ("1.0", 9)], "no le=+Inf"),
    ],
)
def test_broken_histogram_is_invalid_not_resorted(
    buckets: list[tuple[str, float]], why: str
) -> None:
    s = read(ttft_page(buckets, 10))
    assert s.state is EngineState.OK and s.running == 1  # the rest of the page reads
    for value in (s.ttft_p50, s.ttft_p95, s.ranks[0].ttft_p50):
        assert isinstance(value, NA), value
        assert "histogram invalid" in value.reason and why in value.reason


def test_a_valid_histogram_still_reads() -> None:
    s = read(ttft_page([("0.001", 1), ("0.5", 7), ("1.0", 9), ("+Inf", 10)], 10))
    assert isinstance(s.ttft_p50, Quantile) and 0.001 < s.ttft_p50.value_s <= 0.5
