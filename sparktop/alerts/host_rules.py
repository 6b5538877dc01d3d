"""Host rules (DESIGN.md §13): unified-memory pressure, the RoCE fabric, and the TP rank whose
power sits far below its peers'. Thresholds: :mod:`sparktop.alerts.thresholds`.

* ``node.memory_pressure`` (subject ``node``): warning when ``MemAvailable`` is below
  ``mem_available_warn_gib``, swap in use above ``swap_used_warn_gib`` or PSI ``some``
  avg10 at ``psi_some_warn_pct``; critical below ``mem_available_critical_gib`` or at PSI
  ``full`` avg10 ``psi_full_critical_pct`` (on GB10 this memory is the GPU's too);
* ``fabric.link_down`` (subject ``node/device/port``; critical on a TP member, else
  warning): a port seen up in this run is down, or its ``link_downed`` counter grew (a port
  never seen up is unused, not alerted);
* ``fabric.errors`` (warning): a port's error counters grew since the previous reading;
* ``fabric.asymmetry`` (subject ``node``, warning): a busy TP rank moving under
  ``fabric_asymmetry_ratio`` of its peers' median traffic;
* ``gpu.low_power_vs_peers`` (subject ``node/gpuN``, warning): a busy TP rank under
  ``peer_power_ratio`` of its peers' median power, with the ``spark_hwmon`` limit that
  explains it where the driver is loaded (not raised when a GPU rule already names the
  slowdown: a reason bit, a clock drop, the hidden low-power pattern).
"""

from __future__ import annotations

from collections.abc import Iterator

from sparktop.alerts.context import Finding, RuleContext, Scope, rule
from sparktop.alerts.model import Severity
from sparktop.alerts.peers import fabric_facts, low_power_facts
from sparktop.hostmodel import FabricPort
from sparktop.model import NodeMemory, NodeSample, is_num

MIB_PER_GIB = 1024.0


def _gib(mib: float) -> str:
    return f"{mib / MIB_PER_GIB:.1f} GiB"


def memory_pressure(ctx: RuleContext, memory: NodeMemory) -> tuple[Severity, list[str]] | None:
    """The severity and the reasons, or None when memory is not under pressure."""
    t = ctx.thresholds
    reasons: list[str] = []
    critical = False
    available = memory.available_mib
    if is_num(available):
        if available < t.mem_available_critical_gib * MIB_PER_GIB:
            critical = True
            limit = t.mem_available_critical_gib
            reasons.append(f"MemAvailable {_gib(available)} (< {limit:g} GiB)")
        elif available < t.mem_available_warn_gib * MIB_PER_GIB:
            limit = t.mem_available_warn_gib
            reasons.append(f"MemAvailable {_gib(available)} (< {limit:g} GiB)")
    swap = memory.swap_used_mib
    if is_num(swap) and swap > t.swap_used_warn_gib * MIB_PER_GIB:
        reasons.append(f"swap {_gib(swap)} in use")
    full, some = memory.psi_full_pct, memory.psi_some_pct
    if is_num(full) and full >= t.psi_full_critical_pct:
        critical = True
        reasons.append(f"PSI full {full:.0f} % (avg10)")
    elif is_num(some) and some >= t.psi_some_warn_pct:
        reasons.append(f"PSI some {some:.0f} % (avg10)")
    if not reasons:
        return None
    return (Severity.CRITICAL if critical else Severity.WARNING), reasons


@rule({"node.memory_pressure": Scope.NODE})
def memory_pressure_rule(ctx: RuleContext) -> Iterator[Finding]:
    for sample in ctx.state.nodes.values():
        if not sample.ok:
            continue
        found = memory_pressure(ctx, sample.memory)
        if found is None:
            continue
        severity, reasons = found
        m = sample.memory
        kind = "unified memory (the GPU's too)" if m.unified else "host memory"
        on = f"{_gib(m.total_mib)} of {kind}" if is_num(m.total_mib) else kind
        values = {
            k: float(getattr(m, k))
            for k in ("available_mib", "swap_used_mib", "psi_some_pct", "psi_full_pct")
            if is_num(getattr(m, k))
        }
        used_pct = 0.0
        if is_num(m.available_mib) and is_num(m.total_mib) and m.total_mib > 0:
            used_pct = round(100.0 * (1.0 - m.available_mib / m.total_mib))
        yield Finding(
            rule="node.memory_pressure",
            subject=sample.node,
            severity=severity,
            message=f"memory pressure on {on}: {', '.join(reasons)}",
            node=sample.node,
            values=values,
            score=used_pct,
        )


def _in_group(ctx: RuleContext, node: str) -> bool:
    return any(node in group for group in ctx.tp_groups.values())


def _port_subject(sample: NodeSample, port: FabricPort) -> str:
    return f"{sample.node}/{port.name}"


@rule({"fabric.link_down": Scope.NODE})
def link_down_rule(ctx: RuleContext) -> Iterator[Finding]:
    for sample in ctx.state.nodes.values():
        if not sample.ok:
            continue
        for port in sample.fabric.ports:
            subject = _port_subject(sample, port)
            flapped = port.errors_grown.get("link_downed", 0.0) > 0
            if port.up and not flapped:
                continue
            if not port.up and subject not in ctx.host.seen_up and not flapped:
                continue  # never up in this run: an unused port
            netdev = f" ({port.netdev})" if port.netdev else ""
            if port.up:
                flaps = port.errors_grown["link_downed"]
                what = f"link went down and came back (link_downed +{flaps:.0f})"
            else:
                what = f"link down: {port.state or '?'}, {port.phys_state or 'phys state ?'}"
            yield Finding(
                rule="fabric.link_down",
                subject=subject,
                severity=Severity.CRITICAL if _in_group(ctx, sample.node) else Severity.WARNING,
                message=f"RoCE {what}{netdev}",
                node=sample.node,
                values={"link_downed": port.errors.get("link_downed", 0.0)},
            )


@rule({"fabric.errors": Scope.NODE})
def fabric_errors_rule(ctx: RuleContext) -> Iterator[Finding]:
    for sample in ctx.state.nodes.values():
        if not sample.ok:
            continue
        for port in sample.fabric.ports:
            grown = {k: v for k, v in port.errors_grown.items() if k != "link_downed"}
            if not grown:
                continue
            parts = ", ".join(
                f"{k} +{v:,.0f}" for k, v in sorted(grown.items(), key=lambda kv: -kv[1])
            )
            netdev = f" ({port.netdev})" if port.netdev else ""
            yield Finding(
                rule="fabric.errors",
                subject=_port_subject(sample, port),
                severity=Severity.WARNING,
                message=f"RoCE error counters growing{netdev}: {parts} since the last reading",
                node=sample.node,
                values={f"{k}_grown": v for k, v in grown.items()},
                score=float(round(sum(grown.values()))),
            )


@rule({"fabric.asymmetry": Scope.NODE})
def fabric_asymmetry_rule(ctx: RuleContext) -> Iterator[Finding]:
    for fact in fabric_facts(ctx):
        yield Finding(
            rule="fabric.asymmetry",
            subject=fact.node,
            severity=Severity.WARNING,
            message=f"{fact.kind} in {fact.engine}'s TP group: {fact.figures}",
            node=fact.node,
            engine=fact.engine,
            values=fact.values,
            score=float(round(100 * (1 - fact.ratio))),
        )


@rule({"gpu.low_power_vs_peers": Scope.NODE})
def low_power_vs_peers_rule(ctx: RuleContext) -> Iterator[Finding]:
    for fact in low_power_facts(ctx):
        if fact.explained:
            continue
        detail = ""
        if fact.clock_mhz is not None and fact.peers_clock_mhz is not None:
            detail = f" at {fact.clock_mhz:,.0f} MHz (peers {fact.peers_clock_mhz:,.0f})"
        if fact.util_pct is not None:
            detail += f", {fact.util_pct:.0f} % busy"
        limit = f"; {fact.limit}" if fact.limit else "; no clock-event reason reported"
        yield Finding(
            rule="gpu.low_power_vs_peers",
            subject=f"{fact.node}/gpu{_index(ctx, fact.node, fact.gpu)}",
            severity=Severity.WARNING,
            message=f"{fact.kind} in {fact.engine}'s TP group: {fact.figures}{detail}{limit}",
            node=fact.node,
            gpu=fact.gpu,
            engine=fact.engine,
            values=fact.values,
            score=float(round(100 * (1 - fact.ratio))),
        )


def _index(ctx: RuleContext, node: str, gpu_key: str) -> int:
    sample = ctx.state.nodes.get(node)
    for gpu in sample.gpus if sample is not None else ():
        if gpu.key == gpu_key:
            return gpu.index
    return 0


RULES = (
    memory_pressure_rule,
    link_down_rule,
    fabric_errors_rule,
    fabric_asymmetry_rule,
    low_power_vs_peers_rule,
)
