"""The human-readable form of a :class:`~sparktop.snapshot.Snapshot`: rich tables on a console.

One row per GPU (node, GPU, SM/max clock, temperature, power, utilisation, memory with
unified memory marked, decoded clock-event reasons, state); a failed node gets one row with
its state, and every failure is listed under the table with its reason. Engines get a table
of their own when the inventory has any.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from sparktop.model import EngineSample, GpuSample, NodeMemory, NodeSample, Num, fmt_num, is_num
from sparktop.snapshot import Snapshot, iso_time
from sparktop.sources import engine_report

MIB_PER_GIB = 1024.0


def _gib(value: Num) -> str:
    return f"{float(value) / MIB_PER_GIB:.1f}" if is_num(value) else "n/a"


def memory_text(gpu: GpuSample, memory: NodeMemory) -> str:
    """``used/total GiB unified (GPU-held N GiB)`` on unified memory, else ``used/total MiB``."""
    if memory.unified or not (is_num(gpu.memory_total_mib) and gpu.memory_total_mib > 0):
        held = gpu.process_memory_mib if is_num(gpu.process_memory_mib) else memory.gpu_held_mib
        text = f"{_gib(memory.used_mib)}/{_gib(memory.total_mib)} GiB"
        text += " unified" if memory.unified else " host"
        if is_num(held):
            text += f" (GPU {_gib(held)})"
        return text
    return f"{fmt_num(gpu.memory_used_mib)}/{fmt_num(gpu.memory_total_mib)} MiB"


def reasons_text(gpu: GpuSample) -> str:
    """Decoded clock-event reasons: names, ``none`` for a zero mask, ``n/a`` when unknown."""
    if not isinstance(gpu.clock_event_mask, int):
        return "n/a"
    return ", ".join(gpu.clock_events) or "none"


def _state_style(ok: bool) -> str:
    return "" if ok else "bold red"


def _clock(gpu: GpuSample) -> str:
    return f"{fmt_num(gpu.sm_clock_mhz)}/{fmt_num(gpu.max_sm_clock_mhz)}"


def node_table(nodes: tuple[NodeSample, ...]) -> Table:
    table = Table(title="nodes", title_justify="left", expand=False)
    table.add_column("node", no_wrap=True)
    table.add_column("GPU", no_wrap=True)
    table.add_column("SM/max MHz", justify="right", no_wrap=True)
    table.add_column("°C", justify="right")
    table.add_column("W", justify="right")
    table.add_column("util %", justify="right")
    table.add_column("memory", no_wrap=True)
    table.add_column("reasons")
    table.add_column("state", no_wrap=True)
    for sample in nodes:
        state = Text(sample.state.value, style=_state_style(sample.ok))
        if not sample.gpus:
            table.add_row(Text(sample.node), "-", "", "", "", "", "", "", state)
            continue
        for gpu in sample.gpus:
            cells = (
                sample.node,
                f"{gpu.index} {gpu.name}",
                _clock(gpu),
                fmt_num(gpu.temperature_c),
                fmt_num(gpu.power_w, ".1f"),
                fmt_num(gpu.utilization_pct),
                memory_text(gpu, sample.memory),
                reasons_text(gpu),
            )
            # Text(), not markup: names and reasons come from remote machines.
            table.add_row(*(Text(c) for c in cells), state)
    return table


def engine_table(engines: tuple[EngineSample, ...]) -> Table:
    """Per engine and per DP rank: see :func:`sparktop.sources.engine_report.engine_table`."""
    return engine_report.engine_table(engines)


def failure_lines(snap: Snapshot) -> list[str]:
    """``name: message`` for every node and engine that did not answer OK."""
    lines = []
    for n in snap.nodes:
        if not n.ok:
            lines.append(f"{n.node}: {n.message or n.state.value}")
    for e in snap.engines:
        if not e.ok:
            lines.append(f"{e.engine}: {e.message or e.state.value}")
    return lines


def render_table(snap: Snapshot, console: Console) -> None:
    """Print the snapshot: header line, node table, engine table, then the failures."""
    header = Text(f"{snap.cluster}  {iso_time(snap.time_s)}")
    console.print(header)
    console.print(node_table(snap.nodes))
    if snap.engines:
        console.print(engine_table(snap.engines))
    failures = failure_lines(snap)
    if failures:
        console.print(Text("failures:", style="bold"))
        for line in failures:
            console.print(Text(f"  {line}"))
