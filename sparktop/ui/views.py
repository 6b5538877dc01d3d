"""What each node row shows, as plain (text, style) cells computed from the cluster state.

Textual-free: the widgets only diff these cells against what they last rendered and map the
style names (``ok``, ``warn``, ``crit``, ``dim``, ``stale``, ``accent``) to theme variables.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sparktop.alerts.context import RuleContext
from sparktop.alerts.gpu_rules import GpuView, gpu_views
from sparktop.alerts.gpu_state import GpuJudgement, GpuState, judge_view
from sparktop.alerts.gpu_state import context as judge_context
from sparktop.alerts.host_rules import memory_pressure
from sparktop.alerts.model import Severity
from sparktop.alerts.peers import low_power_facts
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState, gpu_subject
from sparktop.model import GpuSample, NodeSample, NodeState, is_num, recheck_text
from sparktop.model import failure_text as state_message
from sparktop.plan import Plan
from sparktop.ui import format as fmt

Cell = tuple[str, str]
"""(text, style name); the style name is '' for the default colour."""

CONTINUED: Cell = ("", "<continued>")
"""A cell drawn as part of the one on its left (the Nodes table's spanning cell)."""

ROW_SEP = "\x1f"

Order = tuple[int, tuple[tuple[int, str], ...], int]
"""A row's sort key: inventory position, natural node name, GPU index."""


@dataclass(frozen=True, slots=True)
class ViewConfig:
    """Display settings taken from the plan (:meth:`from_plan`; defaults for this machine).

    ``tp_membership`` maps a node to ``(engine, rank in the TP group)``, head = 0;
    ``engine_nodes`` an engine to its TP nodes, head first.
    ``thresholds`` are the alert rules' (the inventory's ``alerts:`` section), so the table
    marks what the alerts judge by.
    """

    cluster: str = "this machine"
    profile: str = ""
    interval_s: float = 1.0
    node_order: Mapping[str, int] = field(default_factory=dict)
    tp_membership: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    engine_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    thresholds: Thresholds = field(default_factory=Thresholds)
    profile_baseline_mhz: float | None = None

    @property
    def clock_drop_pct(self) -> float:
        return self.thresholds.clock_drop_pct

    @property
    def temperature_c(self) -> float:
        return self.thresholds.temperature_c

    @property
    def kv_usage_pct(self) -> float:
        return self.thresholds.kv_usage_pct

    @property
    def expected_deficit_pct(self) -> float:
        return self.thresholds.expected_deficit_pct

    @classmethod
    def from_plan(cls, plan: Plan) -> ViewConfig:
        """The display settings a plan implies (node order, TP membership, thresholds)."""
        membership: dict[str, tuple[str, int]] = {}
        for engine, nodes in plan.tp_groups.items():
            for rank, node in enumerate(nodes):
                membership.setdefault(node, (engine, rank))
        profile = plan.profile
        clocks = [float(c) for c in profile.baseline_sm_clock_mhz] if profile is not None else []
        return cls(
            cluster=plan.cluster,
            profile=plan.profile_name,
            interval_s=plan.interval_s,
            node_order={name: i for i, name in enumerate(plan.nodes)},
            tp_membership=membership,
            engine_nodes=plan.tp_groups,
            thresholds=plan.thresholds,
            profile_baseline_mhz=min(clocks) if clocks else None,
        )

    def stale_after_s(self) -> float:
        """A sample older than this (about three missed polls) is shown as stale."""
        return max(3.0 * self.interval_s, self.interval_s + 2.0)


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int


WIDE_COLUMNS = (
    Column("node", "node", 9),
    Column("tp", "TP", 7),
    Column("gpu", "#", 1),
    Column("sm", "SM MHz/base", 11),
    Column("max", "max", 4),
    Column("temp", "°C", 3),
    Column("power", "W", 4),
    Column("util", "util", 4),
    Column("mem", "memory", 19),
    Column("why", "reasons", 12),
    Column("trend", "trend", 7),
    Column("state", "state", 13),
)
NARROW_COLUMNS = (
    Column("node", "node", 9),
    Column("sm", "SM MHz/base", 11),
    Column("temp", "°C", 3),
    Column("power", "W", 4),
    Column("util", "util", 4),
    Column("mem", "memory", 10),
    Column("why", "reasons", 11),
    Column("state", "state", 10),
)
COMPACT_COLUMNS = tuple(c for c in NARROW_COLUMNS if c.key != "mem")
WIDE_MIN_WIDTH = 119
NARROW_MIN_WIDTH = 79
"""Table widths (with the scrollbar) at which the wide and narrow column sets fit."""


def columns_for(width: int) -> tuple[Column, ...]:
    """The column set that fits a table ``width`` columns wide (wide, narrow or compact)."""
    if width >= WIDE_MIN_WIDTH:
        return WIDE_COLUMNS
    return NARROW_COLUMNS if width >= NARROW_MIN_WIDTH else COMPACT_COLUMNS


@dataclass(frozen=True, slots=True)
class RowView:
    """One table row: its key (node + GPU key), sort order and cells by column key."""

    key: str
    node: str
    gpu_key: str | None
    order: Order
    cells: Mapping[str, Cell]


def row_key(node: str, gpu_key: str | None) -> str:
    return f"{node}{ROW_SEP}{gpu_key or ''}"


_SHORT_STATE = {
    NodeState.NO_GPU: "no GPU",
    NodeState.NO_DRIVER: "no driver",
    NodeState.DRIVER_MISMATCH: "drv mismatch",
    NodeState.HOST_KEY: "host key!",
    NodeState.AUTH: "auth failed",
    NodeState.GARBLED: "bad output",
    NodeState.NOT_ANSWERING: "nvsmi hung",
    NodeState.GPU_UNAVAILABLE: "no GPU data",
}


def state_cell(sample: NodeSample, now: float, config: ViewConfig, narrow: bool) -> Cell:
    """ok / stale N s / down HH:MM:SS (since the failure began) / a short failure name."""
    if sample.ok:
        stale = now - sample.time_s
        if stale > config.stale_after_s():
            return (f"stale {fmt.age(stale)}", "stale")
        return ("ok", "ok")
    since = fmt.clock_time(sample.since_s if sample.since_s is not None else sample.time_s)
    if sample.state in (NodeState.UNREACHABLE, NodeState.SSH_NOT_ANSWERING, NodeState.ERROR):
        return (f"✗ {since}" if narrow else f"down {since}", "crit")
    warn = (
        NodeState.NO_GPU,
        NodeState.NO_DRIVER,
        NodeState.NOT_ANSWERING,
        NodeState.GPU_UNAVAILABLE,
    )
    style = "warn" if sample.state in warn else "crit"
    return (_SHORT_STATE.get(sample.state, str(sample.state)), style)


GPU_STATE_CELLS: Mapping[GpuState, Cell] = {
    GpuState.IMPLAUSIBLE: ("implausible", "warn"),  # readings refused: n/a with the reason
    GpuState.THROTTLED: ("throttled", "warn"),
    GpuState.LOW_POWER: ("low-power?", "warn"),  # inferred from a pattern, not reported
}


def gpu_state_cell(status: Cell, state: GpuState) -> Cell:
    """A healthy node's state for one GPU (:mod:`sparktop.alerts.gpu_state`, the judgement
    ``snapshot`` reports too): ``low-power?`` or ``throttled``, else the node's state."""
    return GPU_STATE_CELLS.get(state, status)


STATE_RANK = {"crit": 4, "warn": 3, "stale": 2, "ok": 1}
"""How bad a state cell's style is, to name a node by its worst GPU."""


def node_states(rows: Iterable[RowView]) -> dict[str, Cell]:
    """Each node's worst row state (a node with one GPU throttling reads ``throttled``)."""
    worst: dict[str, Cell] = {}
    for row in rows:
        cell = row.cells.get("state", ("", ""))
        held = worst.get(row.node)
        if held is None or STATE_RANK.get(cell[1], 0) > STATE_RANK.get(held[1], 0):
            worst[row.node] = cell
    return worst


def _cause(sample: NodeSample) -> str:
    """What went wrong, for a failed row (the state column says ``down HH:MM:SS``), and
    how old it is and when it is tried next while the source backs off (``connection
    refused · 12 s ago, retry in 9 s``: short, to fit the row's message cells)."""
    recheck = recheck_text(sample, compact=True)
    cause = sample.message or str(sample.state)
    return f"{cause} · {recheck}" if recheck else cause


def failure_text(sample: NodeSample) -> str:
    """The failure for the detail screen: state since when, and the cause."""
    return state_message(str(sample.state), sample.message, sample.since_s)


@functools.lru_cache(maxsize=4096)
def natural(name: str) -> tuple[tuple[int, str], ...]:
    """Sort key that orders ``spark-2`` before ``spark-10``."""
    return tuple(
        (int(part), "") if part.isdigit() else (-1, part)
        for part in re.split(r"(\d+)", name)
        if part
    )


def _order(config: ViewConfig, node: str, gpu_index: int) -> Order:
    """Inventory order first; nodes the inventory does not list, by natural name order."""
    return (config.node_order.get(node, 1_000_000), natural(node), gpu_index)


def _tp_cell(config: ViewConfig, node: str) -> Cell:
    group = config.tp_membership.get(node)
    return (f"{group[0]}·{group[1]}", "accent" if group[1] == 0 else "") if group else ("", "")


def gpu_row(
    ctx: RuleContext,
    sample: NodeSample,
    view: GpuView,
    now: float,
    config: ViewConfig,
    narrow: bool,
    *,
    peer_low: bool = False,
) -> RowView:
    """The cells of one GPU of a healthy (or stale) node: ``view`` is the rules' view of it
    (:func:`~sparktop.alerts.gpu_rules.gpu_views` of ``ctx``); ``peer_low``: a low-power
    fact no other GPU rule explains names it (:func:`~sparktop.alerts.peers.low_power_facts`).

    The baseline shown and the ``▼``/``low-power?`` marks use the alert rules' own tests
    (:mod:`sparktop.alerts.gpu_rules`): the GPU's loaded baseline, never below the profile's
    sweep clock, and the hidden low-power pattern.
    """
    gpu = view.gpu
    status = state_cell(sample, now, config, narrow)
    stale = status[1] == "stale"
    judged: GpuJudgement = judge_view(ctx, view)
    own = ctx.state.baseline_mhz(sample.node, gpu.key)
    reference, below, low_power = judged.reference_mhz, judged.below, judged.low_power
    slow = bool(gpu.slowdowns) or low_power
    if not stale:
        status = gpu_state_cell(status, judged.state)
    pressure = memory_pressure(ctx, sample.memory)
    if status == ("ok", "ok"):
        if peer_low:
            status = ("pwr<peers", "warn")
        elif pressure is not None:
            status = ("mem pressure" if not narrow else "mem press", _severity_style(pressure[0]))
    hot = is_num(gpu.temperature_c) and gpu.temperature_c >= config.temperature_c
    plain = "stale" if stale else ""

    def mark(flag: bool, style: str = "warn") -> str:
        return "stale" if stale else (style if flag else "")

    suffix = "p" if reference is not None and reference != own else ""
    subject = gpu_subject(sample.node, gpu.key)
    trend = ctx.state.history.get(subject, "sm_clock_mhz").values(last=7)
    # 0..max clock: a steady ~2.5 GHz draws flat and high, only a real sag dips.
    top_mhz = float(gpu.max_sm_clock_mhz) if is_num(gpu.max_sm_clock_mhz) else None
    cells: dict[str, Cell] = {
        "node": (sample.node, plain),
        "tp": _tp_cell(config, sample.node),
        "gpu": (str(gpu.index), plain),
        "sm": (fmt.clock_cell(gpu.sm_clock_mhz, reference, below, suffix),
               mark(below or slow, "crit")),
        "max": (fmt.num(gpu.max_sm_clock_mhz, ".0f"), "dim"),
        "temp": (fmt.num(gpu.temperature_c, ".0f"), mark(hot, "crit")),
        "power": (fmt.num(gpu.power_w, ".0f" if num_or_zero(gpu.power_w) >= 100 else ".1f"),
                  mark(peer_low)),
        "util": (fmt.pct(gpu.utilization_pct), plain),
        "mem": memory_cell(
            sample, gpu, narrow,
            mark(pressure is not None, _severity_style(pressure[0]) if pressure else ""),
        ),
        "why": (fmt.reasons(gpu, low_power), mark(slow, "crit")),
        "trend": (fmt.spark(trend, 7, 0.0, top_mhz), "stale" if stale else "accent"),
        "state": status,
    }  # fmt: skip
    return RowView(
        row_key(sample.node, gpu.key), sample.node, gpu.key,
        _order(config, sample.node, gpu.index), cells,
    )  # fmt: skip


def memory_cell(sample: NodeSample, gpu: GpuSample, narrow: bool, style: str) -> Cell:
    """The memory cell; memory older than the row (its slow-tier refresh failed) is drawn
    stale with its age: ``U 92/122G · 42 s``."""
    mem = sample.memory
    if mem.read_s is None:
        return (fmt.memory(mem, gpu, compact=narrow), style)
    age = fmt.age(max(0.0, sample.time_s - mem.read_s))
    return (f"{fmt.memory(mem, gpu, compact=True)} · {age}", "stale")


def _severity_style(severity: Severity) -> str:
    return "crit" if severity is Severity.CRITICAL else "warn"


def num_or_zero(value: object) -> float:
    return float(value) if is_num(value) else 0.0


MESSAGE_COLUMNS = ("mem", "why", "trend")
"""The columns a failed row's message runs across (nothing else to show there)."""


def failed_row(
    sample: NodeSample,
    gpu: GpuSample | None,
    now: float,
    config: ViewConfig,
    narrow: bool,
    columns: Sequence[Column] | None = None,
) -> RowView:
    """A row for a node whose last poll failed: identity, failure and since when; no values.

    The failure message runs across the memory, reasons and trend cells of ``columns``
    (default: the wide or narrow set) as one text, so it reads at that width without gaps.
    """
    status = state_cell(sample, now, config, narrow)
    return _message_row(sample.node, gpu, status, _cause(sample), config, narrow, columns)


PENDING_CELL: Cell = ("waiting…", "dim")
PENDING_TEXT = "first poll in progress"
"""Fits the 80-column table's message span (23 cells)."""


def pending_row(
    node: str, config: ViewConfig, narrow: bool, columns: Sequence[Column] | None = None
) -> RowView:
    """A row for an inventory node with no poll result yet: it holds the node's place, so
    the table does not reorder as the first answers come in."""
    return _message_row(node, None, PENDING_CELL, PENDING_TEXT, config, narrow, columns)


def _message_row(
    node: str,
    gpu: GpuSample | None,
    status: Cell,
    message: str,
    config: ViewConfig,
    narrow: bool,
    columns: Sequence[Column] | None,
) -> RowView:
    gap = (fmt.DASH, "dim")
    shown = columns or (NARROW_COLUMNS if narrow else WIDE_COLUMNS)
    spans = [c for c in shown if c.key in MESSAGE_COLUMNS]
    cells: dict[str, Cell] = {
        "node": (node, status[1]),
        "tp": _tp_cell(config, node),
        "gpu": (str(gpu.index) if gpu else fmt.DASH, "dim"),
        "sm": gap, "max": gap, "temp": gap, "power": gap, "util": gap,
        "mem": ("", ""), "why": ("", ""), "trend": ("", ""),
        "state": status,
    }  # fmt: skip
    # One text across the span (the table draws CONTINUED cells as part of the one on their
    # left): split into cells, words broke at each cell's edge and left odd gaps.
    for i, column in enumerate(spans):
        cells[column.key] = (message, status[1]) if i == 0 else CONTINUED
    key = gpu.key if gpu else None
    index = gpu.index if gpu else -1
    return RowView(row_key(node, key), node, key, _order(config, node, index), cells)


def judges_as_shown(ctx: RuleContext, config: ViewConfig) -> bool:
    """Whether ``ctx`` judges GPUs as the table marks them: the same thresholds, profile
    clock and TP groups (then its GPU views and peer facts serve the table as they are)."""
    return (
        ctx.thresholds == config.thresholds
        and ctx.profile_baseline_mhz == config.profile_baseline_mhz
        and dict(ctx.tp_groups) == dict(config.engine_nodes)
    )


def node_rows(
    state: ClusterState,
    known_gpus: Mapping[str, tuple[GpuSample, ...]],
    now: float,
    config: ViewConfig,
    narrow: bool = False,
    columns: Sequence[Column] | None = None,
    ctx: RuleContext | None = None,
) -> list[RowView]:
    """Every row the Nodes table should show, sorted (inventory order, then GPU index); an
    inventory node not polled yet has a ``waiting…`` row in its place.

    ``known_gpus`` holds each node's GPUs from its last healthy poll, so a node that goes
    down keeps its GPU rows (marked down) instead of collapsing to one row. ``columns`` is
    the set the table shows (a failed row lays its message out over it). ``ctx`` is the
    alert rules' context of this same ``state`` (:attr:`~sparktop.alerts.engine.AlertEngine.
    last_context`, when it :func:`judges_as_shown`): its GPU views and peer facts, built
    once for the rules, are read here too; without one the table builds its own.
    """
    if ctx is None or ctx.state is not state or not judges_as_shown(ctx, config):
        ctx = judge_context(state, config.thresholds, config.profile_baseline_mhz)
        ctx.tp_groups = config.engine_nodes  # the peer marks compare TP ranks
    # By the reading itself: the views are of these very samples (keys may repeat).
    views = {id(v.gpu): v for v in gpu_views(ctx)}
    low = {(f.node, f.gpu) for f in low_power_facts(ctx) if not f.explained}
    rows: list[RowView] = []
    for node, sample in state.nodes.items():
        if sample.ok and sample.gpus:
            rows += [
                gpu_row(
                    ctx, sample, views[id(g)], now, config, narrow,
                    peer_low=(node, g.key) in low,
                )
                for g in sample.gpus
            ]  # fmt: skip
        elif sample.ok:
            empty = NodeSample(node, sample.time_s, NodeState.NO_GPU, "no GPU in the probe output")
            rows.append(failed_row(empty, None, now, config, narrow, columns))
        elif known_gpus.get(node):
            rows += [failed_row(sample, g, now, config, narrow, columns) for g in known_gpus[node]]
        else:
            rows.append(failed_row(sample, None, now, config, narrow, columns))
    rows += [
        pending_row(node, config, narrow, columns)
        for node in config.node_order
        if node not in state.nodes
    ]
    rows.sort(key=lambda r: r.order)
    return rows
