"""Live vs expected, like for like: each profile column beside the live figure defined as it is.

One list of comparisons for an engine's window, shared by the monitor's expected strip and
``snapshot`` (text and ``--json``), so both say the same thing. The expected figures are the
window-matched row (:func:`sparktop.sweep.matched.window_expected`); the live ones are defined
like the columns (:mod:`sparktop.alerts.live`). A comparison whose two figures are defined
differently (a decode-only profile aggregate beside the live end-to-end rate) is shown, never
flagged; a live value inside the estimator's band is never a deficit.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktop.alerts.live import live_decode, live_ttft
from sparktop.model import NA, EngineSample, Num, Quantile, is_num
from sparktop.sweep.estimator import Estimated
from sparktop.sweep.matched import WindowExpected

AGGREGATE_KINDS = {
    "end_to_end": "end-to-end",
    "end-to-end": "end-to-end",
    "e2e": "end-to-end",
    "decode_only": "decode-only",
    "decode-only": "decode-only",
}
"""A profile's ``aggregate_kind`` spellings → one word."""

DECODE_ONLY_WHY = "the profile's is decode-only, the live rate end-to-end"


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
        """Signed % of live from expected; None when either is missing or expected is 0."""
        live, expected = self.live, self.expected
        if not (is_num(live) and is_num(expected)) or expected == 0:
            return None
        return (float(live) - float(expected)) / float(expected) * 100.0

    def in_band(self) -> bool:
        """The live value lies inside the estimator's band (never without one)."""
        live = self.live
        return (
            is_num(live)
            and is_num(self.low)
            and is_num(self.high)
            and (self.low <= live <= self.high)
        )

    def deficit(self, threshold_pct: float) -> bool:
        """Past ``threshold_pct`` on the worse side, outside the band, like for like."""
        dev = self.deviation()
        if dev is None or not self.comparable or self.in_band():
            return False
        return dev > threshold_pct if self.worse_when == "higher" else dev < -threshold_pct


def _ttft_fallback(sample: EngineSample) -> Num:
    """The TTFT p50 as the engine shows it, when no windowed like-for-like figure exists."""
    q = sample.ttft_p50
    if sample.window_s is not None and "ttft_p50" in sample.since_start:
        return NA("no first tokens in the window (the server's lifetime p50 only)")
    return q.value_s if isinstance(q, Quantile) else q


def comparisons(got: WindowExpected, sample: EngineSample) -> tuple[Comparison, ...]:
    """TTFT, per-request decode and aggregate, in that order, for ``sample``'s window."""
    ttft, decode = live_ttft(sample), live_decode(sample)
    ttft_live: Num = ttft.value if ttft.value is not None else _ttft_fallback(sample)
    per_stream: Num = (
        decode.value if decode.value is not None else NA("no decode latencies in the window")
    )
    # The generation rate over a busy window is an end-to-end aggregate (prefill time
    # included): like for like only with an end-to-end profile column.
    decode_only = AGGREGATE_KINDS.get(got.aggregate_kind, "") == "decode-only"
    return (
        Comparison("TTFT", "ttft_s", "s", got.ttft_s, ttft_live, ttft.label, "higher",
                   note=ttft.note),
        Comparison("decode/req", "decode_tps", "", got.decode_tps, per_stream,
                   decode.label.replace("mean ", ""), "lower"),
        Comparison("agg", "aggregate_tps", "", got.aggregate_tps, sample.decode_tps,
                   "live e2e", "lower", comparable=not decode_only,
                   why_not=DECODE_ONLY_WHY if decode_only else ""),
    )  # fmt: skip


def _num(value: object) -> float | None:
    return float(value) if is_num(value) else None


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
        "live_missing": live.reason if isinstance(live, NA) else None,
        "deviation_pct": comp.deviation() if comp.comparable else None,
        "in_band": comp.in_band(),
        "compared": comp.comparable,
        "not_compared_why": comp.why_not or None,
        "note": comp.note or None,
        "deficit": comp.deficit(threshold_pct),
    }
