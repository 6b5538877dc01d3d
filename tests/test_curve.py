"""The curve of a profile (sparktop.sweep.expected.curve) and the live window's point on it."""

from __future__ import annotations

import math

import pytest

from sparktop.alerts.curve_point import operating_points
from sparktop.model import Quantile
from sparktop.sweep.estimator.estimator import Basis, estimate
from sparktop.sweep.estimator.surface import EXTRAPOLATION_LIMIT
from sparktop.sweep.expected.curve import CURVE_METRICS, profile_curve
from sparktop.sweep.expected.matched import MatchedExpected
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from tests.ui.fakes import engine


@pytest.fixture(scope="module")
def profile():  # type: ignore[no-untyped-def]
    return load_profile(DEFAULT_PROFILE)


@pytest.mark.parametrize("metric", list(CURVE_METRICS))
def test_a_line_per_concurrency_through_every_measured_cell(profile, metric: str) -> None:  # type: ignore[no-untyped-def]
    curve = profile_curve(profile, metric)
    assert [ln.concurrency for ln in curve.lines] == list(profile.concurrencies)
    for line in curve.lines:
        rows = profile.column(line.concurrency)
        assert [p for p, _ in line.cells] == [float(r.prompt_tokens) for r in rows]
        by_prompt = {p.prompt_tokens: p for p in line.points}
        for row in rows:
            point = by_prompt[float(row.prompt_tokens)]  # the cells are points of the line
            assert point.basis is Basis.EXACT
            assert point.value == pytest.approx(getattr(row, metric))
        prompts = [p.prompt_tokens for p in line.points]
        assert prompts == sorted(prompts)
        for p in line.points:
            if p.low is not None and p.high is not None:
                assert p.low <= p.value <= p.high


def test_the_span_holds_a_live_prompt_within_the_estimators_reach(profile) -> None:  # type: ignore[no-untyped-def]
    rows = [r.prompt_tokens for r in profile.rows]
    plain = profile_curve(profile)
    assert plain.prompt_range == (min(rows), max(rows))
    short = profile_curve(profile, include=[min(rows) / 1.5])
    assert short.prompt_range[0] == pytest.approx(min(rows) / 1.5)
    far = profile_curve(profile, include=[max(rows) * 100])
    assert far.prompt_range[1] == pytest.approx(max(rows) * EXTRAPOLATION_LIMIT)
    # past the table the figures are extrapolated, tagged so, with a band
    last = far.lines[0].points[-1]
    assert last.basis is Basis.EXTRAPOLATED and last.low is not None


def test_unknown_metric_is_refused(profile) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="unknown curve metric"):
        profile_curve(profile, "power_w")


def test_operating_point_is_the_strips_comparison(profile) -> None:  # type: ignore[no-untyped-def]
    sample = engine(running=4.0, mean_prompt_tokens=8000.0, ttft_p50=Quantile(9.5))
    got = MatchedExpected(profile)(sample)
    assert not isinstance(got, str)
    points = operating_points(got, sample)
    assert set(points) == {"ttft_s", "decode_tps", "aggregate_tps"}
    ttft = points["ttft_s"]
    assert ttft.prompt_tokens == pytest.approx(8000.0)
    assert ttft.concurrency == pytest.approx(4.0)
    assert ttft.live == pytest.approx(9.5)
    expected = estimate(profile, 8000.0, 4).ttft_s.value
    assert isinstance(ttft.expected.value, float)
    assert math.isclose(ttft.expected.value, float(expected), rel_tol=0.03)  # the grid's 1 %
    agg = points["aggregate_tps"]
    assert agg.live == pytest.approx(sample.decode_tps)
    # the 4-Spark profile's aggregate is decode-only: the live e2e rate is drawn, not compared
    assert not agg.compared and "decode-only" in agg.note
