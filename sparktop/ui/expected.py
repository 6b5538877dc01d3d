"""The expected-row strip: the sweep profile's row for the live load, beside the live values.

Live concurrency = running requests; live prompt length = mean prompt tokens of recently
finished requests (DESIGN.md §6). Expected values come from the shared estimator
(``sparktop.sweep.estimator.estimate``), which says how each was obtained (exact,
interpolated, fitted, extrapolated, no data) and gives a band: a live value inside it is
not flagged, whatever the %. Textual-free; the widget renders the lines.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sparktop.alerts.expected_rules import live_itl_s
from sparktop.model import NA, EngineSample, is_num
from sparktop.sweep.estimator import Estimate, estimate
from sparktop.sweep.profile import Profile
from sparktop.ui import format as fmt
from sparktop.ui.engine_views import Group, pack
from sparktop.ui.views import Cell

Line = list[Cell]


class EstimatedLike(Protocol):
    @property
    def value(self) -> Any: ...
    @property
    def how(self) -> str: ...


EstimateFn = Callable[[int, int], Estimate]
"""``(prompt_tokens, concurrency) -> Estimate`` bound to one profile."""


def estimator(profile: Profile | None) -> EstimateFn | None:
    """The profile's estimator, memoised (the strip asks the same row every tick)."""
    if profile is None:
        return None
    return functools.lru_cache(maxsize=256)(functools.partial(estimate, profile))


AGGREGATE_KINDS = {
    "end_to_end": "end-to-end",
    "end-to-end": "end-to-end",
    "e2e": "end-to-end",
    "decode_only": "decode-only",
    "decode-only": "decode-only",
}


@dataclass(frozen=True, slots=True)
class Comparison:
    """One expected value beside the live one; ``worse_when`` is ``"higher"`` or ``"lower"``."""

    label: str
    expected: Any
    live: Any
    worse_when: str
    unit: str = ""
    live_label: str = "live"
    """What the live figure is (``p50`` for TTFT, ``1/ITL`` for decode, ``e2e`` rate)."""
    comparable: bool = True
    """False when the two figures are defined differently: shown, never flagged."""
    low: Any = None
    high: Any = None
    """The estimator's band around ``expected`` (None: none)."""

    def deviation(self) -> float | None:
        return fmt.deviation_pct(self.live, self.expected)

    def in_band(self) -> bool:
        """The live value lies inside the estimator's band (never without one)."""
        return (
            is_num(self.live)
            and is_num(self.low)
            and is_num(self.high)
            and self.low <= self.live <= self.high
        )

    def deficit(self, threshold_pct: float) -> bool:
        """Past the threshold on the worse side and outside the band."""
        dev = self.deviation()
        if dev is None or not self.comparable or self.in_band():
            return False
        return dev > threshold_pct if self.worse_when == "higher" else dev < -threshold_pct


@dataclass(slots=True)
class DeficitClock:
    """Remembers since when each (engine, value) has been past the threshold."""

    since: dict[tuple[str, str], float] = field(default_factory=dict)

    def update(self, engine: str, label: str, past: bool, now: float) -> float | None:
        key = (engine, label)
        if not past:
            self.since.pop(key, None)
            return None
        return self.since.setdefault(key, now)


def _value(estimated: Any) -> Any:
    return getattr(estimated, "value", None)


def _how(estimated: Any) -> str:
    return str(getattr(estimated, "how", "")) or "no data"


def _band(estimated: Any) -> dict[str, Any]:
    return {"low": getattr(estimated, "low", None), "high": getattr(estimated, "high", None)}


def _basis(estimated: Any) -> str:
    """How the row was obtained, in a word (exact, interpolated, fitted, extrapolated); the
    estimator's full sentence when it has no data, since the reason is what matters then."""
    basis = str(getattr(estimated, "basis", "") or "")
    return basis if basis and basis != "no data" else _how(estimated)


def _fmt(value: Any, unit: str) -> str:
    if not is_num(value):
        return "no data"
    return fmt.seconds(value) if unit == "s" else f"{value:,.1f}"


def expected_lines(
    sample: EngineSample,
    profile_name: str,
    estimate: EstimateFn | None,
    threshold_pct: float,
    clock: DeficitClock,
    now: float,
    width: int = 116,
) -> list[Line]:
    """The row used (and how it was obtained), then each expected value beside the live one."""
    head: Group = [("expected ", "dim")]
    if estimate is None:
        return [[*head, ("no sweep profile (set profile: in the inventory or --profile)", "dim")]]
    running, prompt = sample.running, sample.mean_prompt_tokens
    if not sample.ok:
        return [[*head, ("no live values to compare", "dim")]]
    if not is_num(running):  # the server does not report it: unknown, not idle
        return [[*head, ("n/a: the server does not report running requests", "dim")]]
    if running < 1:
        return [[*head, ("idle: no running requests to compare", "dim")]]
    if not is_num(prompt):
        return [[*head, ("waiting for finished requests (mean prompt length unknown)", "dim")]]
    concurrency, prompt_tokens = round(running), round(prompt)
    try:
        est = estimate(prompt_tokens, concurrency)
    except Exception as exc:  # a profile lookup bug must not take the panel down
        return [[*head, (f"estimator failed: {exc}", "warn")]]
    kind = AGGREGATE_KINDS.get(str(getattr(est, "aggregate_kind", "")), "aggregate")
    itl_s = live_itl_s(sample)
    per_stream = 1.0 / itl_s if itl_s else NA("no inter-token latencies in the window")
    # Live per-stream decode is 1 / mean ITL, not the generation rate ÷ running: with long
    # prompts most running requests are in prefill, so that quotient reads far below the
    # per-stream rate on a healthy engine. The generation rate over a busy window is an
    # end-to-end aggregate (prefill time included): like-for-like only with an end-to-end
    # profile column; beside a decode-only one it is shown but never flagged.
    comparisons = (
        (Comparison("TTFT", _value(est.ttft_s), _ttft_live(sample), "higher", "s", "p50",
                    **_band(est.ttft_s)), est.ttft_s),
        (Comparison("decode/req", _value(est.decode_tps), per_stream, "lower", "", "1/ITL",
                    **_band(est.decode_tps)), est.decode_tps),
        (Comparison(f"agg {kind}", _value(est.aggregate_tps), sample.decode_tps, "lower", "",
                    "live e2e" if kind == "decode-only" else "live",
                    comparable=kind != "decode-only", **_band(est.aggregate_tps)),
         est.aggregate_tps),
    )  # fmt: skip
    row_how = _how(est.ttft_s)
    groups: list[Group] = [
        [*head, (profile_name, "accent")],
        [(f"@ {prompt_tokens:,} prompt × {concurrency} running", "")],
        [(_basis(est.ttft_s), "dim")],
    ]
    for comp, estimated in comparisons:
        past = comp.deficit(threshold_pct)
        since = clock.update(sample.engine, comp.label, past, now)
        group: Group = [(f"{comp.label} ", "dim"), (_fmt(comp.expected, comp.unit), "")]
        band = fmt.band(comp.low, comp.high, comp.unit)
        if band and is_num(comp.expected):
            group.append((f" ({band})", "dim"))
        if not is_num(comp.expected):
            if _how(estimated) != row_how:  # the row's own reason is already shown once
                group.append((f" ({_how(estimated)})", "dim"))
        else:
            dev = comp.deviation()
            group += [
                (f" {comp.live_label} ", "dim"),
                (_fmt(comp.live, comp.unit), "bold"),
                (
                    f" {fmt.signed_pct(dev)}",
                    "crit" if past else "ok" if dev is not None and comp.comparable else "dim",
                ),
            ]
            if since is not None and now - since >= 1:
                group.append((f" since {fmt.clock_time(since)}", "crit"))
        groups.append(group)
    return pack(groups, width)


def _ttft_live(sample: EngineSample) -> Any:
    q = sample.ttft_p50
    return getattr(q, "value_s", q)


COLUMN_NOTES = (
    "TTFT: profile ttft_s vs live TTFT p50 (vllm:time_to_first_token_seconds bucket deltas)",
    "decode/req: profile per-request decode tok/s vs live 1 / mean ITL "
    "(vllm:inter_token_latency_seconds Δsum/Δcount over the window)",
    "agg: profile aggregate tok/s (its own definition: end-to-end or decode-only) vs live "
    "rate(vllm:generation_tokens_total), which over a busy window is end-to-end ('live e2e' "
    "beside a decode-only profile: shown, not flagged, since the two are defined differently)",
)
"""What each comparison compares (shown on the help screen)."""
