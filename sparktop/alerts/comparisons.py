"""Live vs expected, like for like: each profile column beside the live figure defined as it is.

One list of comparisons for an engine's window, shared by the monitor's expected strip and
``snapshot`` (text and ``--json``), so both say the same thing. The expected figures are the
window-matched row (:func:`sparktop.sweep.expected.matched.window_expected`); the live ones are
defined like the columns (:mod:`sparktop.alerts.live`). A comparison whose two figures are defined
differently (a decode-only profile aggregate beside the live end-to-end rate) is shown, never
flagged; a live value inside the estimator's band is never a deficit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sparktop.alerts.live import live_decode, live_ttft
from sparktop.model import NA, EngineSample, Num, Quantile, is_num
from sparktop.sweep.estimator.estimator import Estimated
from sparktop.sweep.expected.matched import WindowExpected

AGGREGATE_KINDS = {
    "end_to_end": "end-to-end",
    "end-to-end": "end-to-end",
    "e2e": "end-to-end",
    "decode_only": "decode-only",
    "decode-only": "decode-only",
}
"""A profile's ``aggregate_kind`` spellings → one word."""

DECODE_ONLY_WHY = "the profile's is decode-only, the live rate end-to-end"

COARSE_RATIO = 1.5
"""A live bucket whose ends are this factor apart or more is shown as its interval
(vLLM's TTFT edges 10, 20, 40, 80 s are a factor 2 apart; 7.5–10 s reads as a point)."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """One expected figure beside the live one.

    ``label`` is the strip's (``TTFT``, ``decode/req``, ``agg``), ``column`` the profile
    column read (``ttft_s``, ``decode_tps``, ``aggregate_tps``); ``unit`` ``"s"`` or ``""``
    (tok/s). ``live`` is the live figure or :class:`NA` (why none), ``live_label`` the
    statistic it is (``p50``, ``p50 w/o queue``, ``1/ITL``, ``live e2e``). ``worse_when``
    ``"higher"`` or ``"lower"``. ``comparable`` False (with ``why_not``) when the two are
    defined differently. ``note``: what the live figure includes that the column does not.
    ``estimated`` is the estimator's figure (value, band, basis, how).
    """

    label: str
    column: str
    unit: str
    estimated: Estimated
    live: Num | None
    live_label: str
    worse_when: str
    comparable: bool = True
    why_not: str = ""
    note: str = ""
    live_low: float | None = None
    live_high: float | None = None
    """The interval the live figure is known to lie in: a quantile's histogram bucket
    (``(20, 40)`` s for a TTFT p50 in vLLM's 20–40 s bucket); None when it is exact."""

    @property
    def live_interval(self) -> tuple[float, float] | None:
        if not is_num(self.live) or self.live_low is None or self.live_high is None:
            return None
        return (self.live_low, self.live_high)

    @property
    def coarse(self) -> bool:
        """The live figure's bucket is too wide to read as a point (its ends a factor
        :data:`COARSE_RATIO` or more apart): it is shown as the interval."""
        interval = self.live_interval
        if interval is None:
            return False
        low, high = interval
        return low <= 0 or high / low >= COARSE_RATIO

    def live_text(self) -> str:
        """The live figure as shown: a coarse bucket as its interval (``20–40 s``, ``> 80
        s``), else the value (``6.25 s``, ``48.3``); "" without a live value."""
        if not is_num(self.live):
            return ""
        return live_text(float(self.live), self.live_interval, self.unit)

    @property
    def expected(self) -> Num:
        return self.estimated.value

    @property
    def low(self) -> Num:
        return self.estimated.low

    @property
    def high(self) -> Num:
        return self.estimated.high

    def deviation(self) -> float | None:
        """Signed % of live from expected; None when either is missing or expected is 0.
        A live interval (a histogram bucket) deviates by its end nearest the expected
        value, 0 when it holds it: the bucket is all the histogram knows, and the point
        interpolated inside it is no evidence of more."""
        live, expected = self.live, self.expected
        if not (is_num(live) and is_num(expected)) or expected == 0:
            return None
        interval = self.live_interval
        if interval is not None:
            low, high = interval
            live = low if low > expected else high if high < expected else expected
        return (float(live) - float(expected)) / float(expected) * 100.0

    def in_band(self) -> bool:
        """The live value (or any of its interval) lies inside the estimator's band (never
        without one)."""
        live = self.live
        if not (is_num(live) and is_num(self.low) and is_num(self.high)):
            return False
        low, high = self.live_interval or (live, live)
        return low <= self.high and high >= self.low

    def deficit(self, threshold_pct: float) -> bool:
        """Past ``threshold_pct`` on the worse side, outside the band, like for like."""
        dev = self.deviation()
        if dev is None or not self.comparable or self.in_band():
            return False
        return dev > threshold_pct if self.worse_when == "higher" else dev < -threshold_pct


def live_text(value: float | None, interval: tuple[float, float] | None, unit: str) -> str:
    """``54.29 s``, or a coarse bucket as ``40–80 s`` (``> 80 s`` open above)."""
    if value is None:
        return "n/a"
    if interval is None or (interval[0] > 0 and interval[1] / interval[0] < COARSE_RATIO):
        return f"{value:.2f} s" if unit == "s" else f"{value:.1f}"
    low, high = interval
    if unit == "s":
        if math.isinf(high):
            return f"> {low:g} s"
        return f"{low:g}–{high:g} s"
    return f"≤ {high:.1f}" if low <= 0 else f"{low:.1f}–{high:.1f}"


def _ttft_fallback(sample: EngineSample) -> Num:
    """The TTFT p50 as the engine shows it, when no windowed like-for-like figure exists."""
    q = sample.ttft_p50
    if sample.window_s is not None and "ttft_p50" in sample.since_start:
        return NA("no first tokens in the window (the server's lifetime p50 only)")
    return q.value_s if isinstance(q, Quantile) else q


def _decode_missing(sample: EngineSample) -> NA:
    """Why there is no live per-stream decode: the reason ITL and TPOT share when both are
    n/a for one (a kind that exports no latency histograms, families not exported), else
    that the window saw no decode latencies."""
    itl, tpot = sample.itl_mean_s, sample.tpot_mean_s
    if isinstance(itl, NA) and isinstance(tpot, NA) and itl.reason and itl.reason == tpot.reason:
        return NA(itl.reason)
    return NA("no decode latencies in the window")


def comparisons(got: WindowExpected, sample: EngineSample) -> tuple[Comparison, ...]:
    """TTFT, per-request decode and aggregate, in that order, for ``sample``'s window."""
    ttft, decode = live_ttft(sample), live_decode(sample)
    ttft_live: Num = ttft.value if ttft.value is not None else _ttft_fallback(sample)
    per_stream: Num = decode.value if decode.value is not None else _decode_missing(sample)
    # The generation rate over a busy window is an end-to-end aggregate (prefill time
    # included): like for like only with an end-to-end profile column.
    decode_only = AGGREGATE_KINDS.get(got.aggregate_kind, "") == "decode-only"
    return (
        Comparison("TTFT", "ttft_s", "s", got.ttft_s, ttft_live, ttft.label, "higher",
                   note=ttft.note, live_low=ttft.low, live_high=ttft.high),
        Comparison("decode/req", "decode_tps", "", got.decode_tps, per_stream,
                   decode.label.replace("mean ", ""), "lower", live_low=decode.low,
                   live_high=decode.high),
        Comparison("agg", "aggregate_tps", "", got.aggregate_tps, sample.decode_tps,
                   "live e2e", "lower", comparable=not decode_only,
                   why_not=DECODE_ONLY_WHY if decode_only else ""),
    )  # fmt: skip


def _num(value: object) -> float | None:
    return float(value) if is_num(value) else None


def _ends(interval: tuple[float, float] | None) -> list[float | None] | None:
    """An interval for JSON: an open end (infinite) is null."""
    if interval is None:
        return None
    return [x if math.isfinite(x) else None for x in interval]


def comparison_json(comp: Comparison, threshold_pct: float) -> dict[str, object]:
    """One comparison for ``snapshot --json`` (units in the keys' suffix: s or tok/s)."""
    unit = "s" if comp.unit == "s" else "tps"
    est = comp.estimated
    live = comp.live
    return {
        "column": comp.column,
        "statistic": comp.live_label,
        f"expected_{unit}": _num(est.value),
        f"band_{unit}": [_num(est.low), _num(est.high)] if is_num(est.low) else None,
        "basis": str(est.basis),
        "how": est.how,
        f"live_{unit}": _num(live),
        f"live_interval_{unit}": _ends(comp.live_interval),
        "live_missing": live.reason if isinstance(live, NA) else None,
        "deviation_pct": comp.deviation() if comp.comparable else None,
        "in_band": comp.in_band(),
        "compared": comp.comparable,
        "not_compared_why": comp.why_not or None,
        "note": comp.note or None,
        "deficit": comp.deficit(threshold_pct),
    }
