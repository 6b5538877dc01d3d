"""Engine rules: availability and KV-pool exhaustion.

Inputs are :class:`~sparktop.model.EngineSample` fields (vLLM ``/metrics``): ``kv_usage`` is
a fraction 0–1 (``vllm:kv_cache_usage_perc``), ``running``/``waiting`` request counts,
``preemptions_per_s`` the rate of ``vllm:num_preemptions_total``, ``decode_tps`` the rate of
``vllm:generation_tokens_total`` summed over running requests (per stream = ÷ running).
"""

from __future__ import annotations

from collections.abc import Iterator

from sparktop.alerts.context import Finding, RuleContext
from sparktop.alerts.gpu_rules import (
    failure_text,
)
from sparktop.alerts.model import Severity
from sparktop.model import EngineSample, EngineState, is_num

MIN_SLOPE_POINTS = 5
MIN_SLOPE_SPAN_S = 10.0


def engine_finding(
    sample: EngineSample,
    rule: str,
    severity: Severity,
    message: str,
    values: dict[str, float],
    *,
    node: str | None = None,
    instant: bool = False,
) -> Finding:
    return Finding(
        rule=rule,
        subject=sample.engine,
        severity=severity,
        message=message,
        engine=sample.engine,
        node=node,
        values=values,
        instant=instant,
    )


def windowed(sample: EngineSample, name: str) -> bool:
    """True when ``name`` covers the recent window, not the server's lifetime (first scrape)."""
    return name not in sample.since_start


def ok_engines(ctx: RuleContext) -> Iterator[EngineSample]:
    return (s for s in ctx.state.engines.values() if s.ok)


def availability_rule(ctx: RuleContext) -> Iterator[Finding]:
    for s in ctx.state.engines.values():
        if s.restarted:
            yield engine_finding(
                s,
                "engine.restarted",
                Severity.WARNING,
                "server restarted (counters went down; rates start again)",
                {},
                instant=True,
            )
        if s.state is EngineState.STALE:
            yield engine_finding(
                s,
                "engine.stale",
                Severity.WARNING,
                f"gauges stale: {s.message}"
                if s.message
                else "gauges stale: they stopped moving while no counter moved",
                {},
            )
        elif not s.ok:
            since = s.since_s if s.since_s is not None else s.time_s
            yield engine_finding(
                s,
                "engine.down",
                Severity.WARNING,
                failure_text(s.state.value, since, s.message),
                {"since_s": since},
            )


def _pct(fraction: float) -> float:
    return fraction * 100.0


def pool_rule(ctx: RuleContext) -> Iterator[Finding]:
    t = ctx.thresholds
    for s in ok_engines(ctx):
        kv = _pct(float(s.kv_usage)) if is_num(s.kv_usage) else None
        waiting = float(s.waiting) if is_num(s.waiting) else None
        running = float(s.running) if is_num(s.running) else None
        limit = float(s.max_num_seqs) if is_num(s.max_num_seqs) else ctx.max_num_seqs.get(s.engine)
        values = {
            k: v
            for k, v in (
                ("kv_usage_pct", kv),
                ("waiting", waiting),
                ("running", running),
                ("max_num_seqs", limit),
            )
            if v is not None
        }
        queued = waiting is not None and waiting > 0
        if kv is not None and kv >= t.kv_usage_pct:
            critical = kv >= t.kv_critical_pct and queued
            pool = (
                f" ({s.kv_used_tokens:,.0f} of {s.kv_pool_tokens:,.0f} tokens)"
                if is_num(s.kv_used_tokens) and is_num(s.kv_pool_tokens)
                else ""
            )
            wait = f", {waiting:.0f} waiting" if queued else ""
            yield engine_finding(
                s,
                "kv.usage",
                Severity.CRITICAL if critical else Severity.WARNING,
                f"KV cache {kv:.1f} % full{pool}{wait}",
                values,
            )
        if queued and kv is not None and kv >= t.kv_usage_pct:
            yield engine_finding(
                s,
                "queue.pool_bound",
                Severity.WARNING,
                f"pool-bound: {waiting:.0f} waiting with the KV cache "
                f"{kv:.1f} % full ({running or 0:.0f} running)",
                values,
            )
        elif queued and running is not None and limit is not None and running >= limit:
            kv_text = f", KV {kv:.0f} %" if kv is not None else ""
            yield engine_finding(
                s,
                "queue.scheduler_bound",
                Severity.WARNING,
                f"scheduler-bound: {waiting:.0f} waiting with running "
                f"{running:.0f} = max_num_seqs {limit:.0f}{kv_text}",
                values,
            )
        rate = s.preemptions_per_s
        if is_num(rate) and rate > 0 and windowed(s, "preemptions_per_s"):
            kv_text = f" (KV {kv:.0f} %)" if kv is not None else ""
            yield engine_finding(
                s,
                "kv.preemptions",
                Severity.WARNING,
                f"preempting {rate:.2f} requests/s{kv_text}",
                {**values, "preemptions_per_s": float(rate)},
            )


def kv_slope(ctx: RuleContext, engine: str) -> tuple[float, float] | None:
    """Least-squares KV-usage slope (fraction/s) over the window and the newest usage."""
    series = ctx.state.history.get(engine, "kv_usage")
    last = series.last
    if last is None:
        return None
    points = series.since(last[0] - ctx.thresholds.slope_window_s)
    if len(points) < MIN_SLOPE_POINTS or points[-1][0] - points[0][0] < MIN_SLOPE_SPAN_S:
        return None
    n = len(points)
    mean_t = sum(p[0] for p in points) / n
    mean_v = sum(p[1] for p in points) / n
    var = sum((p[0] - mean_t) ** 2 for p in points)
    if var <= 0:
        return None
    slope = sum((p[0] - mean_t) * (p[1] - mean_v) for p in points) / var
    return slope, last[1]


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s"


def exhaustion_rule(ctx: RuleContext) -> Iterator[Finding]:
    for s in ok_engines(ctx):
        fit = kv_slope(ctx, s.engine)
        if fit is None:
            continue
        slope, usage = fit
        if slope <= 0 or usage >= 1.0:
            continue
        eta = (1.0 - usage) / slope
        if eta > ctx.thresholds.exhaustion_horizon_s:
            continue
        yield engine_finding(
            s,
            "kv.exhaustion",
            Severity.WARNING,
            f"KV pool full in ~{_duration(eta)} at "
            f"+{_pct(slope):.2f} %/s (now {_pct(usage):.1f} %)",
            {"eta_s": eta, "slope_pct_per_s": _pct(slope), "kv_usage_pct": _pct(usage)},
        )


RULES = (availability_rule, pool_rule, exhaustion_rule)
