"""The expected row over the live window's own load (sparktop.sweep.expected.matched): the deriver
keeps the running counts and the finished prompt lengths of the window, and the profile's cells are
combined as the live statistics combine their observations."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sparktop.model import EngineSample, is_num
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.exposition.page import parse_page
from sparktop.sweep.estimator.estimator import estimate
from sparktop.sweep.expected.matched import cached_estimator, window_expected, window_load
from sparktop.sweep.profiles.loader import load_profile
from sparktop.testing.vllm_page import FakeVllm, Load

PROFILE = load_profile("4x-spark-dsv41-flash-1017")


def scrape(d: MetricsDeriver, fake: FakeVllm, now_s: float) -> EngineSample:
    return d.derive(parse_page(fake.page().decode(), WANTED), now_s=now_s, wall_s=now_s)


def test_the_deriver_keeps_the_windows_running_counts_and_finished_prompts() -> None:
    fake = FakeVllm()
    d = MetricsDeriver("dsv41", window_s=30)
    fake.load["0"] = Load(decode_tps=300, requests_per_s=1, prompt_tokens=3800)
    fake.set_gauges(running=8, waiting=0, kv_usage=0.3)
    scrape(d, fake, 0.0)
    for t in range(1, 21):  # 8 running for 10 s, then 4 (and a longer prompt) for 10 s
        if t == 11:
            fake.set_gauges(running=4, waiting=2, kv_usage=0.3)
            fake.load["0"].prompt_tokens = 14955
        fake.advance(1)
        s = scrape(d, fake, float(t))
    held = {(r, w): t for r, w, t in s.load_dist}
    assert held == {(8.0, 0.0): pytest.approx(10.5), (4.0, 2.0): pytest.approx(9.5)}
    # 10 prompts in (2,000, 5,000], 10 in (10,000, 20,000]: the buckets, not just the mean.
    assert [(lo, hi, n) for lo, hi, n in s.prompt_tokens_dist] == [
        (2000.0, 5000.0, 10.0),
        (10000.0, 20000.0, 10.0),
    ]
    load = window_load(s)
    assert not isinstance(load, str)
    assert load.window_s == 20.0 and load.waiting_peak == 2.0
    assert dict(load.running) == {8: pytest.approx(10.5), 4: pytest.approx(9.5)}
    # The shape of the buckets, scaled to the exact mean (Δsum / Δcount).
    assert load.mean_prompt == pytest.approx(s.mean_prompt_tokens)
    assert "running 4–8 (mean 6.1)" in load.describe() and "last 20 s" in load.describe()


def test_a_load_change_moves_the_expected_figure_between_the_two_rows() -> None:
    """Half the window at 8 running, half at 4: per-stream decode is the token-weighted mean
    of the two rows (a mean ITL counts tokens, and 8 streams decode more of them), TTFT p50
    the median of the two; both lie between the rows, where the instant row would not."""
    est = cached_estimator(PROFILE)
    base = EngineSample(
        engine="dsv41",
        time_s=0.0,
        running=4.0,
        waiting=0.0,
        mean_prompt_tokens=3800.0,
        window_s=30.0,
        load_dist=((4.0, 0.0, 15.0), (8.0, 0.0, 15.0)),
        prompt_tokens_dist=((2000.0, 5000.0, 12.0),),
    )
    got = window_expected(est, base)
    assert not isinstance(got, str)
    at4, at8 = estimate(PROFILE, 3800, 4), estimate(PROFILE, 3800, 8)
    d4, d8 = at4.decode_tps.value, at8.decode_tps.value
    assert is_num(d4) and is_num(d8) and is_num(got.decode_tps.value)
    assert got.decode_tps.value == pytest.approx((15 * 4 * d4 + 15 * 8 * d8) / (15 * 4 + 15 * 8))
    t4, t8 = at4.ttft_s.value, at8.ttft_s.value
    assert is_num(t4) and is_num(t8) and is_num(got.ttft_s.value)
    assert min(t4, t8) < got.ttft_s.value < max(t4, t8)
    # The band ends are combined like the value.
    assert is_num(got.decode_tps.low) and got.decode_tps.low <= got.decode_tps.value
    # A window at one load is that row itself.
    steady = dataclasses.replace(base, load_dist=((8.0, 0.0, 30.0),), running=8.0)
    one = window_expected(est, steady)
    assert not isinstance(one, str)
    assert one.ttft_s.value == pytest.approx(t8) and one.decode_tps.value == pytest.approx(d8)


def test_without_load_history_the_scrape_is_the_load_and_says_so() -> None:
    est = cached_estimator(PROFILE)
    sample = EngineSample(engine="e", time_s=0.0, running=2.0, mean_prompt_tokens=501_871.0)
    got = window_expected(est, sample)
    assert not isinstance(got, str)
    assert got.load.window_s is None and "load at this scrape" in got.load.describe()
    # One token past the longest measured prompt is a bounded extrapolation, not "no data".
    assert is_num(got.ttft_s.value) and is_num(got.decode_tps.value)
    idle = dataclasses.replace(sample, running=0.0)
    assert window_expected(est, idle) == "idle: no running requests to compare"


def test_a_running_count_without_data_is_said_against_the_headers_statistic() -> None:
    """The strip's header gives the window's running range and its mean ("running 4–12
    (mean 4.6)"); a count in that range the profile has no column for is said as that count
    of this window, with the same mean and range, not as a bare concurrency."""
    from sparktop.sweep.expected.matched import Load, cached_estimator, expected_for
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

    estimator = cached_estimator(load_profile(DEFAULT_PROFILE))  # columns 1, 2, 4, 8
    load = Load(((4, 27.0), (12, 3.0)), ((4000.0, 1.0),), ((4000.0, 1.0),), 30.0)
    header = load.describe()
    got = expected_for(estimator, load, "")
    reason = got.decode_tps.how
    assert header.startswith("running 4–12 (mean 4.8)")
    assert "running reached 12 in this window (mean 4.8, range 4–12): concurrency 12" in reason


def test_figures_without_data_for_one_cause_name_one_count_and_the_strip_says_it_once() -> None:
    """TTFT's cells (the count beside each first token: 16) and decode's (every count of the
    window: 12 first) each named their own first count without data, so the strip said one
    cause three times (``running reached 16``, then ``12``, ``12``); each names the highest
    count of the window without data, and the strip gives the reason once, at any width."""
    from sparktop.model import Quantile
    from sparktop.sweep.expected.matched import Load, cached_estimator, expected_for
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
    from sparktop.ui.expected import DeficitClock, expected_lines

    estimator = cached_estimator(load_profile(DEFAULT_PROFILE))  # columns 1, 2, 4, 8
    load = Load(((4, 20.0), (12, 5.0), (16, 3.0)), ((4000.0, 1.0),), ((4000.0, 1.0),), 30.0,
                ttft_cells=((4000.0, 1.0, 16),))  # fmt: skip
    got = expected_for(estimator, load, "")
    reasons = {got.ttft_s.how, got.decode_tps.how, got.aggregate_tps.how}
    assert len(reasons) == 1, reasons
    assert "running reached 16 in this window (mean 6.7, range 4–16): concurrency 16" in (
        reasons.pop()
    )
    sample = EngineSample(engine="e", time_s=0.0, running=16.0, ttft_p50=Quantile(2.0),
                          itl_mean_s=0.02, decode_tps=300.0)  # fmt: skip
    for width in (200, 116, 78):
        lines = expected_lines(sample, "p", lambda _: got, 25.0, DeficitClock(), 0.0, width)
        text = " ".join("".join(t for t, _ in line).strip() for line in lines)
        assert text.count("running reached") == 1 and text.count("no extrapolation") == 1
        for label in ("TTFT", "decode/req", "agg"):
            assert f"{label} no data" in text
        assert max(sum(len(t) for t, _ in line) for line in lines) <= width


def test_one_short_request_on_an_idle_engine_is_too_little_load_said_plainly() -> None:
    """An idle engine, then one 325-token request running for 2 s: the strip says how much
    load the window held (one request, 2 s running) instead of a reason that reads like a
    measurement ("running reached 1 in this window …" about a prompt off the table)."""
    from sparktop.ui.expected import DeficitClock, expected_lines

    fake = FakeVllm()
    d = MetricsDeriver("dsv41", window_s=30)
    fake.set_gauges(running=0, waiting=0, kv_usage=0.0)
    s = scrape(d, fake, 0.0)
    for t in range(1, 25):
        running = 1 if t in (21, 22) else 0
        fake.load["0"] = Load(
            decode_tps=70 if running else 0,
            requests_per_s=1 if t == 23 else 0,
            prompt_tokens=325,
        )
        fake.set_gauges(running=running, waiting=0, kv_usage=0.001 * running)
        fake.advance(1)
        s = scrape(d, fake, float(t))
    got = window_expected(cached_estimator(PROFILE), s)
    assert got == (
        "too little load to compare: 1 request finished, requests running 2 s of the last 24 s"
        " (compared from 5 s)"
    )
    lines = expected_lines(s, PROFILE.name, lambda _: got, 25.0, DeficitClock(), 24.0)
    text = "".join(t for line in lines for t, _ in line)
    assert "running reached" not in text and "too little load" in text


def test_a_prompt_off_the_table_is_the_estimators_reason_not_a_running_count() -> None:
    """Two running counts, both with data at other prompts: a 325-token prompt is off the
    table for every count, so the reason is the prompt's, not "running reached 1 …"."""
    from sparktop.sweep.expected.matched import Load as WindowLoad
    from sparktop.sweep.expected.matched import expected_for

    load = WindowLoad(((1, 20.0), (2, 10.0)), ((325.0, 3.0),), ((325.0, 3.0),), 30.0)
    got = expected_for(cached_estimator(PROFILE), load, "")
    assert "running reached" not in got.ttft_s.how
    assert "325 tokens is less than 1/2 of the shortest prompt" in got.ttft_s.how


# A window the simulator held at a steady ~5 running (poll by poll at speed 10): 19 requests
# across five prompt buckets. Read as point masses, one request leaving moved the expected
# TTFT p50 by up to 41 % (8.29 -> 5.87 s) and the word beside it between "interpolated" and
# "extrapolated" (the one sub-1,002-token request's cell).
STEADY_RUN = ((3.0, 0.0, 1.0), (4.0, 0.0, 4.0), (5.0, 0.0, 10.0), (6.0, 0.0, 15.0))
STEADY_PROMPTS = (
    (500, 1000, 1),
    (1000, 2000, 2),
    (2000, 5000, 6),
    (5000, 10000, 3),
    (10000, 20000, 7),
)


def _steady(dist: tuple[tuple[float, float, float], ...], mean: float) -> EngineSample:
    return EngineSample(
        engine="dsv41", time_s=0.0, running=5.0, waiting=0.0, mean_prompt_tokens=mean,
        first_token_prompt_tokens=mean, window_s=30.0, load_dist=STEADY_RUN,
        prompt_tokens_dist=dist,
    )  # fmt: skip


def test_one_request_leaving_a_steady_window_moves_expected_ttft_a_little() -> None:
    """Each cell stands for its bucket's requests, spread between the TTFT at the bucket's
    ends (as the live p50 reads its histogram bucket): removing any one request moves the
    expected p50 by under 12 %, and its basis is that of the cells holding the median."""
    est = cached_estimator(PROFILE)
    whole = window_expected(est, _steady(STEADY_PROMPTS, 7700.0))
    assert not isinstance(whole, str) and is_num(whole.ttft_s.value)
    assert whole.ttft_s.basis.value == "interpolated"
    for i, (low, high, _) in enumerate(STEADY_PROMPTS):
        dist = tuple(
            (lo, hi, c - 1 if j == i else c) for j, (lo, hi, c) in enumerate(STEADY_PROMPTS)
        )
        mean = (7700.0 * 19 - (low * high) ** 0.5) / 18
        got = window_expected(est, _steady(tuple(b for b in dist if b[2] > 0), mean))
        assert not isinstance(got, str) and is_num(got.ttft_s.value)
        step = got.ttft_s.value / whole.ttft_s.value
        assert 1 / 1.12 < step < 1.12, (i, step)
        assert got.ttft_s.basis.value == "interpolated"
        low_end, high_end = got.ttft_s.low, got.ttft_s.high
        assert is_num(low_end) and is_num(high_end) and low_end < got.ttft_s.value < high_end


def test_a_lone_bucket_keeps_its_own_estimate_and_points_keep_their_median() -> None:
    """One cell is its own estimate whatever its span; without buckets (one point per
    running count) the median is the point median it was."""
    est = cached_estimator(PROFILE)
    one = window_expected(est, dataclasses.replace(
        _steady(((2000, 5000, 4),), 3800.0), load_dist=((4.0, 0.0, 30.0),), running=4.0,
    ))  # fmt: skip
    assert not isinstance(one, str)
    assert one.ttft_s.value == pytest.approx(estimate(PROFILE, 3800, 4).ttft_s.value, rel=0.02)


def test_span_median_reads_a_histogram_as_histogram_quantile_does() -> None:
    """Adjacent spans with counts are a histogram: the median agrees with the Prometheus
    method (``sparktop.sources.engines.quantile``) on every bucket layout tried."""
    import random

    from sparktop.model import Quantile
    from sparktop.sources.engines.histread import Hist
    from sparktop.sources.engines.quantile import histogram_quantile
    from sparktop.sweep.expected.mixture import span_median

    rng = random.Random(7)
    for _ in range(200):
        edges = sorted(rng.sample(range(1, 200), 6))
        counts = [rng.randint(0, 9) for _ in range(5)]
        if sum(counts) == 0:
            continue
        spans = [
            (float(a), float(b), float(n))
            for a, b, n in zip(edges, edges[1:], counts, strict=False)
        ]
        cum, total = [0.0], 0.0  # nothing at or below the first edge
        for n in counts:
            total += n
            cum.append(total)
        hist = Hist((*map(float, edges), math.inf), (*cum, total), 0.0, total)
        ref = histogram_quantile(0.5, hist, "empty")
        assert isinstance(ref, Quantile)
        assert span_median(spans) == pytest.approx(ref.value_s, abs=1e-9)


def test_a_profile_measured_on_another_model_is_said_beside_the_row() -> None:
    """The seed profiles name their model in free text; an engine serving one of them by
    its Hugging Face id is the same model, one serving anything else gets a note (in the
    monitor's strip, the alert message and the snapshot line), and the row is still shown."""
    from sparktop.alerts.engine import profile_expected
    from sparktop.sweep.expected.matched import MatchedExpected, model_mismatch
    from sparktop.ui.expected import DeficitClock, expected_lines

    other = load_profile("2x-spark-dsv4-flash-0731")
    assert model_mismatch(PROFILE.model, "deepseek-ai/DeepSeek-V4.1-Flash-1017") == ""
    assert model_mismatch(other.model, "deepseek-ai/DeepSeek-V4-Flash-0731") == ""
    assert model_mismatch(PROFILE.model, "") == "" and model_mismatch("", "Qwen/Qwen3-32B") == ""
    note = model_mismatch(PROFILE.model, "Qwen/Qwen3-32B")
    assert (
        note == "the profile measured DeepSeek V4.1 Flash 1017; this engine serves Qwen/Qwen3-32B"
    )
    assert model_mismatch(other.model, "deepseek-ai/DeepSeek-V4.1-Flash-1017") != ""
    # Another model of the same family is another model (the trial's V4-Flash and R1).
    assert model_mismatch(PROFILE.model, "deepseek-ai/DeepSeek-V4-Flash-0731") != ""
    assert model_mismatch(PROFILE.model, "deepseek-ai/DeepSeek-R1") != ""
    assert model_mismatch("Llama 3.3 70B", "meta-llama/Llama-3.3-70B-Instruct") == ""
    long = "meta-llama/Llama-3.3-70B-Instruct-with-a-really-long-suffix-beyond-sixty"
    assert model_mismatch(PROFILE.model, long).endswith("…")

    fake = FakeVllm()
    d = MetricsDeriver("dsv41", window_s=30)
    fake.load["0"] = Load(decode_tps=300, requests_per_s=1, prompt_tokens=3800)
    fake.set_gauges(running=8, waiting=0, kv_usage=0.3)
    scrape(d, fake, 0.0)
    for t in range(1, 21):
        fake.advance(1)
        s = scrape(d, fake, float(t))
    same = dataclasses.replace(s, model="deepseek-ai/DeepSeek-V4.1-Flash-1017")
    served = dataclasses.replace(s, model="Qwen/Qwen3-32B")
    row = MatchedExpected(PROFILE)
    got_same, got_other = row(same), row(served)
    assert not isinstance(got_same, str) and not isinstance(got_other, str)
    assert got_same.model_note == "" and got_other.model_note == note
    assert got_other.ttft_s == got_same.ttft_s  # still compared: a note, not a refusal

    def strip(sample: EngineSample, width: int) -> str:
        lines = expected_lines(sample, PROFILE.name, row, 25.0, DeficitClock(), 20.0, width)
        return " ".join(" ".join("".join(text for text, _ in line).split()) for line in lines)

    assert note not in strip(same, 160)
    assert f"({note})" in strip(served, 160) and f"({note})" in strip(served, 80)
    expected = profile_expected(PROFILE, row)
    assert expected is not None
    shown = expected(served)
    assert shown is not None and shown.model_note == note
    # Said from the names alone, also while the window has no load to compare.
    idle = dataclasses.replace(served, running=0.0, load_dist=(), time_s=21.0)
    reason = row(idle)
    assert isinstance(reason, str) and reason.endswith(f"({note})")


def test_a_profile_measured_on_another_engine_gives_no_expected_row() -> None:
    """A llama.cpp engine serving the profile's very model (a GGUF of it) is not compared
    with figures a vLLM build measured: the row says why instead, and no deficit can fire
    from it. A profile that names no engine, or this one, still compares."""
    from sparktop.alerts.engine import profile_expected
    from sparktop.sweep.expected.matched import MatchedExpected, engine_mismatch

    assert "vLLM" in PROFILE.engine
    assert engine_mismatch(PROFILE.engine, "vllm") == ""
    assert (
        engine_mismatch("", "llamacpp") == "" and engine_mismatch("a custom build", "sglang") == ""
    )
    assert engine_mismatch("llama.cpp server version b1", "llamacpp") == ""
    note = engine_mismatch(PROFILE.engine, "llamacpp")
    assert note == "the profile measured a vLLM engine; this engine is llama.cpp"
    assert engine_mismatch("SGLang 0.5", "vllm") == (
        "the profile measured a SGLang engine; this engine is vLLM"
    )

    fake = FakeVllm()
    d = MetricsDeriver("dsv41", window_s=30)
    fake.load["0"] = Load(decode_tps=300, requests_per_s=1, prompt_tokens=3800)
    fake.set_gauges(running=8, waiting=0, kv_usage=0.3)
    scrape(d, fake, 0.0)
    for t in range(1, 21):
        fake.advance(1)
        s = scrape(d, fake, float(t))
    gguf = dataclasses.replace(s, kind="llamacpp", model="DeepSeek-V4.1-Flash-1017-Q8_0.gguf")
    row = MatchedExpected(PROFILE)
    assert not isinstance(row(s), str)
    got = row(gguf)
    assert got == f"no expected row: {note}"
    expected = profile_expected(PROFILE, row)
    assert expected is not None and expected(gguf) is None  # nothing for the rules to judge


def test_a_model_name_with_control_characters_reads_the_same_in_header_and_note() -> None:
    """The trial's ``esc`` engine: the header showed ``evil␛]0;PWNED-TITLE␇␛[2J…␍␈␈`` and the
    expected line, given the raw name, lost ␇, ␍ and ␈. Both are the one printable()."""
    from sparktop.sweep.expected.matched import model_mismatch
    from sparktop.ui.engine_views import title_groups
    from sparktop.ui.views import ViewConfig

    raw = "evil\x1b]0;PWNED\x07\x1b[2J\r\x08\x08"
    shown = "evil␛]0;PWNED␇␛[2J␍␈␈"
    note = model_mismatch(PROFILE.model, raw)
    assert note.endswith(f"this engine serves {shown}") and note.isprintable()
    title = "".join(
        t for g in title_groups(EngineSample("e", 0.0, model=raw), 0.0, ViewConfig()) for t, _ in g
    )
    assert shown in title
