"""The node details' host sections as text: memory pressure, the RoCE ports, the
``spark_hwmon`` channels, the GPU processes, and a rank's standing against its TP peers.

Every string from the node (device, interface and process names) is made printable here;
a missing reading shows ``n/a`` with its reason.
"""

from __future__ import annotations

from sparktop.alerts.peers import PeerFact
from sparktop.hostmodel import FabricPort, FabricReading, GpuProcess, PowerTelemetry
from sparktop.model import NA, NodeMemory, Num, is_num
from sparktop.safe_text import printable


def _gib(mib: Num, spec: str = ".1f") -> str:
    return f"{float(mib) / 1024:{spec}} GiB" if is_num(mib) else _na(mib)


def _na(value: Num) -> str:
    return f"n/a ({value.reason})" if isinstance(value, NA) else "n/a"


def pressure_text(mem: NodeMemory) -> str:
    """``MemAvailable 17.0 GiB · swap 0.0 of 16.0 GiB used · PSI some 0.0 % / full 0.0 %``."""
    swap = f"swap {_gib(mem.swap_used_mib)}"
    if is_num(mem.swap_total_mib):
        swap += f" of {_gib(mem.swap_total_mib)} used"
    if is_num(mem.psi_some_pct) and is_num(mem.psi_full_pct):
        psi = f"PSI some {mem.psi_some_pct:.1f} % / full {mem.psi_full_pct:.1f} % (avg10)"
    else:
        missing = mem.psi_some_pct if isinstance(mem.psi_some_pct, NA) else mem.psi_full_pct
        psi = f"PSI {_na(missing)}"
    return f"MemAvailable {_gib(mem.available_mib)} · {swap} · {psi}"


def _gbps(value: Num) -> str:
    return f"{value:.2f}" if is_num(value) else "n/a"


def port_line(port: FabricPort) -> str:
    """One port: name, interface, state, rate, traffic, errors (growth), NIC temperature."""
    netdev = f" {printable(port.netdev)}" if port.netdev else ""
    state = " · ".join(printable(s) for s in (port.state, port.phys_state, port.rate) if s)
    errors = [
        f"{name} {value:,.0f}"
        + (f" (+{port.errors_grown[name]:,.0f})" if name in port.errors_grown else "")
        for name, value in sorted(port.errors.items())
        if value > 0
    ]
    temp = f" · NIC {port.temperature_c:.0f} °C" if is_num(port.temperature_c) else ""
    return (
        f"{printable(port.name)}{netdev}  {state or 'state n/a'}  "
        f"tx {_gbps(port.tx_gbps)} / rx {_gbps(port.rx_gbps)} Gb/s  "
        f"errors: {', '.join(errors) or 'none'}{temp}"
    )


def fabric_text(fabric: FabricReading) -> str:
    """The ports, one per line, under the node's totals; ``n/a (reason)`` without ports."""
    if not fabric.ports:
        return f"n/a ({fabric.missing})"
    head = f"node tx {_gbps(fabric.tx_gbps)} / rx {_gbps(fabric.rx_gbps)} Gb/s"
    if isinstance(fabric.tx_gbps, NA):
        head += f" ({fabric.tx_gbps.reason}: rates need two readings)"
    return "\n".join([head, *(port_line(p) for p in fabric.ports)])


def power_text(power: PowerTelemetry) -> str:
    """The driver's power channels (``/ cap`` where it has one), energy, PROCHOT, PL level;
    "" without the driver (the section is not shown)."""
    if not power.present:
        return ""
    channels = []
    for label, watts in power.power_w.items():
        cap = power.cap_w.get(label)
        tail = f" / {cap:.0f} W cap" if cap is not None else " W"
        channels.append(f"{printable(label)} {watts:.1f}{tail}")
    energy = ", ".join(f"{printable(k)} {v:,.0f} J" for k, v in power.energy_j.items())
    status = f"prochot {_int(power.prochot)} · pl_level {_int(power.pl_level)}"
    lines = [f"{printable(power.driver)}: {', '.join(channels) or 'no power channels'}"]
    if energy:
        lines.append(f"energy: {energy}")
    lines.append(status)
    return "\n".join(lines)


def _int(value: Num) -> str:
    return f"{value:.0f}" if is_num(value) else _na(value)


PROCESS_SORTS = ("newest", "used", "pid", "name")
"""What ``s`` cycles the GPU processes by: as the GPU lists them (newest first), memory held
(most first), pid, name."""


def sort_processes(processes: tuple[GpuProcess, ...], by: str) -> tuple[GpuProcess, ...]:
    """``processes`` ordered by one of :data:`PROCESS_SORTS` (unknown memory last)."""
    if by == "used":
        return tuple(sorted(processes, key=lambda p: -p.used_mib if is_num(p.used_mib) else 1.0))
    if by == "pid":
        return tuple(sorted(processes, key=lambda p: p.pid))
    if by == "name":
        return tuple(sorted(processes, key=lambda p: (p.name.casefold(), p.pid)))
    return processes


def processes_text(processes: tuple[GpuProcess, ...], by: str = "newest") -> str:
    """``pid  name  used MiB  share``, newest first (or sorted ``by`` a column of
    :data:`PROCESS_SORTS`, its heading marked ▼); ``none`` without processes."""
    if not processes:
        return "none"

    def head(text: str, key: str) -> str:
        return f"▼{text}" if by == key else text

    lines = [f"{head('pid', 'pid'):>8}  {head('used', 'used'):>10}  {'share':>6}  "
             f"{head('name', 'name')}"]  # fmt: skip
    for p in sort_processes(processes, by):
        used = f"{p.used_mib:,.0f} MiB" if is_num(p.used_mib) else "n/a"
        share = f"{p.share_pct:.1f} %" if is_num(p.share_pct) else "n/a"
        lines.append(f"{p.pid:>8}  {used:>10}  {share:>6}  {printable(p.name) or '?'}")
    return "\n".join(lines)


def peers_text(facts: list[PeerFact]) -> str:
    """What sets this rank apart from its TP peers; "" when nothing does."""
    lines = []
    for f in facts:
        line = f"{f.kind} in {f.engine}'s TP group: {f.figures}"
        if f.clock_mhz is not None and f.peers_clock_mhz is not None:
            line += f"; clock {f.clock_mhz:,.0f} vs {f.peers_clock_mhz:,.0f} MHz"
        if f.limit:
            line += f"; {f.limit}"
        lines.append(line)
    return "\n".join(lines)
