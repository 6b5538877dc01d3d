"""The curve of a profile: one figure against prompt length, a line per measured concurrency.

The seeds' argument is a curve (TTFT and end-to-end throughput against prompt tokens, decode
almost flat, concurrency helping less as prompts grow), so the monitor, the budget and the
reports draw it. :func:`profile_curve` reads it off the estimator
(:func:`~sparktop.sweep.estimator.estimator.estimate`, through a
:func:`~sparktop.sweep.expected.matched.cached_estimator`): for each measured concurrency, the
figure and its band at prompt lengths on a log grid, plus the measured cells themselves. Where the
estimator has no data (past 2× the table, past ``max_model_len``) a line simply stops.

Pure; no Textual and no plotting library: the UI and the report writers draw it
(``sparktop/ui/curve_plot.py``), and two profiles' curves can be drawn together.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparktop.model import is_num
from sparktop.sweep.estimator.estimator import Basis, Estimated
from sparktop.sweep.estimator.surface import EXTRAPOLATION_LIMIT, METRICS
from sparktop.sweep.expected.matched import EstimateFn, cached_estimator
from sparktop.sweep.profiles.profile import Profile

__all__ = [
    "CURVE_METRICS",
    "CurveLine",
    "CurvePoint",
    "OperatingPoint",
    "ProfileCurve",
    "profile_curve",
]

CURVE_METRICS: dict[str, tuple[str, str]] = {
    "ttft_s": ("TTFT", "s"),
    "aggregate_tps": ("aggregate", "tok/s"),
    "decode_tps": ("decode/req", "tok/s"),
    "prefill_tps": ("prefill/req", "tok/s"),
}
"""The figures a curve can show: metric (profile column) → (short label, unit)."""

STEPS_PER_DOUBLING = 4
"""Grid points per doubling of the prompt: a multiple of the cached estimator's grid
(:data:`~sparktop.sweep.expected.matched.GRID_STEPS_PER_DOUBLING`), so a curve drawn again is
cached; 4 draws the 2 ms-a-call estimator ~40 times a line over the seeds' 1k-1M range."""


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One estimated point of a line: the figure at ``prompt_tokens`` (tokens per request).

    ``value``, ``low`` and ``high`` are in the metric's unit (s for TTFT, tok/s otherwise);
    ``low``/``high`` are the estimator's band, None when it has none (too few cells)."""

    prompt_tokens: float
    value: float
    low: float | None
    high: float | None
    basis: Basis


@dataclass(frozen=True, slots=True)
class CurveLine:
    """One measured concurrency: its estimated points by ascending prompt, and the cells the
    profile measured there (``(prompt tokens, value)``; rows and acceptance points)."""

    concurrency: int
    points: tuple[CurvePoint, ...]
    cells: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class ProfileCurve:
    """A profile's ``metric`` against prompt tokens, a :class:`CurveLine` per concurrency.

    ``label``/``unit`` from :data:`CURVE_METRICS`; ``meaning`` is the profile's own words
    for the column (its ``columns`` section; "" when it does not say); ``prompt_range`` the
    span drawn (tokens, low–high)."""

    profile: str
    metric: str
    label: str
    unit: str
    meaning: str
    aggregate_kind: str
    lines: tuple[CurveLine, ...]
    prompt_range: tuple[float, float]

    def line(self, concurrency: int) -> CurveLine | None:
        return next((ln for ln in self.lines if ln.concurrency == concurrency), None)


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """Where something sits on a curve: the live window (``live`` set) or a typed budget.

    ``prompt_tokens`` the window's mean prompt (or the typed one), ``concurrency`` its mean
    running count (or the typed one), ``expected`` the estimator's figure for that load (the
    window-matched row's, with its band), ``live`` the live figure in the curve's unit (None:
    no live figure, ``missing`` says why), ``live_label`` the statistic (``p50``, ``1/ITL``,
    ``live e2e``), ``compared`` False when the live figure is defined differently from the
    column (``note`` says how). ``live_low``/``live_high``: the interval the live figure is
    known to lie in when that is coarse (a quantile's histogram bucket, e.g. 5–7.5 s; the
    high end may be infinite), else None; ``live_text`` the live figure as the strip says it.
    """

    metric: str
    prompt_tokens: float
    concurrency: float
    expected: Estimated
    live: float | None = None
    live_label: str = ""
    missing: str = ""
    compared: bool = True
    note: str = ""
    live_low: float | None = None
    live_high: float | None = None
    live_text: str = ""


def _cells(profile: Profile, metric: str) -> dict[int, list[tuple[float, float]]]:
    cells: dict[int, list[tuple[float, float]]] = {}
    for row in profile.rows:
        cells.setdefault(row.concurrency, []).append(
            (float(row.prompt_tokens), float(getattr(row, metric)))
        )
    for point in profile.acceptance:
        value = getattr(point, metric)
        if is_num(value):
            cells.setdefault(point.concurrency, []).append(
                (float(point.prompt_tokens), float(value))
            )
    return cells


def _grid(low: float, high: float, steps: int) -> list[float]:
    first = math.floor(math.log2(low) * steps)
    last = math.ceil(math.log2(high) * steps)
    return [2.0 ** (k / steps) for k in range(first, last + 1)]


def _num(value: object) -> float | None:
    return float(value) if is_num(value) else None


def profile_curve(
    profile: Profile,
    metric: str = "ttft_s",
    *,
    estimator: EstimateFn | None = None,
    include: Iterable[float] = (),
    concurrencies: Sequence[int] | None = None,
    steps_per_doubling: int = STEPS_PER_DOUBLING,
) -> ProfileCurve:
    """``profile``'s ``metric`` (a name of :data:`CURVE_METRICS`) against prompt tokens.

    The span is the measured cells' prompt range, widened to hold each of ``include`` (a
    live or typed prompt) within the estimator's reach (2× past the table); every measured
    concurrency gets a line unless ``concurrencies`` picks some. ``estimator`` defaults to a
    new :func:`~sparktop.sweep.expected.matched.cached_estimator` (pass the plan's to share its
    cache). Raises ValueError for an unknown metric."""
    if metric not in METRICS or metric not in CURVE_METRICS:
        raise ValueError(f"unknown curve metric {metric!r}; known: {', '.join(CURVE_METRICS)}")
    est = estimator if estimator is not None else cached_estimator(profile)
    cells = _cells(profile, metric)
    prompts = [p for column in cells.values() for p, _ in column]
    low, high = (min(prompts), max(prompts)) if prompts else (1.0, 1.0)
    reach_low, reach_high = low / EXTRAPOLATION_LIMIT, high * EXTRAPOLATION_LIMIT
    for p in include:
        if is_num(p) and p >= 1:
            low, high = min(low, max(p, reach_low)), max(high, min(p, reach_high))
    wanted = sorted(cells) if concurrencies is None else [c for c in concurrencies if c in cells]
    grid = _grid(low, high, steps_per_doubling)
    lines = []
    for c in wanted:
        points = []
        for p in sorted({low, *grid[1:-1], high, *(x for x, _ in cells[c] if low <= x <= high)}):
            fig: Estimated = getattr(est(p, c), metric)
            value = _num(fig.value)
            if value is None or value <= 0:
                continue
            points.append(CurvePoint(p, value, _num(fig.low), _num(fig.high), fig.basis))
        lines.append(CurveLine(c, tuple(points), tuple(sorted(cells[c]))))
    label, unit = CURVE_METRICS[metric]
    return ProfileCurve(
        profile=profile.name,
        metric=metric,
        label=label,
        unit=unit,
        meaning=profile.meaning(metric),
        aggregate_kind=profile.aggregate_kind,
        lines=tuple(lines),
        prompt_range=(low, high),
    )
