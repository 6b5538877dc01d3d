"""Peer facts inside a tensor-parallel group: a rank far below its peers while the group is
busy. Every rank of a TP group does the same work each step, so at the same utilisation
their power, clock and fabric traffic should match; a GB10 in its slow state keeps a
steady clock and reports no reason bit, and shows only as power far below its peers'
(the public report: 15–20 W against 31–36 W, decode 94 against 63 ms/step).

:func:`low_power_facts` and :func:`fabric_facts` give one :class:`PeerFact` per flagged
rank (kind, since, the figures), built once per rule context; the host rules alert on them
and the straggler rule names the rank with the fact's :attr:`PeerFact.evidence`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sparktop.alerts.context import RuleContext
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.gpu_rules import GpuView, gpu_views, slow_now
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.hostmodel import PowerTelemetry
from sparktop.model import NodeSample, is_num, num_or
from sparktop.sweep.expected.load import busy


def median_of(values: Iterable[float]) -> float:
    """The middle value of ``values``, or the mean of the two middle ones: what
    ``statistics.median`` returns, without loading that module (with ``fractions`` and
    ``decimal``, ~0.5 MB of a monitor's memory) for the one function the rules use.
    Raises ValueError when ``values`` is empty."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return data[mid] if n % 2 else (data[mid - 1] + data[mid]) / 2


LOW_POWER = "low power vs peers"
LOW_FABRIC = "low fabric traffic vs peers"


@dataclass(frozen=True, slots=True)
class PeerFact:
    """One rank far below its TP peers. ``kind`` is :data:`LOW_POWER` or
    :data:`LOW_FABRIC`; ``value`` / ``peers_median`` in ``unit`` (W or Gb/s); ``peers`` the
    peers' own figures (node → value); ``since_s`` when the fact began holding (wall
    clock); ``clock_mhz`` / ``peers_clock_mhz`` and ``util_pct`` where known; ``limit`` the
    ``spark_hwmon`` limit that explains it ("" when none does)."""

    kind: str
    engine: str
    node: str
    gpu: str
    value: float
    peers_median: float
    unit: str
    peers: tuple[tuple[str, float], ...]
    since_s: float
    clock_mhz: float | None = None
    peers_clock_mhz: float | None = None
    util_pct: float | None = None
    limit: str = ""
    values: dict[str, float] = field(default_factory=dict)
    explained: bool = False
    """Another GPU rule already names this rank's slowdown (a reason bit, a clock drop, the
    hidden low-power pattern): the fact is kept, its own alert is not raised."""

    @property
    def ratio(self) -> float:
        return self.value / self.peers_median if self.peers_median > 0 else 0.0

    @property
    def figures(self) -> str:
        """``17.0 W vs peers' median 40.2 W (spark-1 40.1, spark-2 40.9, spark-3 39.8)``."""
        spec = ".1f"
        peers = ", ".join(f"{n} {v:{spec}}" for n, v in self.peers)
        return (
            f"{self.value:{spec}} {self.unit} vs peers' median {self.peers_median:{spec}} "
            f"{self.unit} ({peers})"
        )

    @property
    def evidence(self) -> str:
        """One phrase for the straggler attribution."""
        text = f"{self.kind} ({self.value:.1f} vs {self.peers_median:.1f} {self.unit}"
        if self.clock_mhz is not None and self.peers_clock_mhz is not None:
            text += f", clock {self.clock_mhz:,.0f} vs {self.peers_clock_mhz:,.0f} MHz"
        text += ")"
        return f"{text}; {self.limit}" if self.limit else text


def peer_facts(ctx: RuleContext, view: GpuView) -> list[PeerFact]:
    """The peer facts about this GPU's rank (low power) and its node (low fabric traffic)."""
    return [f for f in low_power_facts(ctx) if f.node == view.node and f.gpu == view.gpu.key] + [
        f for f in fabric_facts(ctx) if f.node == view.node
    ]


def node_facts(
    state: ClusterState, thresholds: Thresholds, tp_groups: Mapping[str, tuple[str, ...]], node: str
) -> list[PeerFact]:
    """Every peer fact about ``node`` in ``state`` (for a view that has no rule context)."""
    ctx = RuleContext(state, thresholds, CounterTracker(0.0), tp_groups=tp_groups)
    return [f for f in (*low_power_facts(ctx), *fabric_facts(ctx)) if f.node == node]


def _busy(ctx: RuleContext, engine: str, utils: list[float]) -> bool:
    """The group has work: the engine runs requests over its window (when it is read:
    :func:`~sparktop.sweep.expected.load.busy`, as its gauge reads 0 between batches) and its
    ranks' median utilisation is at least ``low_power_util_pct``."""
    sample = ctx.state.engines.get(engine)
    if sample is not None and sample.judged and is_num(sample.running) and not busy(sample):
        return False
    return bool(utils) and median_of(utils) >= ctx.thresholds.low_power_util_pct


def low_power_facts(ctx: RuleContext) -> list[PeerFact]:
    """Ranks whose power sits below ``peer_power_ratio`` × their peers' median while the
    group is busy and the peers draw at least ``peer_min_power_w``."""
    if ctx.peer_power is None:
        ctx.peer_power = list(_low_power(ctx))
    return ctx.peer_power


def _low_power(ctx: RuleContext) -> list[PeerFact]:
    t = ctx.thresholds
    views = gpu_views(ctx)
    out = []
    for engine, group in ctx.tp_groups.items():
        members = [v for v in views if v.node in group]
        powered = [v for v in members if is_num(v.gpu.power_w)]
        utils = [float(v.gpu.utilization_pct) for v in members if is_num(v.gpu.utilization_pct)]
        if len(powered) < 2 or not _busy(ctx, engine, utils):
            continue
        # Each rank against the median of the others: the group's powers sorted once, the
        # rank's own value taken out of that list (not a sort per rank: 64 rows a tick).
        powers = sorted(num_or(v.gpu.power_w, 0.0) for v in powered)
        for view in powered:
            power = num_or(view.gpu.power_w, 0.0)
            others = powers.copy()
            del others[bisect.bisect_left(others, power)]
            median = median_of(others)
            util = view.gpu.utilization_pct
            if median < t.peer_min_power_w or power >= t.peer_power_ratio * median:
                continue
            if not (is_num(util) and util >= t.low_power_util_pct):
                continue  # an idle rank draws less: not the slow state
            peers = sorted((p for p in powered if p is not view), key=lambda p: p.node)
            out.append(_power_fact(ctx, engine, view, peers, median))
    return out


def _power_fact(
    ctx: RuleContext, engine: str, view: GpuView, peers: list[GpuView], median: float
) -> PeerFact:
    g = view.gpu
    clocks = [float(p.gpu.sm_clock_mhz) for p in peers if is_num(p.gpu.sm_clock_mhz)]
    sample = ctx.state.nodes[view.node]
    limit = limit_text(sample.power, [ctx.state.nodes[p.node].power for p in peers])
    key = f"{LOW_POWER}:{view.node}/{g.key}"
    values = {"power_w": num_or(g.power_w, 0.0), "peers_median_power_w": median}
    if is_num(g.sm_clock_mhz):
        values["sm_clock_mhz"] = float(g.sm_clock_mhz)
    if is_num(g.utilization_pct):
        values["utilization_pct"] = float(g.utilization_pct)
    return PeerFact(
        kind=LOW_POWER,
        engine=engine,
        node=view.node,
        gpu=g.key,
        value=num_or(g.power_w, 0.0),
        peers_median=median,
        unit="W",
        peers=tuple((p.node, num_or(p.gpu.power_w, 0.0)) for p in peers),
        since_s=ctx.host.onset(key, sample.time_s),
        clock_mhz=float(g.sm_clock_mhz) if is_num(g.sm_clock_mhz) else None,
        peers_clock_mhz=median_of(clocks) if clocks else None,
        util_pct=float(g.utilization_pct) if is_num(g.utilization_pct) else None,
        limit=limit,
        values=values,
        explained=slow_now(ctx, view),
    )


def limit_text(own: PowerTelemetry, peers: list[PowerTelemetry]) -> str:
    """What the ``spark_hwmon`` driver says limits this node: a channel at its cap, a cap
    lower than the peers', a raised ``pl_level`` ("" without the driver or a reason)."""
    if not own.present:
        return ""
    parts = []
    for channel, cap in sorted(own.cap_w.items()):
        theirs = [p.cap_w[channel] for p in peers if channel in p.cap_w]
        near = own.limit_near(channel)
        if near is not None:
            parts.append(f"{channel} {near[0]:.1f} W at its {cap:.0f} W cap")
        elif theirs and cap < 0.8 * median_of(theirs):
            parts.append(f"{channel} cap {cap:.0f} W vs peers' {median_of(theirs):.0f} W")
    if is_num(own.pl_level) and own.pl_level > 0:
        parts.append(f"pl_level {own.pl_level:.0f}")
    if is_num(own.prochot) and own.prochot > 0:
        parts.append("PROCHOT asserted")
    return f"spark_hwmon: {', '.join(parts)}" if parts else ""


def fabric_facts(ctx: RuleContext) -> list[PeerFact]:
    """Ranks moving less than ``fabric_asymmetry_ratio`` × their peers' median RoCE traffic
    (tx + rx) while the group is busy and the peers move at least ``fabric_min_gbps``."""
    if ctx.peer_fabric is None:
        ctx.peer_fabric = list(_fabric(ctx))
    return ctx.peer_fabric


def _traffic(sample: NodeSample | None) -> float | None:
    if sample is None or not sample.ok:
        return None
    tx, rx = sample.fabric.tx_gbps, sample.fabric.rx_gbps
    return float(tx) + float(rx) if is_num(tx) and is_num(rx) else None


def _fabric(ctx: RuleContext) -> list[PeerFact]:
    t = ctx.thresholds
    views = gpu_views(ctx)
    out = []
    for engine, group in ctx.tp_groups.items():
        utils = [
            float(v.gpu.utilization_pct)
            for v in views
            if v.node in group and is_num(v.gpu.utilization_pct)
        ]
        traffic = {n: _traffic(ctx.state.nodes.get(n)) for n in group}
        known = {n: v for n, v in traffic.items() if v is not None}
        if len(known) < 2 or not _busy(ctx, engine, utils):
            continue
        for node, value in known.items():
            peers = sorted((n, v) for n, v in known.items() if n != node)
            median = median_of(v for _, v in peers)
            if median < t.fabric_min_gbps or value >= t.fabric_asymmetry_ratio * median:
                continue
            sample = ctx.state.nodes[node]
            out.append(
                PeerFact(
                    kind=LOW_FABRIC,
                    engine=engine,
                    node=node,
                    gpu="",
                    value=value,
                    peers_median=median,
                    unit="Gb/s",
                    peers=tuple(peers),
                    since_s=ctx.host.onset(f"{LOW_FABRIC}:{node}", sample.time_s),
                    values={"fabric_gbps": value, "peers_median_fabric_gbps": median},
                )
            )
    return out
