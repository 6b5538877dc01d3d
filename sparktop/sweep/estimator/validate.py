"""Leave-one-out check of the estimator: how well does it predict a cell it has not seen?

Every row of the profile (edges included) is removed and estimated from the rest — the
estimator refits the reduced profile, chooses its designs and computes its bands without the
cell — and compared with the measured figures: signed relative error per metric, whether the
measured value falls inside the band, the band's half-width, and refusals (no data). The same
run measures plain column-wise log-log interpolation (:func:`column_loglog`) for comparison.
Used by ``benchmarks/leave_one_out.py`` and ``tests/test_estimator.py``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from sparktop.model import is_num
from sparktop.sweep.estimator.estimator import METRICS, estimate, loglog, without
from sparktop.sweep.profiles.profile import Profile, ProfileRow

Figures = dict[str, tuple[float, float | None, float | None]]
"""``{metric: (value, band low, band high)}`` for the figures given (None: no band)."""
Predict = Callable[[Profile, ProfileRow], Figures]
"""``(reduced profile, held-out row) -> figures``."""


@dataclass(frozen=True, slots=True)
class HeldOut:
    """One held-out row: signed relative errors ``(estimate - measured) / measured`` by
    metric (absent = refused), and whether the measured value was inside the band."""

    row: ProfileRow
    errors: tuple[tuple[str, float], ...]
    inside: tuple[tuple[str, bool], ...] = ()
    half_width: tuple[tuple[str, float], ...] = ()

    def error(self, metric: str) -> float:
        return dict(self.errors)[metric]


def estimator_predict(
    profile: Profile, row: ProfileRow
) -> dict[str, tuple[float, float | None, float | None]]:
    est = estimate(profile, row.prompt_tokens, row.concurrency)
    out: Figures = {}
    for metric, fig in est.figures():
        if is_num(fig.value):
            low = float(fig.low) if is_num(fig.low) else None
            high = float(fig.high) if is_num(fig.high) else None
            out[metric] = (float(fig.value), low, high)
    return out


def column_loglog(profile: Profile, prompt: float, concurrency: int) -> dict[str, float]:
    """Plain column-wise log-log interpolation (the estimator before it used the whole table):
    between two rows of a column, log-log; below a column's shortest row, that row's values;
    past its longest, nothing; a concurrency between two columns, log-log across them."""
    columns = profile.concurrencies

    def in_column(c: int) -> dict[str, float]:
        rows = profile.column(c)
        if not rows or prompt > rows[-1].prompt_tokens:
            return {}
        if prompt <= rows[0].prompt_tokens:
            return {m: float(getattr(rows[0], m)) for m in METRICS}
        for lo, hi in itertools.pairwise(rows):
            if lo.prompt_tokens <= prompt <= hi.prompt_tokens:
                return {
                    m: loglog(
                        prompt, lo.prompt_tokens, getattr(lo, m), hi.prompt_tokens, getattr(hi, m)
                    )
                    for m in METRICS
                }
        return {}

    if concurrency in columns:
        return in_column(concurrency)
    if not columns or concurrency < columns[0] or concurrency > columns[-1]:
        return {}
    lo = max(c for c in columns if c < concurrency)
    hi = min(c for c in columns if c > concurrency)
    a, b = in_column(lo), in_column(hi)
    if not a or not b:
        return {}
    return {m: loglog(concurrency, lo, a[m], hi, b[m]) for m in METRICS}


def loglog_predict(
    profile: Profile, row: ProfileRow
) -> dict[str, tuple[float, float | None, float | None]]:
    got = column_loglog(profile, row.prompt_tokens, row.concurrency)
    return {m: (v, None, None) for m, v in got.items()}


def leave_one_out(profile: Profile, predict: Predict = estimator_predict) -> tuple[HeldOut, ...]:
    """Estimate every row of ``profile`` from the profile without it."""
    results: list[HeldOut] = []
    for row in profile.rows:
        reduced = without(profile, row.prompt_tokens, row.concurrency)
        got = predict(reduced, row)
        errors, inside, widths = [], [], []
        for metric, (value, low, high) in got.items():
            measured = float(getattr(row, metric))
            errors.append((metric, (value - measured) / measured))
            if low is not None and high is not None:
                inside.append((metric, low <= measured <= high))
                widths.append((metric, (high - low) / 2.0 / value))
        results.append(HeldOut(row, tuple(errors), tuple(inside), tuple(widths)))
    return tuple(results)


@dataclass(frozen=True, slots=True)
class Summary:
    """Absolute relative errors of one metric over held-out rows, in %, and the band."""

    median: float
    p90: float
    max: float
    answered: int
    refused: int
    coverage: float | None = None
    """Share of held-out values inside the band, % (None without bands)."""
    median_half_width: float | None = None


def summarise(
    held: tuple[HeldOut, ...], metric: str, only: set[tuple[int, int]] | None = None
) -> Summary:
    """Median / p90 (linear between order statistics) / max of ``|error|`` in %, refusals,
    band coverage and median half-width; ``only`` restricts to these (prompt, concurrency)."""
    chosen = [h for h in held if only is None or (h.row.prompt_tokens, h.row.concurrency) in only]
    errs = sorted(abs(dict(h.errors)[metric]) * 100 for h in chosen if metric in dict(h.errors))
    refused = sum(1 for h in chosen if metric not in dict(h.errors))
    inside = [dict(h.inside)[metric] for h in chosen if metric in dict(h.inside)]
    widths = [dict(h.half_width)[metric] * 100 for h in chosen if metric in dict(h.half_width)]
    if not errs:
        return Summary(math.nan, math.nan, math.nan, 0, refused)
    p90 = statistics.quantiles(errs, n=10, method="inclusive")[8] if len(errs) > 1 else errs[0]
    return Summary(
        statistics.median(errs),
        p90,
        errs[-1],
        len(errs),
        refused,
        100.0 * sum(inside) / len(inside) if inside else None,
        statistics.median(widths) if widths else None,
    )


def median_abs_error(held: tuple[HeldOut, ...], metric: str = "ttft_s") -> float:
    """Median of ``|relative error|`` of ``metric`` over the held-out rows (0–1; NaN if none)."""
    values = [abs(dict(h.errors)[metric]) for h in held if metric in dict(h.errors)]
    return statistics.median(values) if values else float("nan")


def band_pooled(held: tuple[HeldOut, ...]) -> tuple[float, float] | None:
    """Band coverage (%) and median half-width (%) over every held-out figure together."""
    inside = [ok for h in held for _, ok in h.inside]
    widths = [w * 100 for h in held for _, w in h.half_width]
    if not inside or not widths:
        return None
    return 100.0 * sum(inside) / len(inside), statistics.median(widths)
