"""Node and GPU rules: throttling, temperature, the hidden low-power state, node failures.

Throttling on GB10 is judged against the GPU's *own* loaded baseline (it sustains
2.4–2.55 GHz under load against a 3003 MHz max, DESIGN.md §4), never against max clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from sparktop.alerts.context import Finding, RuleContext, Scope, rule
from sparktop.alerts.counters import REASON_COUNTERS, describe_counter
from sparktop.alerts.model import Severity
from sparktop.cluster import LOADED_UTIL_PCT
from sparktop.model import GpuSample, NodeSample, NodeState, failure_text, is_num

CRITICAL_NODE_STATES = frozenset(
    {
        NodeState.UNREACHABLE,
        NodeState.SSH_NOT_ANSWERING,
        NodeState.ERROR,
        NodeState.HOST_KEY,
        NodeState.AUTH,
    }
)
"""Failures that mean the node cannot be reached at all: ``node.down``, critical. In the
others the node answers (over SSH, or this machine) but its GPUs cannot be read (no driver,
NVML failing, a hung or garbled nvidia-smi): ``node.gpu_unavailable``, a warning."""


def gpu_label(node: str, gpu: GpuSample) -> str:
    """Readable GPU subject: ``spark-3/gpu0``."""
    return f"{node}/gpu{gpu.index}"


def hhmmss(time_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_s))


@dataclass(frozen=True, slots=True)
class GpuView:
    """One GPU's readings with the baseline and counter growth the rules compare them to."""

    node: str
    gpu: GpuSample
    baseline_mhz: float | None
    counter_growth_s: dict[str, float]

    @property
    def reference(self) -> tuple[float, str] | None:
        """The clock to judge against and its name: the baseline, or the max clock when
        there is no baseline or the learnt one is implausibly low for a loaded GPU (under
        half the max: learnt during a sag)."""
        ref = self.baseline_mhz
        top = float(self.gpu.max_sm_clock_mhz) if is_num(self.gpu.max_sm_clock_mhz) else None
        if top is not None and (ref is None or ref < 0.5 * top):
            return top, "max"
        return (ref, "baseline") if ref is not None else None

    @property
    def clock_ratio(self) -> float | None:
        """SM clock ÷ :attr:`reference`."""
        ref = self.reference
        if ref is None or ref[0] <= 0 or not is_num(self.gpu.sm_clock_mhz):
            return None
        return float(self.gpu.sm_clock_mhz) / ref[0]


def reference_mhz(own: float | None, profile: float | None, gpu: GpuSample) -> float | None:
    """The loaded clock to compare with: the GPU's own baseline, but never below the
    profile's (a sag that lasts long enough drags the learnt baseline down with it). A
    profile baseline above this GPU's max clock was measured on other hardware: ignored."""
    if profile is not None and is_num(gpu.max_sm_clock_mhz) and profile > gpu.max_sm_clock_mhz:
        profile = None
    values = [v for v in (own, profile) if v is not None]
    return max(values) if values else None


def gpu_views(ctx: RuleContext) -> list[GpuView]:
    """Every GPU of every reachable node, with its baseline and counter growth (built once
    per context: every GPU rule and each engine's straggler search reads them)."""
    if ctx.gpu_views is None:
        ctx.gpu_views = [
            GpuView(
                sample.node,
                gpu,
                reference_mhz(
                    ctx.state.baseline_mhz(sample.node, gpu.key), ctx.profile_baseline_mhz, gpu
                ),
                ctx.counters.growth_s(sample.node, gpu.key),
            )
            for sample in ctx.state.nodes.values()
            if sample.ok
            for gpu in sample.gpus
        ]
    return ctx.gpu_views


def hidden_low_power(ctx: RuleContext, view: GpuView) -> bool:
    """High utilisation, clock and power far below normal, and no slowdown reason bit."""
    t, g = ctx.thresholds, view.gpu
    ratio = view.clock_ratio
    return (
        is_num(g.utilization_pct)
        and g.utilization_pct >= t.low_power_util_pct
        and is_num(g.power_w)
        and g.power_w < t.low_power_power_w
        and ratio is not None
        and ratio < t.low_power_clock_ratio
        and not g.slowdowns
    )


def clock_drop_pct(ctx: RuleContext, view: GpuView) -> float | None:
    """How far (%) a loaded GPU's SM clock sits below its baseline, past the threshold."""
    g = view.gpu
    base = view.baseline_mhz
    if base is None or not is_num(g.sm_clock_mhz) or not is_num(g.utilization_pct):
        return None
    if g.utilization_pct < LOADED_UTIL_PCT:
        return None
    drop = (1.0 - float(g.sm_clock_mhz) / base) * 100.0
    return drop if drop >= ctx.thresholds.clock_drop_pct else None


def slowdown_evidence(ctx: RuleContext, view: GpuView) -> list[str]:
    """Active slowdown reasons and counter growth, one phrase per reason."""
    window = ctx.thresholds.counter_window_s
    grown = dict(view.counter_growth_s)
    evidence = []
    for reason in view.gpu.slowdowns:
        counter = REASON_COUNTERS.get(reason)
        if counter is not None and counter in grown:
            evidence.append(describe_counter(counter, grown.pop(counter), window))
        else:
            evidence.append(f"{reason} active")  # nvidia-smi's name, as snapshot's
    for counter, secs in sorted(grown.items(), key=lambda kv: -kv[1]):
        evidence.append(describe_counter(counter, secs, window))
    return evidence


def slow_now(ctx: RuleContext, view: GpuView) -> bool:
    """The newest reading itself shows the slowdown: an active slowdown reason, a clock drop
    past ``clock_drop_pct``, or the hidden low-power pattern (not only counter growth, which
    may be the last tick of a throttle that has just ended)."""
    return (
        bool(view.gpu.slowdowns)
        or hidden_low_power(ctx, view)
        or clock_drop_pct(ctx, view) is not None
    )


def drop_score(view: GpuView) -> float:
    """How far the SM clock sits below the reference clock, in whole % as messages show it
    (0 when at or above it): the :attr:`Finding.score` of the clock rules, so a recovering
    alert shows its slowest moment (the latest of equally slow ones: clock noise of a few MHz
    does not pick an early reading with little counter evidence)."""
    ratio = view.clock_ratio
    return float(max(0, round((1.0 - ratio) * 100.0))) if ratio is not None else 0.0


def throttle_evidence(ctx: RuleContext, view: GpuView) -> list[str]:
    """Why this GPU counts as throttling (empty when it does not)."""
    evidence = slowdown_evidence(ctx, view)
    drop = None if hidden_low_power(ctx, view) else clock_drop_pct(ctx, view)
    if drop is not None and view.baseline_mhz is not None:
        evidence.append(f"{drop:.0f} % below its {view.baseline_mhz:,.0f} MHz baseline")
    return evidence


def _clock_text(g: GpuSample) -> str:
    parts = []
    if is_num(g.sm_clock_mhz):
        parts.append(f"{g.sm_clock_mhz:,.0f} MHz")
    if is_num(g.temperature_c):
        parts.append(f"{g.temperature_c:.0f} °C")
    if is_num(g.power_w):
        parts.append(f"{g.power_w:.1f} W")
    return ", ".join(parts)


def _gpu_values(view: GpuView) -> dict[str, float]:
    g = view.gpu
    out = {
        name: float(getattr(g, name))
        for name in ("sm_clock_mhz", "temperature_c", "power_w", "utilization_pct")
        if is_num(getattr(g, name))
    }
    if view.baseline_mhz is not None:
        out["baseline_mhz"] = view.baseline_mhz
    for counter, secs in view.counter_growth_s.items():
        out[counter.replace("_us", "_s_grown")] = secs
    return out


@rule({"gpu.throttle": Scope.NODE})
def throttle_rule(ctx: RuleContext) -> Iterator[Finding]:
    for view in gpu_views(ctx):
        evidence = throttle_evidence(ctx, view)
        if not evidence:
            continue
        label = gpu_label(view.node, view.gpu)
        if slow_now(ctx, view):
            message = f"throttling at {_clock_text(view.gpu)}: {'; '.join(evidence)}"
        else:  # only a counter that ticked since the last poll: say the clock is back
            message = f"throttled recently: {'; '.join(evidence)} (now {_clock_text(view.gpu)})"
        yield Finding(
            rule="gpu.throttle",
            subject=label,
            severity=Severity.WARNING,
            message=message,
            node=view.node,
            gpu=view.gpu.key,
            values=_gpu_values(view),
            score=drop_score(view),
        )


@rule({"gpu.temperature": Scope.NODE})
def temperature_rule(ctx: RuleContext) -> Iterator[Finding]:
    limit = ctx.thresholds.temperature_c
    for view in gpu_views(ctx):
        temp = view.gpu.temperature_c
        if not is_num(temp) or temp <= limit:
            continue
        label = gpu_label(view.node, view.gpu)
        yield Finding(
            rule="gpu.temperature",
            subject=label,
            severity=Severity.WARNING,
            message=f"{temp:.0f} °C, over the {limit:.0f} °C limit ({_clock_text(view.gpu)})",
            node=view.node,
            gpu=view.gpu.key,
            values=_gpu_values(view),
            score=float(round(temp)),
        )


@rule({"gpu.hidden_low_power": Scope.NODE})
def hidden_low_power_rule(ctx: RuleContext) -> Iterator[Finding]:
    for view in gpu_views(ctx):
        if not hidden_low_power(ctx, view):
            continue
        g = view.gpu
        label = gpu_label(view.node, g)
        reference = view.reference
        ref = f"{reference[0]:,.0f} MHz {reference[1]}" if reference else "its normal clock"
        yield Finding(
            rule="gpu.hidden_low_power",
            subject=label,
            severity=Severity.WARNING,
            message=(
                f"possible hidden low-power state: {g.sm_clock_mhz:,.0f} MHz "
                f"(vs {ref}) at {g.utilization_pct:.0f} % utilisation and {g.power_w:.1f} W, "
                "no clock-event reason reported"
            ),
            node=view.node,
            gpu=g.key,
            values=_gpu_values(view),
            score=drop_score(view),
        )


@rule({"node.down": Scope.SOURCE, "node.gpu_unavailable": Scope.SOURCE})
def node_down_rule(ctx: RuleContext) -> Iterator[Finding]:
    for sample in ctx.state.nodes.values():
        if sample.ok:
            continue
        yield node_down_finding(sample)


def node_down_finding(sample: NodeSample) -> Finding:
    """``node.down`` (critical) for a node that cannot be reached, ``node.gpu_unavailable``
    (warning) for one that answers without GPU data (:data:`CRITICAL_NODE_STATES`)."""
    since = sample.since_s if sample.since_s is not None else sample.time_s
    message = failure_text(sample.state.value, sample.message, since)
    values = {"since_s": since}
    if sample.state in CRITICAL_NODE_STATES:
        return Finding(
            rule="node.down", subject=sample.node, severity=Severity.CRITICAL,
            message=message, node=sample.node, values=values,
        )  # fmt: skip
    return Finding(
        rule="node.gpu_unavailable", subject=sample.node, severity=Severity.WARNING,
        message=message, node=sample.node, values=values,
    )  # fmt: skip


RULES = (throttle_rule, temperature_rule, hidden_low_power_rule, node_down_rule)
