"""The estimator's plain-Python fit routines agree with SciPy's (the reference).

``sparktop.sweep.estimator.fitmath`` replaced ``scipy.optimize.nnls`` and ``minimize_scalar`` on the
monitor's path; SciPy stays a test dependency to hold it to them: on the exact problems the
built-in profiles pose, on generated problems, and through the whole estimator.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.optimize import nnls as scipy_nnls

from sparktop.sweep.estimator import estimator, surface
from sparktop.sweep.estimator.fitmath import lstsq, minimize_bounded, nnls
from sparktop.sweep.profiles.builtin import builtin_profile_names
from sparktop.sweep.profiles.loader import load_profile


def _residual(a: list[list[float]], x: list[float], b: list[float]) -> float:
    fitted = [sum(r * v for r, v in zip(row, x, strict=True)) for row in a]
    return math.sqrt(sum((f - y) ** 2 for f, y in zip(fitted, b, strict=True)))


def _profile_problems() -> list[tuple[str, list[list[float]], list[float]]]:
    """The (scaled) NNLS problems the built-in profiles' fits solve, captured from the fit."""
    problems: list[tuple[str, list[list[float]], list[float]]] = []
    real = surface.nnls

    def capture(a: list[list[float]], b: list[float]) -> list[float]:
        problems.append((name, [list(r) for r in a], list(b)))
        return real(a, b)

    for name in builtin_profile_names():
        surface.nnls = capture
        try:
            estimator.fitted.cache_clear()
            profile = load_profile(name)
            estimator.fitted(profile)
            # A built-in's leave-one-out fit ships precomputed: pose its refits here.
            estimator.choose_designs(profile)
        finally:
            surface.nnls = real
            estimator.fitted.cache_clear()
    return problems


def test_nnls_matches_scipy_on_every_builtin_fit() -> None:
    problems = _profile_problems()
    assert len(problems) > 20  # leave-one-out refits as well as the main fit
    for name, a, b in problems:
        ours = nnls(a, b)
        ref, _ = scipy_nnls(np.array(a), np.array(b))
        assert all(v >= 0 for v in ours), name
        # Same optimum: the residuals agree, and so do the coefficients.
        best = _residual(a, list(ref), b)
        assert _residual(a, ours, b) == pytest.approx(best, rel=1e-9, abs=1e-12)
        assert ours == pytest.approx(list(ref), rel=1e-6, abs=1e-9), name


# The fit's columns are scaled to a largest magnitude of 1 before the solve, so entries far
# below the others (1e-197 beside 1, where SciPy returns coefficients of 1e196) are not its
# problems: generate magnitudes from 1e-3 to 100, and zeros.
_entry = st.one_of(st.just(0.0), st.floats(1e-3, 100), st.floats(-100, -1e-3))
_row = st.lists(_entry, min_size=3, max_size=3)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_row, min_size=3, max_size=12),
    st.lists(_entry, min_size=12, max_size=12),
)
def test_nnls_residual_matches_scipy_on_generated_problems(
    a: list[list[float]], b_all: list[float]
) -> None:
    b = b_all[: len(a)]
    ours = nnls(a, b)
    _, ref_norm = scipy_nnls(np.array(a), np.array(b))
    assert all(v >= 0 for v in ours)
    # Degenerate problems can have many optima: compare the objective, not the point.
    assert _residual(a, ours, b) <= ref_norm + 1e-7 * (1 + ref_norm)


def test_lstsq_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    a = rng.normal(size=(9, 4))
    b = rng.normal(size=9)
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    assert lstsq(a.tolist(), b.tolist()) == pytest.approx(list(ref), rel=1e-9)


def test_shape_mismatch_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        nnls([[1.0, 2.0]], [1.0, 2.0])
    with pytest.raises(ValueError):
        minimize_bounded(lambda x: x, 2.0, 1.0)


@pytest.mark.parametrize(
    ("f", "lo", "hi"),
    [
        (lambda x: (x - 2.3) ** 2, 0.0, 10.0),
        (lambda x: math.cos(x), 0.0, 6.0),
        (lambda x: x * x * x - 3 * x, -0.5, 4.0),
        (lambda x: abs(x - 7.25), math.log(8), math.log(1 << 20)),
        (lambda x: x, 1.0, 5.0),  # minimum at the lower end
        (lambda x: -x, 1.0, 5.0),  # at the upper end
    ],
)
def test_minimize_bounded_matches_scipy(f, lo: float, hi: float) -> None:  # type: ignore[no-untyped-def]
    ref = minimize_scalar(f, bounds=(lo, hi), method="bounded").x
    assert minimize_bounded(f, lo, hi) == pytest.approx(ref, abs=2e-5)


def test_estimates_match_a_scipy_fit_everywhere() -> None:
    """The whole estimator, fitted with SciPy's routines and with ours, on a grid of prompts
    and concurrencies in and past every built-in table."""

    def ref_nnls(a: list[list[float]], b: list[float]) -> list[float]:
        return list(scipy_nnls(np.array(a), np.array(b))[0])

    def ref_min(f, lo: float, hi: float) -> float:  # type: ignore[no-untyped-def]
        return float(minimize_scalar(f, bounds=(lo, hi), method="bounded").x)

    prompts = (300, 1024, 3000, 9000, 40_000, 130_000, 500_000)
    grid = [(p, c) for p in prompts for c in (1, 2, 3, 5, 8)]
    for name in builtin_profile_names():
        profile = load_profile(name)
        estimator.fitted.cache_clear()
        ours = [estimator.estimate(profile, p, c) for p, c in grid]
        surface.nnls, surface.minimize_bounded = ref_nnls, ref_min  # type: ignore[assignment]
        try:
            estimator.fitted.cache_clear()
            ref = [estimator.estimate(profile, p, c) for p, c in grid]
        finally:
            surface.nnls, surface.minimize_bounded = nnls, minimize_bounded
            estimator.fitted.cache_clear()
        for a, b in zip(ours, ref, strict=True):
            for (metric, x), (_, y) in zip(a.figures(), b.figures(), strict=True):
                for u, v in ((x.value, y.value), (x.low, y.low), (x.high, y.high)):
                    if isinstance(u, float) and isinstance(v, float):
                        where = (name, a.prompt_tokens, a.concurrency, metric)
                        assert u == pytest.approx(v, rel=1e-4), where
                    else:
                        assert type(u) is type(v), (name, metric)
