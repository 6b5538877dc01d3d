"""Engine rules: availability, the KV pool and its queue, preemptions, time to a full pool.

Inputs are :class:`~sparktop.model.EngineSample` fields (vLLM ``/metrics``): ``kv_usage`` is
a fraction 0–1 (``vllm:kv_cache_usage_perc``), ``running``/``waiting`` request counts,
``preemptions_per_s`` the rate of ``vllm:num_preemptions_total``, ``decode_tps`` the rate of
``vllm:generation_tokens_total`` summed over running requests (per stream = ÷ running).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sparktop.alerts.context import Finding, RuleContext, Scope, rule
from sparktop.alerts.model import Severity
from sparktop.model import ANSWERED, EngineSample, EngineState, RankStats, failure_text, is_num

MIN_SLOPE_POINTS = 8
MIN_SPAN_SHARE = 0.9
"""The KV history must cover this share of ``slope_window_s`` (polls are not exactly on time)."""


def engine_finding(
    sample: EngineSample,
    rule: str,
    severity: Severity,
    message: str,
    values: dict[str, float],
    *,
    node: str | None = None,
    instant: bool = False,
    score: float = 0.0,
    clear_after_s: float | None = None,
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
        score=score,
        clear_after_s=clear_after_s,
    )


def windowed(sample: EngineSample, name: str) -> bool:
    """True when ``name`` covers the recent window, not the server's lifetime (first scrape)."""
    return name not in sample.since_start


def stalled_for(s: EngineSample, stall_s: float) -> float | None:
    """Seconds the engine has been stalled (no token and the KV still for at least
    ``stall_s`` with requests running, its page answered), else None."""
    if s.state not in ANSWERED or not is_num(s.running) or s.running < 1:
        return None
    if s.no_tokens_s is None or s.kv_still_s is None:
        return None
    still = min(s.no_tokens_s, s.kv_still_s)
    return still if still >= stall_s else None


def stalled_rank(s: EngineSample, stall_s: float) -> tuple[RankStats, float] | None:
    """The data-parallel rank stalled longest (running requests, no token and its KV still
    for at least ``stall_s``) while the server's page answers, with its seconds; None when
    none is (or the server has one rank: :func:`stalled_for` says it)."""
    if s.state not in ANSWERED or len(s.ranks) < 2:
        return None
    found: tuple[RankStats, float] | None = None
    for rank in s.ranks:
        if not is_num(rank.running) or rank.running < 1:
            continue
        if rank.no_tokens_s is None or rank.kv_still_s is None:
            continue
        still = min(rank.no_tokens_s, rank.kv_still_s)
        if still >= stall_s and (found is None or still > found[1]):
            found = (rank, still)
    return found


def ok_engines(ctx: RuleContext) -> Iterator[EngineSample]:
    return (s for s in ctx.state.engines.values() if s.judged)


@rule(
    {
        "engine.restarted": Scope.SOURCE,
        "engine.stale": Scope.SOURCE,
        "engine.degraded": Scope.SOURCE,
        "engine.down": Scope.SOURCE,
    }
)
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
        if s.state is EngineState.STALE and stalled_for(s, ctx.thresholds.stall_s) is None:
            # Frozen gauges with requests running and no token: engine.stalled says it.
            yield engine_finding(
                s,
                "engine.stale",
                Severity.WARNING,
                f"gauges stale: {s.message}"
                if s.message
                else "gauges stale: they stopped moving while no counter moved",
                {},
            )
        elif s.state is EngineState.DEGRADED:
            yield engine_finding(s, "engine.degraded", Severity.WARNING, s.message, {})
        elif not s.ok:
            since = s.since_s if s.since_s is not None else s.time_s
            yield engine_finding(
                s,
                "engine.down",
                Severity.WARNING,
                failure_text(s.state.value, s.message, since),
                {"since_s": since},
            )


def _pct(fraction: float) -> float:
    return fraction * 100.0


@rule(
    {
        "kv.usage": Scope.ENGINE,
        "queue.pool_bound": Scope.ENGINE,
        "queue.scheduler_bound": Scope.ENGINE,
        "kv.preemptions": Scope.ENGINE,
    }
)
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
                score=round(kv, 1),
            )
        if queued and kv is not None and kv >= t.kv_usage_pct:
            yield engine_finding(
                s,
                "queue.pool_bound",
                Severity.WARNING,
                f"pool-bound: {waiting:.0f} waiting with the KV cache "
                f"{kv:.1f} % full ({running or 0:.0f} running)",
                values,
                score=waiting or 0.0,
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
                score=waiting or 0.0,
            )
        start = s.time_s - float(s.window_s) if s.window_s else s.time_s
        peak = [v for _, v in ctx.state.history.get(s.engine, "kv_usage").since(start)]
        finding = preemption_finding(s, max(peak, default=None), values)
        if finding is not None:
            yield finding


def preemption_finding(
    s: EngineSample, kv_peak: float | None, values: dict[str, float]
) -> Finding | None:
    """Preemptions in the sample's rate window (the one the engine panel shows), never from
    lifetime counters. The window already smooths the rate, so the alert clears as soon as
    the windowed rate is back to 0 (no extra ``hold_s``). ``kv_peak``: the highest KV usage
    (fraction) any scrape of that window read: preemption is what a full pool does, and the
    KV now may be after the pool drained (None: this sample's)."""
    rate = s.preemptions_per_s
    if not (is_num(rate) and rate > 0 and windowed(s, "preemptions_per_s")):
        return None
    if kv_peak is None and is_num(s.kv_usage):
        kv_peak = float(s.kv_usage)
    kv = _pct(kv_peak) if kv_peak is not None else None
    values = {**values, "kv_peak_pct": kv} if kv is not None else values
    kv_note = f"KV {kv:.0f} %" if kv is not None else ""
    if s.window_s:
        count = round(rate * s.window_s)
        kv_note = f"KV up to {kv:.0f} % in that window" if kv is not None else ""
        detail = ", ".join(x for x in (f"{rate:.2f}/s", kv_note) if x)
        text = (
            f"preempted {count} request{'' if count == 1 else 's'} in the last "
            f"{s.window_s:.0f} s ({detail})"
        )
    else:
        text = f"preempting {rate:.2f} requests/s" + (f" ({kv_note})" if kv_note else "")
    return engine_finding(
        s,
        "kv.preemptions",
        Severity.WARNING,
        text,
        {**values, "preemptions_per_s": float(rate)},
        score=round(float(rate), 2),
        clear_after_s=0.0,
    )


@dataclass(frozen=True, slots=True)
class KvGrowth:
    """Sustained KV-cache growth: least-squares slope (fraction/s) over ``span_s`` seconds
    of history and the newest usage (fraction 0–1)."""

    slope: float
    usage: float
    span_s: float


def _least_squares(points: Sequence[tuple[float, float]]) -> float | None:
    n = len(points)
    mean_t = sum(p[0] for p in points) / n
    mean_v = sum(p[1] for p in points) / n
    var = sum((p[0] - mean_t) ** 2 for p in points)
    if var <= 0:
        return None
    return sum((p[0] - mean_t) * (p[1] - mean_v) for p in points) / var


def _quarter_means(points: Sequence[tuple[float, float]]) -> list[float] | None:
    """Mean usage in each quarter of the points' time span (None if a quarter is empty)."""
    t0, span = points[0][0], points[-1][0] - points[0][0]
    bins: list[list[float]] = [[], [], [], []]
    for t, v in points:
        bins[min(3, int((t - t0) / span * 4))].append(v)
    if not all(bins):
        return None
    return [sum(b) / len(b) for b in bins]


def kv_growth(ctx: RuleContext, engine: str) -> KvGrowth | None:
    """The KV-cache history of ``engine`` (``vllm:kv_cache_usage_perc``) when it shows
    growth worth extrapolating, else None. All of: usage now ≥ ``exhaustion_usage_ratio`` ×
    ``kv_usage_pct`` (a slope at a few % is noise); history covering ``slope_window_s``;
    each quarter of that window higher on average than the one before (a sustained rise,
    not one jump); usage now no more than ``exhaustion_fall_pct`` points below the highest
    reading of the last quarter (so the warning goes as soon as usage falls); a positive
    least-squares slope over the window."""
    t = ctx.thresholds
    series = ctx.state.history.get(engine, "kv_usage")
    last = series.last
    if last is None or last[1] * 100.0 < t.exhaustion_usage_ratio * t.kv_usage_pct:
        return None
    points = series.since(last[0] - t.slope_window_s)
    span = points[-1][0] - points[0][0]
    if len(points) < MIN_SLOPE_POINTS or span <= 0 or span < MIN_SPAN_SHARE * t.slope_window_s:
        return None
    quarters = _quarter_means(points)
    if quarters is None or any(b <= a for a, b in itertools.pairwise(quarters)):
        return None
    recent_peak = max(v for ts, v in points if ts >= last[0] - span / 4)
    if (recent_peak - last[1]) * 100.0 > t.exhaustion_fall_pct:
        return None
    slope = _least_squares(points)
    if slope is None or slope <= 0:
        return None
    return KvGrowth(slope, last[1], span)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s"


@rule({"kv.exhaustion": Scope.ENGINE})
def exhaustion_rule(ctx: RuleContext) -> Iterator[Finding]:
    """Time until the KV pool is full at the sustained growth rate (see :func:`kv_growth`),
    when within ``exhaustion_horizon_s``. Clears as soon as the growth stops qualifying: the
    fit window is its hysteresis."""
    for s in ok_engines(ctx):
        growth = kv_growth(ctx, s.engine)
        if growth is None or growth.usage >= 1.0:
            continue
        eta = (1.0 - growth.usage) / growth.slope
        if eta > ctx.thresholds.exhaustion_horizon_s:
            continue
        yield engine_finding(
            s,
            "kv.exhaustion",
            Severity.WARNING,
            f"KV pool full in ~{_duration(eta)} at +{_pct(growth.slope):.2f} %/s "
            f"(now {_pct(growth.usage):.1f} %, rising over the last {growth.span_s:.0f} s)",
            {
                "eta_s": eta,
                "slope_pct_per_s": _pct(growth.slope),
                "kv_usage_pct": _pct(growth.usage),
            },
            score=-round(eta),
            clear_after_s=0.0,
        )


RULES = (availability_rule, pool_rule, exhaustion_rule)
