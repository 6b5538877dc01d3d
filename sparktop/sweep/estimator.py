"""The estimator: what a sweep profile says TTFT, prefill, decode and aggregate should be.

One function, :func:`estimate`, shared by the budget, the TUI's expected row and the
simulator. Rules (DESIGN.md §6), each result saying how it was obtained:

- a table point is returned exactly;
- between two rows of the same concurrency: log-log interpolation (both axes logarithmic,
  so values stay positive and power-law-like curves are followed);
- below the shortest prompt of that concurrency: that row's values (*clamped*; a shorter
  prompt is not slower);
- beyond the longest prompt: no extrapolation. Only towards an acceptance point of the same
  concurrency (the 2-Spark 899,994-token single stream) are the figures that point publishes
  interpolated (*anchored*); everything else is NA with the reason. Beyond the acceptance
  point itself: NA;
- a concurrency between two measured columns: each column is estimated at the prompt length,
  then the two are interpolated log-log on concurrency; if either side has no data, no data.
  A concurrency below the lowest or above the highest column: NA (no extrapolation).
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass

from sparktop.model import NA
from sparktop.sweep.profile import AcceptancePoint, Profile, ProfileRow

METRICS = ("ttft_s", "prefill_tps", "decode_tps", "aggregate_tps")
"""The four estimated figures, in display order."""


class Basis(enum.StrEnum):
    """How an estimated figure was obtained."""

    EXACT = "exact"
    INTERPOLATED = "interpolated"
    CLAMPED = "clamped"
    ANCHORED = "anchored"
    NO_DATA = "no data"


@dataclass(frozen=True, slots=True)
class Estimated:
    """One estimated figure: the value (NA with the reason when there is none) and how."""

    value: float | NA
    how: str
    basis: Basis


@dataclass(frozen=True, slots=True)
class Estimate:
    """What the profile says for ``concurrency`` requests of ``prompt_tokens`` each.

    Units: ``ttft_s`` seconds, the others tok/s. ``aggregate_kind`` is the profile's
    ``"end-to-end"`` or ``"decode-only"`` so callers compare live figures like with like.
    """

    profile: str
    prompt_tokens: float
    concurrency: int
    ttft_s: Estimated
    prefill_tps: Estimated
    decode_tps: Estimated
    aggregate_tps: Estimated
    aggregate_kind: str

    def figures(self) -> tuple[tuple[str, Estimated], ...]:
        """``(metric name, figure)`` pairs in :data:`METRICS` order."""
        return tuple((m, getattr(self, m)) for m in METRICS)

    @property
    def how(self) -> str:
        """One line on how the figures were obtained (distinct explanations joined by "; ")."""
        seen: list[str] = []
        for _, fig in self.figures():
            if fig.how not in seen:
                seen.append(fig.how)
        return "; ".join(seen)


def loglog(x: float, x0: float, y0: float, x1: float, y1: float) -> float:
    """Interpolate ``y`` at ``x`` on the line through ``(x0, y0)``, ``(x1, y1)`` in log-log space.

    All arguments must be positive; ``x0 == x1`` returns ``y0``.
    """
    if x1 == x0:
        return y0
    f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
    return math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))


def _tok(n: float) -> str:
    return f"{n:,.0f}"


def _all(value: float | NA, how: str, basis: Basis) -> dict[str, Estimated]:
    return {m: Estimated(value, how, basis) for m in METRICS}


def _no_data(reason: str) -> dict[str, Estimated]:
    return _all(NA(reason), f"no data: {reason}", Basis.NO_DATA)


def _from_row(row: ProfileRow, how: str, basis: Basis) -> dict[str, Estimated]:
    return {m: Estimated(float(getattr(row, m)), how, basis) for m in METRICS}


def _towards_acceptance(
    prompt: float, last: ProfileRow, point: AcceptancePoint
) -> dict[str, Estimated]:
    at_point = prompt == point.prompt_tokens
    where = f"{_tok(point.prompt_tokens)} tokens × {point.concurrency}"
    how = (
        f"anchored: the acceptance point ({where})"
        if at_point
        else f"anchored: log-log between row {_tok(last.prompt_tokens)} and the acceptance "
        f"point ({where})"
    )
    out: dict[str, Estimated] = {}
    for m in METRICS:
        target = getattr(point, m)
        if isinstance(target, NA):
            reason = (
                f"beyond the table's longest prompt at concurrency {last.concurrency}, "
                f"{_tok(last.prompt_tokens)} tokens; the acceptance point at "
                f"{_tok(point.prompt_tokens)} tokens does not publish it"
            )
            out[m] = Estimated(NA(reason), f"no data: {reason}", Basis.NO_DATA)
        elif at_point:
            out[m] = Estimated(float(target), how, Basis.ANCHORED)
        else:
            value = loglog(
                prompt, last.prompt_tokens, getattr(last, m), point.prompt_tokens, target
            )
            out[m] = Estimated(value, how, Basis.ANCHORED)
    return out


def _in_column(profile: Profile, prompt: float, concurrency: int) -> dict[str, Estimated]:
    rows = profile.column(concurrency)
    first, last = rows[0], rows[-1]
    if prompt < first.prompt_tokens:
        how = (
            f"clamped: below the shortest prompt at concurrency {concurrency} "
            f"({_tok(first.prompt_tokens)}), that row's values"
        )
        return _from_row(first, how, Basis.CLAMPED)
    if prompt > last.prompt_tokens:
        points = sorted(
            (
                a
                for a in profile.acceptance
                if a.concurrency == concurrency and a.prompt_tokens > last.prompt_tokens
            ),
            key=lambda a: a.prompt_tokens,
        )
        ahead = [a for a in points if a.prompt_tokens >= prompt]
        if ahead:
            return _towards_acceptance(prompt, last, ahead[0])
        longest = points[-1].prompt_tokens if points else last.prompt_tokens
        what = "acceptance point" if points else "prompt measured"
        return _no_data(
            f"{_tok(prompt)} tokens is beyond the longest {what} at concurrency {concurrency} "
            f"({_tok(longest)}); no extrapolation"
        )
    for lo, hi in itertools.pairwise(rows):
        if prompt == lo.prompt_tokens:
            break
        if lo.prompt_tokens < prompt < hi.prompt_tokens:
            how = (
                f"interpolated log-log between rows {_tok(lo.prompt_tokens)} and "
                f"{_tok(hi.prompt_tokens)} (concurrency {concurrency})"
            )
            return {
                m: Estimated(
                    loglog(
                        prompt, lo.prompt_tokens, getattr(lo, m), hi.prompt_tokens, getattr(hi, m)
                    ),
                    how,
                    Basis.INTERPOLATED,
                )
                for m in METRICS
            }
    row = next(r for r in rows if r.prompt_tokens == prompt)
    return _from_row(row, f"exact row ({_tok(prompt)} tokens × {concurrency})", Basis.EXACT)


def _between_columns(
    profile: Profile, prompt: float, concurrency: int, lo: int, hi: int
) -> dict[str, Estimated]:
    at_lo = _in_column(profile, prompt, lo)
    at_hi = _in_column(profile, prompt, hi)
    out: dict[str, Estimated] = {}
    for m in METRICS:
        a, b = at_lo[m], at_hi[m]
        if isinstance(a.value, NA) or isinstance(b.value, NA):
            side, fig = (lo, a) if isinstance(a.value, NA) else (hi, b)
            reason = (
                f"concurrency {concurrency} lies between measured {lo} and {hi}, and at {side}: "
                f"{getattr(fig.value, 'reason', '')}"
            )
            out[m] = Estimated(NA(reason), f"no data: {reason}", Basis.NO_DATA)
            continue
        how = (
            f"interpolated log-log between concurrency {lo} and {hi} at {_tok(prompt)} tokens "
            f"({lo}: {a.basis}; {hi}: {b.basis})"
        )
        out[m] = Estimated(loglog(concurrency, lo, a.value, hi, b.value), how, Basis.INTERPOLATED)
    return out


def estimate(profile: Profile, prompt_tokens: float, concurrency: int) -> Estimate:
    """Estimate TTFT (s), prefill, decode and aggregate (tok/s) from ``profile``.

    ``prompt_tokens`` is per request (a float is fine, e.g. a live mean); ``concurrency`` the
    number of simultaneous requests. Never raises for odd inputs: a prompt below 1 token, a
    concurrency below 1 or outside the measured columns give NA figures with the reason.
    Pure and cheap (a few dozen rows scanned), safe to call on every keypress.
    """
    figures: dict[str, Estimated]
    columns = profile.concurrencies
    if not (isinstance(prompt_tokens, int | float) and math.isfinite(prompt_tokens)) or (
        prompt_tokens < 1
    ):
        figures = _no_data(f"prompt length {prompt_tokens} is not at least 1 token")
    elif concurrency < 1:
        figures = _no_data(f"concurrency {concurrency} is not at least 1 request")
    elif concurrency in columns:
        figures = _in_column(profile, prompt_tokens, concurrency)
    elif concurrency < columns[0] or concurrency > columns[-1]:
        listed = ", ".join(str(c) for c in columns)
        figures = _no_data(
            f"concurrency {concurrency} is outside the measured columns ({listed}); "
            "no extrapolation"
        )
    else:
        lo = max(c for c in columns if c < concurrency)
        hi = min(c for c in columns if c > concurrency)
        figures = _between_columns(profile, prompt_tokens, concurrency, lo, hi)
    return Estimate(
        profile=profile.name,
        prompt_tokens=prompt_tokens,
        concurrency=concurrency,
        aggregate_kind=profile.aggregate_kind,
        **figures,
    )
