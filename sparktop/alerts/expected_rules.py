"""Expected-row rules: live TTFT / decode against the sweep profile, and the TP straggler.

The expected figures are computed for the live window's own load and combined as the live
statistic is (:mod:`sparktop.sweep.expected.matched`): the time-weighted running counts and the
prompt lengths that finished in the window; each live figure is defined like the profile column it
is compared with (:mod:`sparktop.alerts.live`: TTFT without the queue, per-request decode).
Live per-stream decode is 1 / mean TPOT or ITL (Δ``_sum`` / Δ``_count`` over the window),
compared with the profile's per-request decode column. Not ITL p50: with vLLM's
default 10 / 25 ms bucket edges every rate from 40 to 100 tok/s reads the same ~18 ms (an
ITL p50 known only as "above the last edge" still proves a deficit). Not the generation rate
÷ running either: with long prompts most running requests are in prefill, so that quotient
sits far below the per-stream rate on a healthy engine (the seeds' lesson: decode barely
moves while end-to-end throughput collapses).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sparktop.alerts.causes import engine_cause, explain, node_cause, past_slow, slowest
from sparktop.alerts.comparisons import live_text
from sparktop.alerts.context import Finding, RuleContext, Scope, rule
from sparktop.alerts.engine_rules import engine_finding, ok_engines
from sparktop.alerts.gpu_rules import (
    drop_score,
)
from sparktop.alerts.live import live_decode, live_ttft
from sparktop.alerts.model import Severity
from sparktop.model import EngineSample, is_num
from sparktop.sweep.expected.load import busy


@dataclass(frozen=True, slots=True)
class Deficit:
    """Live vs expected for one engine: TTFT % above, per-stream decode % below, and the
    estimator's band (None: no band)."""

    ttft_live_s: float | None = None
    ttft_expected_s: float | None = None
    ttft_over_pct: float | None = None
    decode_live_tps: float | None = None
    decode_expected_tps: float | None = None
    decode_under_pct: float | None = None
    load: str = ""
    ttft_high_s: float | None = None
    decode_low_tps: float | None = None
    window_s: float | None = None
    ttft_label: str = "p50"
    decode_label: str = "1/mean ITL"
    ttft_note: str = ""
    model_note: str = ""
    ttft_bucket_s: tuple[float, float] | None = None
    decode_bucket_tps: tuple[float, float] | None = None
    """The interval each live figure is known to lie in (a quantile's histogram bucket;
    None: exact). Deficits are read from the interval's end nearest the expected value."""

    def ttft_past(self, limit_pct: float) -> bool:
        """TTFT at least ``limit_pct`` above expected and, all of its bucket, above the
        band's top."""
        if self.ttft_over_pct is None or self.ttft_live_s is None:
            return False
        low = self.ttft_bucket_s[0] if self.ttft_bucket_s else self.ttft_live_s
        above_band = self.ttft_high_s is None or low > self.ttft_high_s
        return self.ttft_over_pct >= limit_pct and above_band

    def decode_past(self, limit_pct: float) -> bool:
        """Decode at least ``limit_pct`` below expected and, all of its interval, below the
        band's bottom."""
        if self.decode_under_pct is None or self.decode_live_tps is None:
            return False
        high = self.decode_bucket_tps[1] if self.decode_bucket_tps else self.decode_live_tps
        below_band = self.decode_low_tps is None or high < self.decode_low_tps
        return self.decode_under_pct >= limit_pct and below_band

    def ttft_text(self) -> str:
        """The live TTFT as the message shows it: its bucket when coarse (``20–40 s``)."""
        return live_text(self.ttft_live_s, self.ttft_bucket_s, "s")

    def band_text(self, which: str) -> str:
        """``", band ≤ 7.70 s"`` / ``", band ≥ 48.1 tok/s"`` for the message ("" without)."""
        if which == "ttft" and self.ttft_high_s is not None:
            return f", band ≤ {self.ttft_high_s:.2f} s"
        if which == "decode" and self.decode_low_tps is not None:
            return f", band ≥ {self.decode_low_tps:.1f} tok/s"
        return ""


def deficit(ctx: RuleContext, s: EngineSample) -> Deficit | None:
    """Compare live TTFT p50 and per-stream decode with the profile's expected row.

    None when there is nothing to compare: no profile, no answer, or no load in the window
    (``ctx.expected`` says so: :func:`~sparktop.sweep.expected.load.window_load`). Whether
    requests run *at this scrape* is not asked: the figures are the window's, and vLLM sets
    its running gauge only when a step ends, so between back-to-back requests (and through
    the next batch's prefill step) a busy engine reads 0 at many scrapes.
    """
    if ctx.expected is None or not s.judged or not is_num(s.running):
        return None
    exp = ctx.expected(s)
    if exp is None:
        return None
    ttft, decode = live_ttft(s), live_decode(s)
    ttft_live = ttft_over = None
    if ttft.value is not None and exp.ttft_s:
        ttft_live = ttft.value
        ttft_over = (nearest(ttft.value, ttft.interval, exp.ttft_s) / exp.ttft_s - 1.0) * 100.0
    decode_live = decode_under = None
    if decode.value is not None and exp.decode_tps:
        decode_live = decode.value
        near = nearest(decode.value, decode.interval, exp.decode_tps)
        decode_under = (1.0 - near / exp.decode_tps) * 100.0
    return Deficit(
        ttft_live,
        exp.ttft_s,
        ttft_over,
        decode_live,
        exp.decode_tps,
        decode_under,
        exp.load or f"{exp.prompt_tokens:,.0f} prompt tokens × {exp.concurrency:g}",
        exp.ttft_high_s,
        exp.decode_low_tps,
        exp.window_s,
        ttft.label,
        decode.label,
        ttft.note,
        exp.model_note,
        ttft.interval,
        decode.interval,
    )


def nearest(value: float, interval: tuple[float, float] | None, expected: float) -> float:
    """The point of the live figure's interval nearest ``expected`` (``value`` itself when
    exact): a bucket holding the expected value deviates by nothing."""
    if interval is None:
        return value
    low, high = interval
    return low if low > expected else high if high < expected else expected


NO_CAUSE = (
    "no cause found: no queueing, pool pressure, speculative acceptance drop or slow node "
    "in the window"
)


def _short_past(ctx: RuleContext, s: EngineSample) -> str | None:
    """A node slow for less than half the window and back now: said, not blamed."""
    past = past_slow(ctx, s)
    if past is None:
        return None
    return (
        "no cause found: no queueing, pool pressure or speculative acceptance drop, and no "
        f"node slow for half the window ({past.node} was slow for {past.slow_s:,.0f} s of it, "
        f"back for {past.back_s:,.0f} s)"
    )


def _not_yet(ctx: RuleContext, s: EngineSample) -> str | None:
    """A TP node slow now whose slow run does not yet cover enough of the window to explain
    it: said, so the operator is not told there is none while another alert names it."""
    node = slowest(ctx, s)
    if node is None:
        return None
    start = s.window_start_s if s.window_start_s is not None else s.time_s - ctx.thresholds.hold_s
    span = max(s.time_s - start, 1e-9)
    overlap = max(0.0, s.time_s - max(node.since_s, start))
    if is_num(s.window_s) and s.window_s:  # on the window's own clock, as its "last N s"
        overlap, span = overlap / span * s.window_s, float(s.window_s)
    return (
        f"no cause found yet: no queueing, pool pressure or speculative acceptance drop; "
        f"{node.view.node} is slow ({', '.join(node.phrases)}) but only for {overlap:,.0f} s "
        f"of the {span:,.0f} s window (named once it covers half)"
    )


def _cause_text(
    ctx: RuleContext, s: EngineSample, figure: str
) -> tuple[str, dict[str, float], bool]:
    """The deficit's cause as the message says it, its numbers, and whether it is a TP node
    slow now over enough of the window (the deficit is then critical)."""
    cause = explain(ctx, s, figure)
    if cause is None:
        return _not_yet(ctx, s) or _short_past(ctx, s) or NO_CAUSE, {}, False
    if cause.kind == "node" and cause.node is not None:
        node = slowest(ctx, s)
        if node is None or node.view.node != cause.node:  # slow in the window, back now
            return f"cause: {cause.text}", dict(cause.values), False
        return f"cause: {cause.text}: {', '.join(node.phrases)}", dict(cause.values), True
    return f"cause: {cause.text}", dict(cause.values), False


@rule({"expected.ttft": Scope.ENGINE, "expected.decode": Scope.ENGINE})
def expected_rule(ctx: RuleContext) -> Iterator[Finding]:
    """One alert per figure (``expected.ttft``, ``expected.decode``) and engine: a warning
    that names its cause, or says it found none; critical when the cause is a tensor-parallel
    node slow now (the alert escalates, its text naming the node; ``tp.straggler`` is the
    node's own alert and repeats no deficit numbers)."""
    limit = ctx.thresholds.expected_deficit_pct
    for s in ok_engines(ctx):
        d = deficit(ctx, s)
        if d is None:
            continue
        at = f"at {d.load}"
        model = f"; {d.model_note}" if d.model_note else ""
        window = {"window_s": d.window_s} if d.window_s is not None else {}
        if d.ttft_past(limit) and d.ttft_over_pct is not None and d.ttft_live_s:
            why, values, node = _cause_text(ctx, s, "ttft")
            note = f"; {d.ttft_note}" if d.ttft_note else ""
            yield engine_finding(
                s,
                "expected.ttft",
                Severity.CRITICAL if node else Severity.WARNING,
                f"TTFT {d.ttft_over_pct:.0f} % above expected "
                f"({d.ttft_label} {d.ttft_text()} vs profile TTFT "
                f"{d.ttft_expected_s:.2f} s {at}{d.band_text('ttft')}{note}{model}); {why}",
                {
                    "ttft_s": d.ttft_live_s,
                    "expected_ttft_s": d.ttft_expected_s or 0.0,
                    "deficit_pct": d.ttft_over_pct,
                    **window,
                    **values,
                },
                score=round(d.ttft_over_pct),
            )
        if d.decode_past(limit) and d.decode_under_pct is not None:
            why, values, node = _cause_text(ctx, s, "decode")
            yield engine_finding(
                s,
                "expected.decode",
                Severity.CRITICAL if node else Severity.WARNING,
                f"decode {d.decode_under_pct:.0f} % below expected "
                f"({d.decode_label} {live_text(d.decode_live_tps, d.decode_bucket_tps, '')}"
                f" vs profile {d.decode_expected_tps:.1f} tok/s per stream {at}"
                f"{d.band_text('decode')}{model}); {why}",
                {
                    "decode_tps": d.decode_live_tps or 0.0,
                    "expected_decode_tps": d.decode_expected_tps or 0.0,
                    "deficit_pct": d.decode_under_pct,
                    **window,
                    **values,
                },
                score=round(d.decode_under_pct),
            )


@rule({"tp.straggler": Scope.ENGINE_NODE})
def straggler_rule(ctx: RuleContext) -> Iterator[Finding]:
    """Name the tensor-parallel member that holds a loaded engine back: a warning about the
    node (its clock and why). The engine's deficit is the ``expected.*`` alert's, which
    escalates to critical naming this node when it explains it (one alert per figure, never
    a second one with other numbers). Never while the pool or speculation explains the
    engine's state, and never from a counter alone."""
    limit = ctx.thresholds.expected_deficit_pct
    for s in ok_engines(ctx):
        group = ctx.tp_groups.get(s.engine, ())
        if not group or not busy(s):  # the window's load: the gauge reads 0 between batches
            continue
        node = slowest(ctx, s)
        if node is None or engine_cause(ctx, s, "decode") is not None:
            continue
        view = node.view
        clock = view.gpu.sm_clock_mhz
        where = f"{view.node} at {clock:,.0f} MHz" if is_num(clock) else view.node
        values: dict[str, float] = {}
        if is_num(clock):
            values["sm_clock_mhz"] = float(clock)
        message = f"held back by {where}: {', '.join(node.phrases)}"
        d = deficit(ctx, s)
        cause = node_cause(ctx, s, node)
        figures = []
        if d is not None and d.decode_past(limit):
            figures.append("decode")
        if d is not None and d.ttft_past(limit):
            figures.append("TTFT")
        if figures and cause is not None and cause.overlap_s is not None:
            values["overlap_s"] = cause.overlap_s
            message += (
                f"; {cause.text.removeprefix(view.node + ' ')}: the cause of the engine's "
                f"{' and '.join(figures)} deficit (expected.{figures[0].lower()})"
            )
        yield engine_finding(
            s,
            "tp.straggler",
            Severity.WARNING,
            message,
            values,
            node=view.node,
            score=drop_score(view),
        )


RULES = (expected_rule, straggler_rule)
