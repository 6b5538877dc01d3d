"""The human-readable form of a :class:`~sparktop.snapshot.Snapshot`, fitted to the console.

One row per GPU: node, GPU (index and name without the ``NVIDIA`` prefix), SM/max SM clock
(MHz), temperature (°C), power (W), utilisation (%), memory (``U used/totalG·GPU heldG`` on
unified memory, GiB), decoded clock-event reasons and the node's state. A failed node gets
one row with its state, and every failure is listed under the tables with its reason.
Engines follow (see :func:`sparktop.report.engines.engine_tables`).

Tables are borderless and never clip a value: when the console is too narrow, whole columns
are left out in :data:`NODE_PRIORITY` order and named in a note (see
:mod:`sparktop.report.fit`). :func:`needed_width` is the width that shows everything.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.text import Text

from sparktop.alerts.gpu_state import GpuState
from sparktop.model import GpuSample, NodeMemory, NodeSample, Num, failure_text, fmt_num, is_num
from sparktop.report import engines as engine_report
from sparktop.report.fit import Col, Fitted, fit_table, hidden_note
from sparktop.safe_text import printable
from sparktop.snapshot import NO_GPU_DATA, Snapshot, iso_time
from sparktop.values import gib_text

NODE_COLUMNS = (
    Col("node", 0, "left"),
    Col("GPU", 7, "left"),
    Col("SM MHz", 1),
    Col("°C", 4),
    Col("W", 3),
    Col("util%", 2),
    Col("memory", 6, "left"),
    Col("reasons", 5, "left", wrap=True),
    Col("state", 0, "left", wrap=True),
)
"""Display order; the number is the priority (0 always shown, higher left out first)."""

NODE_PRIORITY = tuple(c.header for c in sorted(NODE_COLUMNS, key=lambda c: c.priority))
"""Columns most important first: node, state, SM MHz, util%, W, °C, reasons, memory, GPU."""

MEMORY_LEGEND = "memory: U = unified, used/total GiB; GPU = GiB held by GPU processes"


_gib = gib_text


def _pair(used: Num, total: Num) -> str:
    if not (is_num(used) and is_num(total)):
        return "n/a"
    return f"{_gib(used)}/{_gib(total)}G"


def memory_text(gpu: GpuSample, memory: NodeMemory) -> str:
    """``U 105/122G·GPU 101G`` on unified memory (host memory, with what GPU processes hold),
    ``host …`` when the GPU reports no memory of its own, else ``used/totalG``."""
    if memory.unified or not (is_num(gpu.memory_total_mib) and gpu.memory_total_mib > 0):
        held = gpu.process_memory_mib if is_num(gpu.process_memory_mib) else memory.gpu_held_mib
        text = ("U " if memory.unified else "host ") + _pair(memory.used_mib, memory.total_mib)
        if is_num(held):
            text += f"·GPU {_gib(held)}G"
        return text
    return _pair(gpu.memory_used_mib, gpu.memory_total_mib)


def reasons_text(gpu: GpuSample) -> str:
    """Decoded clock-event reasons: names, ``none`` for a zero mask, ``n/a`` when unknown."""
    if not isinstance(gpu.clock_event_mask, int):
        return "n/a"
    return ", ".join(gpu.clock_events) or "none"


def gpu_text(gpu: GpuSample) -> str:
    """``0 GB10``: the index and the name without the ``NVIDIA`` every name starts with."""
    return f"{gpu.index} {gpu.name.removeprefix('NVIDIA ')}".rstrip()


def _clock(gpu: GpuSample) -> str:
    return f"{fmt_num(gpu.sm_clock_mhz, '.0f')}/{fmt_num(gpu.max_sm_clock_mhz, '.0f')}"


def node_rows(
    nodes: tuple[NodeSample, ...], gpu_states: Mapping[str, Mapping[str, GpuState]] | None = None
) -> list[list[Text]]:
    """One row of cells per GPU (per failed node: its name and state), as :data:`NODE_COLUMNS`;
    a GPU's state is the monitor's (``gpu_states``: node → GPU key → state)."""
    rows: list[list[Text]] = []
    for sample in nodes:
        states = (gpu_states or {}).get(sample.node, {})
        state = Text(sample.state.value, style="" if sample.ok else "bold red")
        if not sample.gpus:
            rows.append([Text(sample.node), Text("-"), *(Text() for _ in range(6)), state])
            continue
        for gpu in sample.gpus:
            cells = (
                sample.node,
                gpu_text(gpu),
                _clock(gpu),
                fmt_num(gpu.temperature_c, ".0f"),
                fmt_num(gpu.power_w, ".0f"),
                fmt_num(gpu.utilization_pct, ".0f"),
                memory_text(gpu, sample.memory),
                reasons_text(gpu),
            )
            # Text(), not markup: names and reasons come from remote machines.
            judged = states.get(gpu.key, GpuState.OK)
            shown = Text(judged.value, style="yellow") if judged is not GpuState.OK else state
            rows.append([*(Text(printable(c)) for c in cells), shown])
    return rows


def node_table(
    nodes: tuple[NodeSample, ...],
    width: int,
    gpu_states: Mapping[str, Mapping[str, GpuState]] | None = None,
) -> Fitted:
    """The node table within ``width`` cells (columns left out by priority)."""
    return fit_table(NODE_COLUMNS, node_rows(nodes, gpu_states), width, title="nodes")


def failure_lines(snap: Snapshot) -> list[str]:
    """``name: message`` for every node and engine that did not answer (a node that answered
    without GPU data is in :func:`no_gpu_data_lines` instead)."""
    lines = []
    for n in snap.nodes:
        if not n.ok and n.state not in NO_GPU_DATA:
            text = failure_text(n.state.value, n.message, n.since_s)
            lines.append(printable(f"{n.node}: {text}"))
    for e in snap.engines:
        if not e.answered:
            lines.append(printable(f"{e.engine}: {e.message or e.state.value}"))
    return lines


def incomplete_lines(snap: Snapshot) -> list[str]:
    """``name: state: message`` for every engine that answered with a page it could not read
    in full (``stale``, ``degraded``: gauges missing or refused): degraded, not failed."""
    return [
        printable(f"{e.engine}: {e.state.value}: {e.message or 'no message'}")
        for e in snap.engines
        if e.answered and not e.ok
    ]


def no_gpu_data_lines(snap: Snapshot) -> list[str]:
    """``name: message`` for every node that answered with no GPU data to read (no NVIDIA
    driver, no GPU, a driver/library mismatch): degraded, not failed."""
    return [
        printable(f"{n.node}: {failure_text(n.state.value, n.message, n.since_s)}")
        for n in snap.nodes
        if n.state in NO_GPU_DATA
    ]


def needed_width(snap: Snapshot) -> int:
    """Cells the widest table needs to show every column (nodes; engines in one table)."""
    width = node_table(snap.nodes, 0, snap.gpu_states).needed
    if snap.engines:
        width = max(width, engine_report.wide_width(snap.engines))
    return width


def fit_console(console: Console, snap: Snapshot) -> None:
    """A pipe gets every column on whole lines (tables as wide as they need, notes unwrapped,
    so each line can be grepped by its engine or node); a terminal keeps its width."""
    if not console.is_terminal:
        console.width = max(console.width, 160, needed_width(snap))
        console.soft_wrap = True


def render_table(
    snap: Snapshot, console: Console, expected: Mapping[str, str] | None = None
) -> None:
    """Print the snapshot within ``console.width``: header line, nodes, engines (with the
    ``expected`` line per engine name, :func:`sparktop.report.expected.expected_text`),
    failures."""
    width = console.width
    console.print(Text(f"{snap.cluster}  {iso_time(snap.time_s)}"))
    fitted = []
    if snap.nodes:  # an engine-only inventory gets no empty nodes table
        nodes = node_table(snap.nodes, width, snap.gpu_states)
        console.print(nodes.table)
        if "memory" not in nodes.hidden and any(n.memory.unified and n.gpus for n in snap.nodes):
            console.print(Text(MEMORY_LEGEND, style="dim"))
        fitted.append(nodes)
    if snap.engines:
        if snap.nodes:
            console.print()
        engines = engine_report.engine_tables(snap.engines, width)
        for i, table in enumerate(engines):
            if i:
                console.print()
            console.print(table.table)
        for line in engine_report.notes(snap.engines):
            console.print(Text(line, style="dim"))
        for sample in snap.engines:
            if expected and sample.engine in expected:
                console.print(Text(f"{sample.engine}: {expected[sample.engine]}"))
            split = engine_report.split_line(sample)
            if split is not None:
                console.print(Text(split))
        fitted += engines
    note = hidden_note(fitted, width)
    if note is not None:
        console.print(note)
    for heading, lines in (
        ("no GPU data:", no_gpu_data_lines(snap)),
        ("incomplete pages:", incomplete_lines(snap)),
        ("failures:", failure_lines(snap)),
    ):
        if lines:
            console.print(Text(heading, style="bold"))
            for line in lines:
                console.print(Text(f"  {line}"))
