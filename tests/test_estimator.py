"""The estimator: exact at table points, the whole table elsewhere, a band, bounded reach."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sparktop.model import NA, is_num
from sparktop.report.budget_text import hms
from sparktop.sweep.estimator.estimator import Basis, estimate, loglog, without
from sparktop.sweep.estimator.validate import column_loglog, leave_one_out, summarise
from sparktop.sweep.profiles.loader import load_profile

TWO = "2x-spark-dsv4-flash-0731"
FOUR = "4x-spark-dsv41-flash-1017"


@pytest.mark.parametrize("name", [TWO, FOUR])
def test_every_table_point_round_trips_exactly_with_a_zero_width_band(name: str) -> None:
    profile = load_profile(name)
    for row in profile.rows:
        est = estimate(profile, row.prompt_tokens, row.concurrency)
        for metric, fig in est.figures():
            assert fig.value == getattr(row, metric)
            assert fig.low == fig.high == fig.value
            assert fig.basis is Basis.EXACT


def test_seed_published_2048_by_6_is_an_exact_row() -> None:
    # DESIGN.md §7 / seed 000: TTFT 6.06 s, prefill 342, decode 34.7, aggregate 143.7 tok/s.
    est = estimate(load_profile(TWO), 2048, 6)
    assert (est.ttft_s.value, est.prefill_tps.value) == (6.06, 342)
    assert (est.decode_tps.value, est.aggregate_tps.value) == (34.7, 143.7)
    assert est.how == "exact row (2,048 tokens × 6)"
    assert est.aggregate_kind == "end-to-end"


def test_acceptance_point_is_hit_with_zero_error() -> None:
    est = estimate(load_profile(TWO), 899_994, 1)
    assert est.ttft_s.value == 1028.85 and est.ttft_s.basis is Basis.EXACT
    assert est.prefill_tps.value == 874.8
    assert "acceptance point" in est.ttft_s.how
    # Decode and aggregate were not published there, and 899,994 is > 2x the table's 131,072.
    for fig in (est.decode_tps, est.aggregate_tps):
        assert isinstance(fig.value, NA) and fig.basis is Basis.NO_DATA
        assert "more than 2× the longest prompt measured" in fig.reason


def test_seed_published_scan_of_125272_tokens() -> None:
    # Seed 000's "real output one": 1 min 16 s, 1657 tok/s prefill, 65.2 decode, 6.1 aggregate.
    est = estimate(load_profile(TWO), 125_272, 1)
    assert hms(est.ttft_s.value) == "1m 16s"  # type: ignore[arg-type]
    assert round(est.prefill_tps.value) == 1657  # type: ignore[arg-type]
    assert round(est.decode_tps.value, 1) == 65.2  # type: ignore[arg-type]
    assert round(est.aggregate_tps.value, 1) == 6.1  # type: ignore[arg-type]
    assert est.ttft_s.how == "interpolated log-log between rows 32,768 and 131,072 (concurrency 1)"
    assert est.ttft_s.low < est.ttft_s.value < est.ttft_s.high  # type: ignore[operator]


@pytest.mark.parametrize("name", [TWO, FOUR])
@pytest.mark.parametrize("prompt", [90, 130, 300, 5000, 100_000, 400_000, 1_000_000])
@pytest.mark.parametrize("concurrency", [1, 2, 3, 5, 8])
def test_prefill_is_prompt_over_ttft_everywhere(name: str, prompt: int, concurrency: int) -> None:
    profile = load_profile(name)
    est = estimate(profile, prompt, concurrency)
    ttft, prefill = est.ttft_s.value, est.prefill_tps.value
    if is_num(ttft) and is_num(prefill):
        ratios = [r.prefill_tps * r.ttft_s / r.prompt_tokens for r in profile.rows]
        ratio = prefill * ttft / prompt
        assert min(ratios) * 0.999 <= ratio <= max(ratios) * 1.001
    else:
        assert isinstance(prefill, NA)  # no prefill without a TTFT


def test_between_the_table_and_the_acceptance_point_only_ttft_and_prefill() -> None:
    est = estimate(load_profile(TWO), 500_000, 1)
    assert est.ttft_s.basis is Basis.FITTED
    assert 78.75 < est.ttft_s.value < 1028.85  # type: ignore[operator]
    assert 874.8 < est.prefill_tps.value < 1665  # type: ignore[operator]
    assert isinstance(est.decode_tps.value, NA)  # > 2x the longest decode measured


def test_extrapolation_is_bounded_tagged_and_its_band_widens() -> None:
    four = load_profile(FOUR)
    widths = []
    for prompt in (550_000, 700_000, 1_000_000):
        fig = estimate(four, prompt, 8).ttft_s
        assert fig.basis is Basis.EXTRAPOLATED and "past the longest prompt" in fig.how
        widths.append(fig.half_width_pct)
    assert widths == sorted(widths) and widths[0] < widths[-1]  # type: ignore[type-var]
    beyond = estimate(four, 1_010_000, 8)  # past 2 x 501,905
    assert all(isinstance(f.value, NA) for _, f in beyond.figures())
    assert "more than 2× the longest prompt" in beyond.ttft_s.reason
    below = estimate(four, 600, 4)
    assert below.ttft_s.basis is Basis.EXTRAPOLATED and "below the shortest" in below.ttft_s.how
    assert below.ttft_s.value < 2.05  # type: ignore[operator]  # shorter than the 1,002 row
    assert isinstance(estimate(four, 400, 4).ttft_s.value, NA)  # below half of 1,002


def test_past_max_model_len_is_no_data() -> None:
    est = estimate(load_profile(TWO), 1_048_577, 1)
    assert "past max_model_len (1,048,576)" in est.ttft_s.reason


def test_dense_rows_are_plain_log_log() -> None:
    profile = load_profile(FOUR)
    lo, hi = profile.column(1)[5], profile.column(1)[6]
    mid = (lo.prompt_tokens * hi.prompt_tokens) ** 0.5
    est = estimate(profile, mid, 1)
    assert est.ttft_s.value == pytest.approx((lo.ttft_s * hi.ttft_s) ** 0.5)
    assert est.ttft_s.basis is Basis.INTERPOLATED
    assert loglog(4, 2, 10, 8, 40) == pytest.approx(20)


def test_sparse_rows_use_the_fitted_model_and_stay_between_the_neighbours() -> None:
    profile = load_profile(TWO)  # 256 -> 2,048 is an 8x gap
    est = estimate(profile, 724, 1)
    assert est.ttft_s.basis is Basis.FITTED
    assert 0.63 <= est.ttft_s.value <= 0.81 * 1.2  # type: ignore[operator]


def test_concurrency_between_columns() -> None:
    profile = load_profile(TWO)
    est = estimate(profile, 2048, 5)
    assert 1.38 < est.ttft_s.value < 6.06  # type: ignore[operator]
    assert est.ttft_s.how == "interpolated log-log between concurrency 4 and 6 at 2,048 tokens"
    # 131,072 exists at concurrency 2 but not at 4: concurrency 3 there is fitted, not refused.
    gap = estimate(profile, 131_072, 3)
    assert gap.ttft_s.basis is Basis.FITTED
    assert 78.75 < gap.ttft_s.value < 1.5 * 111.17  # type: ignore[operator]


@pytest.mark.parametrize(
    ("prompt", "concurrency", "reason"),
    [
        (2048, 8, "outside the measured columns (1, 2, 4, 6)"),
        (2048, 0, "concurrency 0 is not at least 1"),
        (-5, 1, "prompt length -5 is not at least 1 token"),
        (float("nan"), 1, "is not at least 1 token"),
    ],
)
def test_odd_inputs_give_no_data_not_numbers(prompt: float, concurrency: int, reason: str) -> None:
    est = estimate(load_profile(TWO), prompt, concurrency)
    for _, fig in est.figures():
        assert isinstance(fig.value, NA) and reason in fig.value.reason
        assert isinstance(fig.low, NA) and isinstance(fig.high, NA)


def test_a_profile_with_one_column_interpolates_nothing_across_concurrency() -> None:
    profile = load_profile(TWO)
    single = dataclasses.replace(profile, rows=profile.column(1))
    assert isinstance(estimate(single, 2048, 2).ttft_s.value, NA)


def test_every_band_holds_its_value_and_is_finite() -> None:
    profile = load_profile(FOUR)
    for prompt in (700, 2000, 20_000, 300_000, 900_000):
        for concurrency in (1, 3, 8):
            for _, fig in estimate(profile, prompt, concurrency).figures():
                assert is_num(fig.value) and fig.low < fig.value < fig.high  # type: ignore[operator]
                assert math.isfinite(fig.high)  # type: ignore[arg-type]


def test_without_removes_one_cell() -> None:
    profile = load_profile(TWO)
    reduced = without(profile, 2048, 6)
    assert len(reduced.rows) == len(profile.rows) - 1
    assert estimate(reduced, 2048, 6).ttft_s.basis is Basis.FITTED


def test_leave_one_out_every_cell_beats_column_log_log() -> None:
    # Measured (benchmarks/leave_one_out.py, docs/performance.md): 4-Spark TTFT median 3.6 %,
    # max 10 % with no refusals, against 5.6 % / 147 % and 4 refusals for column-wise
    # log-log. Loose bounds so a table edit does not flake.
    four = load_profile(FOUR)
    held = leave_one_out(four)
    ttft = summarise(held, "ttft_s")
    assert len(held) == 36 and ttft.refused == 0
    assert ttft.median < 5 and ttft.max < 25
    assert ttft.coverage is not None and ttft.coverage >= 80
    plain = column_loglog(four, 1002, 8)
    assert plain["ttft_s"] == 3.42


def test_a_profile_too_small_to_hold_a_cell_out_has_figures_without_a_band() -> None:
    four = load_profile(FOUR)
    tiny = dataclasses.replace(four, rows=four.rows[:2], acceptance=())
    fig = estimate(tiny, 2000, 1).ttft_s
    assert fig.basis is Basis.INTERPOLATED and is_num(fig.value)
    assert isinstance(fig.low, NA) and "too few cells" in fig.low.reason
    assert not fig.contains(float(fig.value))  # type: ignore[arg-type]
