"""Why an engine falls short of its expected row: causes ruled out before anyone is blamed.

In this order (DESIGN.md §6), the first that holds explains the deficit:

1. **queueing** (TTFT only): requests waited for capacity in the window (``waiting`` > 0 at
   a scrape of it) — their TTFT includes the wait, the profile's does not;
2. **pool pressure**: KV usage at or above ``kv_usage_pct``, or preemptions in the window
   (a preempted request recomputes its prompt; its tokens stall meanwhile);
3. **speculative acceptance drop**: the window's acceptance rate ``spec_drop_pct`` below the
   engine's own recent baseline, as the ``spec.acceptance`` rule judges it (fewer accepted
   draft tokens per step: slower decode at the same clock);
4. **a node** of the tensor-parallel group, and only while its slow state overlaps the
   deficit window: slow *now* (an active slowdown reason, a clock drop past
   ``clock_drop_pct``, the hidden low-power pattern) and slow for at least
   :data:`NODE_OVERLAP_SHARE` of the window, read from its clock history. A slowdown counter
   that grew seconds ago while the clock is back at baseline blames no one. A node whose
   clock is back but whose clock history shows it slow over that share of the window still
   explains the window's deficit (said so, with how long it has been back), until the
   window turns over; it is never the straggler then.

A node's evidence is generic (:class:`NodeEvidence`: phrases and since when), so other kinds
of node evidence plug in beside throttling and low power: a rank with a steady clock and no
reason bit whose power or fabric traffic sits far below its TP peers' (the facts of
:mod:`sparktop.alerts.peers`, since the fact began holding) is slow too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sparktop.alerts.context import RuleContext
from sparktop.alerts.gpu_rules import (
    GpuView,
    gpu_views,
    hidden_low_power,
    slow_now,
    slowdown_evidence,
    throttle_evidence,
)
from sparktop.alerts.live import live_ttft, waited, waiting_peak
from sparktop.alerts.peers import peer_facts
from sparktop.alerts.spec_rules import spec_drop as spec_condition
from sparktop.cluster import gpu_subject
from sparktop.model import EngineSample, Quantile, is_num

NODE_OVERLAP_SHARE = 0.5
"""A node explains a deficit when its slow state covers at least this share of the window."""


@dataclass(frozen=True, slots=True)
class Cause:
    """What explains a deficit: ``kind`` (queueing, pool, spec, node) and the phrase the alert
    text carries. A node cause names ``node`` and how long it overlapped the window."""

    kind: str
    text: str
    node: str | None = None
    overlap_s: float | None = None
    values: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeEvidence:
    """Why one GPU of a node counts as slow now, since when (wall clock, s), and how slow
    (clock ÷ its reference, 1 when unknown: the slowest is named first)."""

    view: GpuView
    phrases: tuple[str, ...]
    since_s: float
    ratio: float


def queueing(ctx: RuleContext, s: EngineSample) -> Cause | None:
    """Requests waited in the window and the compared TTFT includes the wait (the server
    does not export prefill time to take the queue out)."""
    waiting = waited(s)
    if waiting <= 0 or live_ttft(s).label != "p50":
        return None
    queue, ttft = s.queue_time_mean_s, s.ttft_p50
    if is_num(queue) and isinstance(ttft, Quantile) and ttft.value_s > 0:
        share = f", queue time {queue:.2f} s ({queue / ttft.value_s:.0%} of the TTFT p50)"
    else:
        share = ""
    seqs = s.max_num_seqs if is_num(s.max_num_seqs) else ctx.max_num_seqs.get(s.engine)
    running = f"{s.running:.0f}" if is_num(s.running) else "n/a"
    of = f"/{seqs:.0f}" if is_num(seqs) and seqs else ""
    caught = waiting_peak(s)
    who = (
        f"up to {caught:.0f} waiting for capacity in the window"
        if caught > 0
        else "requests waited for capacity between the window's scrapes"
    )
    return Cause(
        "queueing",
        f"queueing: {who} ({running}{of} "
        f"running{share}); their TTFT includes the wait, the profile's does not",
        values={"waiting": waiting},
    )


def pool_pressure(ctx: RuleContext, s: EngineSample) -> Cause | None:
    parts, values = [], {}
    kv = s.kv_usage
    if is_num(kv) and kv * 100.0 >= ctx.thresholds.kv_usage_pct:
        parts.append(f"KV {kv * 100.0:.1f} %")
        values["kv_usage_pct"] = kv * 100.0
    rate = s.preemptions_per_s
    if is_num(rate) and rate > 0 and "preemptions_per_s" not in s.since_start:
        parts.append(f"{rate:.2f} preemptions/s")
        values["preemptions_per_s"] = float(rate)
    if not parts:
        return None
    return Cause("pool", f"pool pressure: {', '.join(parts)}", values=values)


def spec_drop(ctx: RuleContext, s: EngineSample) -> Cause | None:
    """The ``spec.acceptance`` rule's own condition
    (:func:`~sparktop.alerts.spec_rules.spec_drop`) as a cause."""
    drop = spec_condition(ctx, s)
    if drop is None:
        return None
    rate, base = drop.rate, drop.baseline
    return Cause(
        "spec",
        f"speculative acceptance {rate:.0%} of draft tokens vs its recent {base:.0%}",
        values={"acceptance_pct": rate * 100.0, "baseline_pct": base * 100.0},
    )


ENGINE_CAUSES: tuple[Callable[[RuleContext, EngineSample], Cause | None], ...] = (
    queueing,
    pool_pressure,
    spec_drop,
)


def _slow_point(ctx: RuleContext, view: GpuView, clock: float, power: float | None) -> bool:
    """A past reading that shows the slowdown by its clock (or the low-power pattern)."""
    ref = view.reference
    if ref is None or ref[0] <= 0:
        return False
    ratio = clock / ref[0]
    if ratio < 1.0 - ctx.thresholds.clock_drop_pct / 100.0:
        return True
    t = ctx.thresholds
    return power is not None and power < t.low_power_power_w and ratio < t.low_power_clock_ratio


def slow_since(ctx: RuleContext, view: GpuView, now_s: float) -> float:
    """When the GPU's current slow run began (wall clock): the oldest of the newest run of
    clock readings that show it; ``now_s`` when the clock history does not show it."""
    subject = gpu_subject(view.node, view.gpu.key)
    clocks = list(ctx.state.history.get(subject, "sm_clock_mhz"))
    powers = dict(ctx.state.history.get(subject, "power_w"))
    since = now_s
    for t, clock in reversed(clocks):
        if not _slow_point(ctx, view, clock, powers.get(t)):
            break
        since = t
    return since


def evidence(ctx: RuleContext, view: GpuView, now_s: float) -> NodeEvidence | None:
    """The GPU's evidence of a slowdown that holds now, or None (counter growth alone, with
    the clock back, is not evidence of anything holding the group back now)."""
    if not slow_now(ctx, view):
        # A steady clock and no reason bit: only its TP peers show the slow state.
        facts = peer_facts(ctx, view)
        if not facts:
            return None
        ratio = view.clock_ratio if view.clock_ratio is not None else 1.0
        since = min(f.since_s for f in facts)
        return NodeEvidence(view, tuple(f.evidence for f in facts), since, ratio)
    if hidden_low_power(ctx, view):
        g = view.gpu
        phrases = [
            *slowdown_evidence(ctx, view),
            f"possible hidden low-power state ({g.power_w:.1f} W at {g.utilization_pct:.0f} %)",
        ]
    else:
        phrases = throttle_evidence(ctx, view)
    if not phrases:
        return None
    ratio = view.clock_ratio if view.clock_ratio is not None else 1.0
    return NodeEvidence(view, tuple(phrases), slow_since(ctx, view, now_s), ratio)


def group_evidence(
    ctx: RuleContext, group: tuple[str, ...], now_s: float
) -> Iterator[NodeEvidence]:
    for view in gpu_views(ctx):
        if view.node in group:
            found = evidence(ctx, view, now_s)
            if found is not None:
                yield found


def slowest(ctx: RuleContext, s: EngineSample) -> NodeEvidence | None:
    """The slowest member of ``s``'s TP group that is slow now, with its evidence."""
    group = ctx.tp_groups.get(s.engine, ())
    found = list(group_evidence(ctx, group, s.time_s)) if group else []
    return min(found, key=lambda e: e.ratio) if found else None


def node_cause(ctx: RuleContext, s: EngineSample, node: NodeEvidence | None) -> Cause | None:
    """``node`` as the cause when its slow run overlaps enough of the deficit window."""
    if node is None:
        return None
    now = s.time_s
    start = s.window_start_s if s.window_start_s is not None else now - ctx.thresholds.hold_s
    span = max(now - start, 1e-9)
    overlap = max(0.0, now - max(node.since_s, start))
    if overlap < NODE_OVERLAP_SHARE * span:
        return None
    share = min(1.0, overlap / span)
    how_long = "throughout the window" if share >= 0.99 else f"for {share:.0%} of the window"
    # Said on the window's own clock (the server's: the simulator's with --speed), the one
    # the load's "last N s" is on; the share is the same on either.
    shown_s = share * s.window_s if is_num(s.window_s) and s.window_s else overlap
    return Cause(
        "node",
        f"{node.view.node} slow {how_long} ({shown_s:,.0f} s)",
        node=node.view.node,
        overlap_s=overlap,
        values={"overlap_s": overlap},
    )


@dataclass(frozen=True, slots=True)
class PastSlow:
    """A TP member that is not slow now but whose clock history shows it slow for part of
    the window: ``slow_s`` seconds of it (the window's own clock), ``back_s`` seconds ago it
    was last seen slow, its lowest clock then (MHz)."""

    node: str
    slow_s: float
    share: float
    back_s: float
    low_mhz: float


def past_slow(ctx: RuleContext, s: EngineSample) -> PastSlow | None:
    """The TP member slow for the largest share of ``s``'s window by its clock history,
    among those not slow now (:func:`slowest` covers those), or None.

    Each clock reading stands for the time to the next one; a reading is slow by
    :func:`_slow_point` (a clock drop past ``clock_drop_pct``, or the low-power pattern).
    A deficit is a window figure: a node slow over most of the window explains it even
    once its clock is back, until the window has turned over. Counter growth alone is
    never evidence.
    """
    group = ctx.tp_groups.get(s.engine, ())
    if not group:
        return None
    now = s.time_s
    start = s.window_start_s if s.window_start_s is not None else now - ctx.thresholds.hold_s
    span = max(now - start, 1e-9)
    scale = float(s.window_s) / span if is_num(s.window_s) and s.window_s else 1.0
    best: PastSlow | None = None
    for view in gpu_views(ctx):
        if view.node not in group or evidence(ctx, view, now) is not None:
            continue
        subject = gpu_subject(view.node, view.gpu.key)
        clocks = [(t, c) for t, c in ctx.state.history.get(subject, "sm_clock_mhz")]
        powers = dict(ctx.state.history.get(subject, "power_w"))
        slow_s, last, low = 0.0, None, None
        for (t, clock), nxt in zip(clocks, [*clocks[1:], (now, 0.0)], strict=True):
            a, b = max(t, start), min(nxt[0], now)
            if b <= a or not _slow_point(ctx, view, clock, powers.get(t)):
                continue
            slow_s += b - a
            last = b
            low = clock if low is None else min(low, clock)
        if last is None or low is None:
            continue
        share = min(1.0, slow_s / span)
        found = PastSlow(view.node, slow_s * scale, share, (now - last) * scale, low)
        if best is None or found.share > best.share:
            best = found
    return best


def past_node_cause(ctx: RuleContext, s: EngineSample) -> Cause | None:
    """A node back at its clock now that was slow for at least :data:`NODE_OVERLAP_SHARE`
    of the deficit window (see :func:`past_slow`)."""
    past = past_slow(ctx, s)
    if past is None or past.share < NODE_OVERLAP_SHARE:
        return None
    return Cause(
        "node",
        f"{past.node} was slow for {past.share:.0%} of the window ({past.slow_s:,.0f} s, "
        f"down to {past.low_mhz:,.0f} MHz), its clock back for {past.back_s:,.0f} s "
        "(the window still holds it)",
        node=past.node,
        overlap_s=past.slow_s,
        values={"overlap_s": past.slow_s},
    )


def engine_cause(ctx: RuleContext, s: EngineSample, figure: str) -> Cause | None:
    """The first engine-side cause in order (queueing counts for TTFT only)."""
    for find in ENGINE_CAUSES:
        if find is queueing and figure != "ttft":
            continue
        cause = find(ctx, s)
        if cause is not None:
            return cause
    return None


def explain(ctx: RuleContext, s: EngineSample, figure: str) -> Cause | None:
    """What explains a ``figure`` (``"ttft"`` or ``"decode"``) deficit, in the order above."""
    return (
        engine_cause(ctx, s, figure)
        or node_cause(ctx, s, slowest(ctx, s))
        or past_node_cause(ctx, s)
    )
