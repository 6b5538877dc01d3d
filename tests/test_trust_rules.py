"""Issue 28, unit level: a histogram figure compared through its bucket, each expected figure
keyed on the requests its live figure observed, one verdict per engine, the strip's words,
the model's identity from ``/v1/models`` ``root``, and ``engine.stalled``."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sparktop.alerts.comparisons import Comparison
from sparktop.alerts.context import Expected, RuleContext
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.model import Alert, Severity
from sparktop.alerts.rules import Finding, evaluate
from sparktop.alerts.thresholds import Thresholds
from sparktop.exporter.judgements import Judgements, SourceStats
from sparktop.model import NA, EngineSample, EngineState, Quantile
from sparktop.sources.engines.histread import Hist
from sparktop.sources.engines.quantile import histogram_quantile
from sparktop.sources.engines.window import Snap, first_tokens
from sparktop.sweep.estimator.estimator import Basis, Estimated
from sparktop.sweep.expected.load import Load, binned
from sparktop.sweep.expected.matched import (
    cached_estimator,
    expected_for,
    model_mismatch,
    window_load,
)
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from sparktop.ui.engine_views import engine_state, title_groups
from sparktop.ui.views import ViewConfig
from tests.alert_samples import cluster, engine, node

TTFT_EDGES = (10.0, 20.0, 40.0, 80.0, math.inf)


def run(state: Any, **context: object) -> dict[str, Finding]:
    tracker = CounterTracker(60.0)
    tracker.observe(state)
    ctx = RuleContext(state=state, thresholds=Thresholds(), counters=tracker, **context)  # type: ignore[arg-type]
    return {f.key: f for f in evaluate(ctx)}


# -- 1. a quantile read from buckets is its bucket ---------------------------------------------


def test_a_p50_from_buckets_keeps_the_bucket_it_fell_in() -> None:
    # 10 observations in (20, 40]: the p50 is interpolated to 30 s, and known only to (20, 40].
    hist = Hist(TTFT_EDGES, (0.0, 0.0, 10.0, 10.0, 10.0), 300.0, 10.0)
    q = histogram_quantile(0.5, hist, "none")
    assert isinstance(q, Quantile)
    assert q.value_s == pytest.approx(30.0) and q.interval == (20.0, 40.0)
    over = histogram_quantile(0.5, Hist(TTFT_EDGES, (0.0,) * 4 + (5.0,), 500.0, 5.0), "none")
    assert isinstance(over, Quantile) and over.interval == (80.0, math.inf)
    assert Quantile(30.0) == q  # the bucket is not part of the value's identity


def _ttft(live: float, low: float | None, high: float | None) -> Comparison:
    est = Estimated(21.69, "interpolated", Basis.INTERPOLATED, 20.8, 22.6)
    return Comparison("TTFT", "ttft_s", "s", est, live, "p50", "higher", live_low=low,
                      live_high=high)  # fmt: skip


def test_a_coarse_bucket_that_holds_the_band_is_no_deviation() -> None:
    """The issue's case: steady 3 × 30K, live p50 interpolated to 30.00 s inside 20–40 s
    against 21.69 s (band up to 22.6 s) read "+38 %" from the interpolation alone."""
    comp = _ttft(30.0, 20.0, 40.0)
    assert comp.in_band() and not comp.deficit(25.0)
    assert comp.deviation() == 0.0
    assert comp.coarse and comp.live_text() == "20–40 s"
    # The whole bucket beyond the band is evidence: compared from its nearest end.
    beyond = _ttft(60.0, 40.0, 80.0)
    assert not beyond.in_band() and beyond.deficit(25.0)
    assert beyond.deviation() == pytest.approx((40.0 - 21.69) / 21.69 * 100)
    assert beyond.live_text() == "40–80 s"
    # An exact figure (no bucket) reads as before.
    assert _ttft(30.0, None, None).deficit(25.0)


def test_the_deficit_rule_reads_the_bucket_and_says_it() -> None:
    def row(_: EngineSample) -> Expected:
        return Expected(30_000.0, 3.0, ttft_s=21.69, ttft_low_s=20.8, ttft_high_s=22.6)

    inside = engine(ttft_p50=Quantile(30.0, "", 20.0, 40.0), running=3.0)
    assert "expected.ttft:dsv41" not in run(cluster(inside), expected=row)
    beyond = engine(ttft_p50=Quantile(60.0, "", 40.0, 80.0), running=3.0)
    found = run(cluster(beyond), expected=row)["expected.ttft:dsv41"]
    assert "TTFT 84 % above expected (p50 40–80 s vs profile TTFT 21.69 s" in found.message
    assert "ttft_s" not in found.message


def test_the_exporters_ratio_compares_the_bucket_as_the_strip_does() -> None:
    """``live_expected_ratio`` read the point interpolated in the bucket (30 / 21.69 = 1.38)
    while the strip and the alert said "in band, no deviation"."""

    def row(_: EngineSample) -> Expected:
        return Expected(30_000.0, 3.0, ttft_s=21.69, ttft_low_s=20.8, ttft_high_s=22.6)

    def ratio(sample: EngineSample) -> float:
        state = cluster(sample)
        collector = Judgements(state, lambda: AlertEngine(expected=row), SourceStats())
        family = next(m for m in collector.collect()
                      if m.name == "sparktop_engine_live_expected_ratio")  # fmt: skip
        (value,) = [s.value for s in family.samples if s.labels["figure"] == "ttft_seconds"]
        return float(value)

    assert ratio(engine(ttft_p50=Quantile(30.0, "", 20.0, 40.0), running=3.0)) == 1.0
    beyond = ratio(engine(ttft_p50=Quantile(60.0, "", 40.0, 80.0), running=3.0))
    assert beyond == pytest.approx(40.0 / 21.69)  # the bucket's nearest end, as the alert says


# -- 2. keyed on the requests the live figure observed -----------------------------------------


def _snap(t: float, prompt: float, first: float, running: float) -> Snap:
    snap = Snap(t)
    snap.counters[("0", "prompt_tokens")] = prompt
    snap.hists[("0", "ttft")] = Hist((math.inf,), (first,), 0.0, first)
    snap.running = running
    return snap


def test_first_tokens_are_grouped_per_scrape_with_the_peak_running_count() -> None:
    history = [_snap(0, 0, 0, 8), _snap(1, 8 * 4000, 8, 8), _snap(2, 32_000, 8, 2)]
    groups = first_tokens(history, _snap(3, 32_000 + 2 * 200_000, 10, 2))
    # 8 × 4K, then nothing, then 2 × 200K — each at the most running seen up to it.
    assert groups == ((4000.0, 8.0, 8.0), (200_000.0, 2.0, 8.0))


def test_decode_after_a_change_to_200k_prompts_is_keyed_on_the_200k_requests() -> None:
    """The finished requests were 4K; the two running ones got their first token in the
    window with 200K prompts. Decode's population holds both; TTFT's only the 200K."""
    sample = engine(
        running=2.0,
        window_s=30.0,
        load_dist=((2.0, 0.0, 30.0),),
        mean_prompt_tokens=4000.0,
        prompt_tokens_dist=((2000.0, 5000.0, 6.0),),
        first_tokens=((200_000.0, 2.0, 2.0),),
    )
    load = window_load(sample)
    assert isinstance(load, Load)
    assert load.ttft_cells == ((200_000.0, 2.0, 2),)
    assert max(p for p, _ in load.prompts) == 200_000.0
    assert "mix of" not in load.describe() and "running 2 ×" in load.describe()
    # Nothing finished yet: the first tokens alone are a population (it waited before).
    first_only = engine(
        running=2.0,
        window_s=30.0,
        load_dist=((2.0, 0.0, 30.0),),
        mean_prompt_tokens=NA("none finished"),
        first_tokens=((200_000.0, 2.0, 2.0),),
    )
    only = window_load(first_only)
    assert isinstance(only, Load) and only.prompts == ((200_000.0, 2.0),)


def test_the_strips_headline_and_its_reason_agree_on_the_running_range() -> None:
    """Issue 27: ``@ 4 (3–4) running … no data: concurrency 3 is outside the measured
    columns (1, 2)``: the reason named one count of a range the headline gave as a mean."""
    estimator = cached_estimator(load_profile(DEFAULT_PROFILE))  # columns 1, 2, 4, 8
    load = Load(((9, 10.0), (12, 20.0)), ((4000.0, 1.0),), ((4000.0, 1.0),), 30.0)
    got = expected_for(estimator, load, "")
    assert load.describe().startswith("running 9–12 (mean 11)")
    reason = got.decode_tps.how
    assert "running 9–12 in this window (mean 11) is outside the measured columns" in reason
    assert "concurrency 9 " not in reason and "concurrency 12 " not in reason


# -- 3. one verdict per engine -----------------------------------------------------------------


def _alert(rule: str, severity: Severity, engine_name: str = "dsv41") -> Alert:
    return Alert(f"{rule}#1", rule, engine_name, severity, 0.0, 0.0, "m", engine=engine_name)


def test_the_engine_header_is_its_worst_active_alert() -> None:
    sample = engine(t=100.0)
    config = ViewConfig()
    assert engine_state(sample, 100.0, config) == ("ok", "ok")
    alerts = (
        _alert("expected.decode", Severity.WARNING),
        _alert("engine.stalled", Severity.CRITICAL),
        _alert("kv.usage", Severity.CRITICAL, "other"),
    )
    assert engine_state(sample, 100.0, config, alerts) == ("CRIT engine.stalled +1", "crit")
    assert engine_state(sample, 100.0, config, alerts[:1]) == ("WARN expected.decode", "warn")


def test_a_down_rank_of_the_tp_group_is_the_engines_verdict() -> None:
    """A node alert on a rank of the engine's TP group (the group steps at its slowest rank)
    is the engine's state, the rank named and drawn in its severity; a node outside the group
    leaves the engine ok. (A trial saw `dsv41  ok` beside `spark-4 unreachable`.)"""
    sample = engine(t=100.0)
    config = ViewConfig(engine_nodes={"dsv41": ("spark-1", "spark-4")})
    down = Alert("node.down:spark-4#1", "node.down", "spark-4", Severity.CRITICAL, 0.0, 0.0,
                 "unreachable", node="spark-4")  # fmt: skip
    other = Alert("node.down:spark-9#1", "node.down", "spark-9", Severity.CRITICAL, 0.0, 0.0,
                  "unreachable", node="spark-9")  # fmt: skip
    assert engine_state(sample, 100.0, config, (other,)) == ("ok", "ok")
    assert engine_state(sample, 100.0, config, (down, other)) == (
        "CRIT node.down @spark-4",
        "crit",
    )
    both = (down, _alert("expected.decode", Severity.WARNING))
    assert engine_state(sample, 100.0, config, both) == ("CRIT node.down @spark-4 +1", "crit")
    groups = title_groups(sample, 100.0, config, (down,))
    assert ("spark-4", "crit") in [piece for group in groups for piece in group]
    assert ("spark-1", "") in [piece for group in groups for piece in group]


# -- 5. the model's identity -------------------------------------------------------------------


def test_root_names_the_checkpoint_behind_a_served_alias() -> None:
    profile = "DeepSeek V4.1 Flash 1017 (checkpoint deepseek-ai/DeepSeek-V4.1-Flash-1017)"
    assert model_mismatch(profile, "dsv41") != ""
    assert model_mismatch(profile, "dsv41", "/models/deepseek-ai/DeepSeek-V4.1-Flash-1017") == ""
    note = model_mismatch(profile, "dsv41", "/models/Qwen/Qwen3-32B")
    assert "serves dsv41 (checkpoint /models/Qwen/Qwen3-32B)" in note


# -- 6. engine.stalled -------------------------------------------------------------------------


GROUP = {"dsv41": ("spark-1", "spark-2")}


def _stalled(**overrides: Any) -> dict[str, Finding]:
    values: dict[str, Any] = {"running": 6.0, "no_tokens_s": 34.0, "kv_still_s": 34.0}
    values.update(overrides)
    state = cluster(
        node("spark-1", 100.0, utilization_pct=96.0, power_w=18.0),
        node("spark-2", 100.0, utilization_pct=95.0, power_w=21.0),
        engine(t=100.0, **values),
    )
    return run(state, tp_groups=GROUP)


def test_running_requests_without_a_token_are_a_critical_stall_with_the_evidence() -> None:
    stall = _stalled()["engine.stalled:dsv41"]
    assert stall.severity is Severity.CRITICAL
    assert stall.message.startswith("stalled: 6 running and no token for 34 s")
    assert "spark-1 96 % 18 W, spark-2 95 % 21 W" in stall.message
    assert stall.values["running"] == 6.0 and stall.values["no_tokens_s"] == 34.0
    # Frozen gauges on top (STALE): the stall says it, not a second alert.
    stale = _stalled(state=EngineState.STALE, message="gauges frozen")
    assert "engine.stalled:dsv41" in stale and "engine.stale:dsv41" not in stale


@pytest.mark.parametrize(
    ("case", "overrides"),
    [
        ("idle", {"running": 0.0}),
        ("a long prefill filling the KV", {"kv_still_s": 1.0}),
        ("not long enough", {"no_tokens_s": 12.0, "kv_still_s": 12.0}),
        ("no KV reading", {"kv_still_s": None}),
        ("not answering", {"state": EngineState.UNREACHABLE}),
    ],
)
def test_no_stall_when(case: str, overrides: dict[str, Any]) -> None:
    assert "engine.stalled:dsv41" not in _stalled(**overrides), case


def test_first_token_groups_of_one_size_and_count_are_one_cell() -> None:
    """A second's groups of a steady load are one TTFT cell per (prompt bin, running count):
    the row costs what it did before the groups, whatever the scrape rate."""
    groups = (*((3800.0 + i, 1.0, 6.0) for i in range(30)), (200_000.0, 2.0, 2.0))
    cells = binned(groups)
    assert cells == (
        (pytest.approx(3814.5), 30.0, 6),  # the bin at its requests' mean prompt
        (200_000.0, 2.0, 2),
    )


def test_the_deriver_counts_the_seconds_without_a_token_and_with_the_kv_still() -> None:
    """A loaded fake vLLM, then its counters freeze (running stays 4): the seconds without a
    token grow scrape by scrape; while the KV usage still moves (a prefill filling it), the
    KV clock restarts."""
    from sparktop.sources.engines.metrics import MetricsDeriver
    from sparktop.sources.engines.reading import WANTED
    from sparktop.sources.exposition.page import parse_page
    from sparktop.testing.vllm_page import FakeVllm
    from sparktop.testing.vllm_page import Load as PageLoad

    fake = FakeVllm()
    deriver = MetricsDeriver("dsv41", window_s=30)
    fake.load["0"] = PageLoad(decode_tps=300, requests_per_s=1, prompt_tokens=3800)
    fake.set_gauges(running=4, waiting=0, kv_usage=0.3)

    def scrape(t: float) -> EngineSample:
        page = parse_page(fake.page().decode(), WANTED)
        return deriver.derive(page, now_s=t, wall_s=t)

    scrape(0.0)
    for t in range(1, 6):
        fake.advance(1)
        moving = scrape(float(t))
    assert moving.no_tokens_s == 0.0
    fake.load["0"] = PageLoad()  # nothing generated from here on
    for t in range(6, 30):
        fake.set_gauges(running=4, waiting=0, kv_usage=0.3 + (0.01 * t if t < 12 else 0.12))
        fake.advance(1)
        frozen = scrape(float(t))
    assert frozen.no_tokens_s == pytest.approx(24.0, abs=1.0)
    assert frozen.kv_still_s == pytest.approx(17.0, abs=1.0)  # the KV last moved at 12 s


def test_one_data_parallel_rank_stalled_while_the_other_generates_is_a_stall() -> None:
    """DP2: rank 1 holds 3 running requests and makes no token, its KV still; rank 0 goes on
    generating, so the server's totals move and its own clocks stay at zero. The rank's
    clocks say it; an idle rank (running 0) never does."""
    from sparktop.sources.engines.metrics import MetricsDeriver
    from sparktop.sources.engines.reading import WANTED
    from sparktop.sources.exposition.page import parse_page
    from sparktop.testing.vllm_page import FakeVllm
    from sparktop.testing.vllm_page import Load as PageLoad

    fake = FakeVllm(engines=2)
    deriver = MetricsDeriver("dsv41", window_s=30)
    fake.load["0"] = PageLoad(decode_tps=300, requests_per_s=1, prompt_tokens=3800)
    fake.load["1"] = PageLoad(decode_tps=300, requests_per_s=1, prompt_tokens=3800)
    fake.set_gauges("0", running=3, waiting=0, kv_usage=0.3)
    fake.set_gauges("1", running=3, waiting=0, kv_usage=0.3)

    def scrape(t: float) -> EngineSample:
        page = parse_page(fake.page().decode(), WANTED)
        return deriver.derive(page, now_s=t, wall_s=t)

    for t in range(0, 5):
        fake.advance(1)
        moving = scrape(float(t))
    assert "engine.stalled:dsv41" not in run(cluster(moving))
    fake.load["1"] = PageLoad()  # rank 1 freezes
    for t in range(5, 35):
        fake.advance(1)
        frozen = scrape(float(t))
    assert frozen.no_tokens_s == 0.0  # the totals move: the server's own clocks see nothing
    rank = {r.rank: r for r in frozen.ranks}
    assert rank["1"].no_tokens_s == pytest.approx(30.0, abs=1.0) and rank["0"].no_tokens_s == 0
    stall = run(cluster(frozen))["engine.stalled:dsv41"]
    assert stall.severity is Severity.CRITICAL
    assert stall.message.startswith("stalled: rank 1 of 2: 3 running and no token for 30 s")
    assert "the other ranks generating" in stall.message
    # The frozen rank idle (nothing running on it): no stall.
    fake.set_gauges("1", running=0, waiting=0, kv_usage=0.3)
    fake.advance(1)
    assert "engine.stalled:dsv41" not in run(cluster(scrape(35.0)))
