"""Leave-one-out check of the estimator: how well does it predict a row it has not seen?

For every interior row of a concurrency column (not the shortest or the longest prompt, which
would need extrapolation), the row is removed and estimated from the rest. The relative TTFT
error over those rows says how far to trust interpolated figures between table points.
Used by ``benchmarks/leave_one_out.py`` and ``tests/test_estimator.py``.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

from sparktop.model import is_num
from sparktop.sweep.estimator import METRICS, estimate
from sparktop.sweep.profile import Profile, ProfileRow


@dataclass(frozen=True, slots=True)
class HeldOut:
    """One held-out row: the measured figures and the relative errors of the estimates.

    ``errors`` maps each metric name to ``(estimate - measured) / measured`` (signed).
    """

    row: ProfileRow
    errors: tuple[tuple[str, float], ...]

    def error(self, metric: str) -> float:
        return dict(self.errors)[metric]


def leave_one_out(profile: Profile) -> tuple[HeldOut, ...]:
    """Estimate each interior row of each concurrency column from the profile without it."""
    results: list[HeldOut] = []
    for concurrency in profile.concurrencies:
        column = profile.column(concurrency)
        for row in column[1:-1]:
            rest = tuple(r for r in profile.rows if r is not row)
            reduced = dataclasses.replace(profile, rows=rest)
            est = estimate(reduced, row.prompt_tokens, row.concurrency)
            errors = []
            for metric in METRICS:
                value = getattr(est, metric).value
                if is_num(value):
                    measured = getattr(row, metric)
                    errors.append((metric, (value - measured) / measured))
            results.append(HeldOut(row, tuple(errors)))
    return tuple(results)


def median_abs_error(held: tuple[HeldOut, ...], metric: str = "ttft_s") -> float:
    """Median of ``|relative error|`` of ``metric`` over the held-out rows (0–1; NaN if none)."""
    values = [abs(h.error(metric)) for h in held if metric in dict(h.errors)]
    return statistics.median(values) if values else float("nan")
