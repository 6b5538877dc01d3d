"""Expected-row rules: live TTFT / decode against the sweep profile, and the TP straggler.

The expected figures are computed for the live window's own load and combined as the live
statistic is (:mod:`sparktop.sweep.matched`): the time-weighted running counts and the prompt
lengths that finished in the window. Live per-stream decode is 1 / mean ITL
(``itl_mean_s``: Δ``_sum`` / Δ``_count`` of ``vllm:inter_token_latency_seconds`` over the
window), compared with the profile's per-request decode column. Not ITL p50: with vLLM's
default 10 / 25 ms bucket edges every rate from 40 to 100 tok/s reads the same ~18 ms (an
ITL p50 known only as "above the last edge" still proves a deficit). Not the generation rate
÷ running either: with long prompts most running requests are in prefill, so that quotient
sits far below the per-stream rate on a healthy engine (the seeds' lesson: decode barely
moves while end-to-end throughput collapses).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sparktop.alerts.context import Finding, RuleContext
from sparktop.alerts.engine_rules import engine_finding, ok_engines, windowed
from sparktop.alerts.gpu_rules import (
    GpuView,
    drop_score,
    gpu_views,
    hidden_low_power,
    slow_now,
    slowdown_evidence,
    throttle_evidence,
)
from sparktop.alerts.model import Severity
from sparktop.model import EngineSample, Quantile, is_num


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

    def ttft_past(self, limit_pct: float) -> bool:
        """TTFT at least ``limit_pct`` above expected and above the band's top."""
        if self.ttft_over_pct is None or self.ttft_live_s is None:
            return False
        above_band = self.ttft_high_s is None or self.ttft_live_s > self.ttft_high_s
        return self.ttft_over_pct >= limit_pct and above_band

    def decode_past(self, limit_pct: float) -> bool:
        """Decode at least ``limit_pct`` below expected and below the band's bottom."""
        if self.decode_under_pct is None or self.decode_live_tps is None:
            return False
        below_band = self.decode_low_tps is None or self.decode_live_tps < self.decode_low_tps
        return self.decode_under_pct >= limit_pct and below_band

    def band_text(self, which: str) -> str:
        """``", band ≤ 7.70 s"`` / ``", band ≥ 48.1 tok/s"`` for the message ("" without)."""
        if which == "ttft" and self.ttft_high_s is not None:
            return f", band ≤ {self.ttft_high_s:.2f} s"
        if which == "decode" and self.decode_low_tps is not None:
            return f", band ≥ {self.decode_low_tps:.1f} tok/s"
        return ""


def live_itl_s(s: EngineSample) -> float | None:
    """Per-token decode latency over the window (s): the mean, else a p50 beyond the last
    bucket edge (a lower bound); None when unknown or only lifetime figures exist."""
    if is_num(s.itl_mean_s) and s.itl_mean_s > 0 and windowed(s, "itl_mean_s"):
        return float(s.itl_mean_s)
    q = s.itl_p50
    if isinstance(q, Quantile) and q.bound == ">" and q.value_s > 0 and windowed(s, "itl_p50"):
        return q.value_s
    return None


def deficit(ctx: RuleContext, s: EngineSample) -> Deficit | None:
    """Compare live TTFT p50 and per-stream decode with the profile's expected row."""
    if ctx.expected is None or not s.ok or not is_num(s.running) or s.running < 1:
        return None
    exp = ctx.expected(s)
    if exp is None:
        return None
    ttft_live = ttft_over = None
    q = s.ttft_p50
    # "<x" only bounds TTFT from above: it can never show a deficit.
    if isinstance(q, Quantile) and q.bound != "<" and exp.ttft_s and windowed(s, "ttft_p50"):
        ttft_live = q.value_s
        ttft_over = (ttft_live / exp.ttft_s - 1.0) * 100.0
    decode_live = decode_under = None
    itl_s = live_itl_s(s)
    if itl_s is not None and exp.decode_tps:
        decode_live = 1.0 / itl_s
        decode_under = (1.0 - decode_live / exp.decode_tps) * 100.0
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
    )


def expected_rule(ctx: RuleContext) -> Iterator[Finding]:
    limit = ctx.thresholds.expected_deficit_pct
    for s in ok_engines(ctx):
        d = deficit(ctx, s)
        if d is None:
            continue
        at = f"at {d.load}"
        window = {"window_s": d.window_s} if d.window_s is not None else {}
        if d.ttft_past(limit) and d.ttft_over_pct is not None and d.ttft_live_s:
            yield engine_finding(
                s,
                "expected.ttft",
                Severity.WARNING,
                f"TTFT {d.ttft_over_pct:.0f} % above expected "
                f"(p50 {d.ttft_live_s:.2f} s vs profile ttft_s {d.ttft_expected_s:.2f} s {at}"
                f"{d.band_text('ttft')})",
                {
                    "ttft_s": d.ttft_live_s,
                    "expected_ttft_s": d.ttft_expected_s or 0.0,
                    "deficit_pct": d.ttft_over_pct,
                    **window,
                },
                score=round(d.ttft_over_pct),
            )
        if d.decode_past(limit) and d.decode_under_pct is not None:
            yield engine_finding(
                s,
                "expected.decode",
                Severity.WARNING,
                f"decode {d.decode_under_pct:.0f} % below expected "
                f"(1/mean ITL {d.decode_live_tps:.1f} vs profile decode_tps "
                f"{d.decode_expected_tps:.1f} tok/s per stream {at}{d.band_text('decode')})",
                {
                    "decode_tps": d.decode_live_tps or 0.0,
                    "expected_decode_tps": d.decode_expected_tps or 0.0,
                    "deficit_pct": d.decode_under_pct,
                    **window,
                },
                score=round(d.decode_under_pct),
            )


def find_straggler(ctx: RuleContext, group: tuple[str, ...]) -> tuple[GpuView, list[str]] | None:
    """The slowest GPU of ``group`` with evidence of a slowdown, and that evidence."""
    worst: tuple[float, GpuView, list[str]] | None = None
    for view in gpu_views(ctx):
        if view.node not in group:
            continue
        if hidden_low_power(ctx, view):
            evidence = [
                *slowdown_evidence(ctx, view),
                "possible hidden low-power state "
                f"({view.gpu.power_w:.1f} W at {view.gpu.utilization_pct:.0f} %)",
            ]
        else:
            evidence = throttle_evidence(ctx, view)
        if not evidence:
            continue
        ratio = view.clock_ratio if view.clock_ratio is not None else 1.0
        if worst is None or ratio < worst[0]:
            worst = (ratio, view, evidence)
    return None if worst is None else (worst[1], worst[2])


def straggler_rule(ctx: RuleContext) -> Iterator[Finding]:
    """Name the tensor-parallel member that holds a loaded engine back."""
    limit = ctx.thresholds.expected_deficit_pct
    for s in ok_engines(ctx):
        group = ctx.tp_groups.get(s.engine, ())
        if not group or not is_num(s.running) or s.running < 1:
            continue
        found = find_straggler(ctx, group)
        if found is None:
            continue
        view, evidence = found
        clock = view.gpu.sm_clock_mhz
        where, tail = view.node, ""
        if is_num(clock) and slow_now(ctx, view):
            where = f"{view.node} at {clock:,.0f} MHz"
        elif is_num(clock):  # only a slowdown counter ticked: the clock itself is back
            tail = f" (clock now {clock:,.0f} MHz)"
        d = deficit(ctx, s)
        under = d.decode_under_pct if d is not None else None
        values = {"deficit_pct": under} if under is not None else {}
        if is_num(clock):
            values["sm_clock_mhz"] = float(clock)
        if under is not None and d is not None and d.decode_past(limit):
            message = f"decode {under:.0f} % below expected; {where}, {', '.join(evidence)}{tail}"
            severity = Severity.CRITICAL
        else:
            message = f"held back by {where}: {', '.join(evidence)}{tail}"
            severity = Severity.WARNING
        yield engine_finding(
            s, "tp.straggler", severity, message, values, node=view.node, score=drop_score(view)
        )


RULES = (expected_rule, straggler_rule)
