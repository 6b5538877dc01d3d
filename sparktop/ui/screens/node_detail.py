"""NodeDetailScreen: all GPU fields, memory and its pressure, the node against its TP peers,
GPU processes, the RoCE fabric, spark_hwmon, history plots, last probe output and errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Label, Static

from sparktop.alerts.peers import PeerFact
from sparktop.cluster import gpu_subject
from sparktop.history import History
from sparktop.hostmodel import GpuProcess
from sparktop.model import NA, GpuSample, NodeSample, is_num, recheck_text
from sparktop.ui import format as fmt
from sparktop.ui.events import EventLike
from sparktop.ui.gpu_fields import gpu_field_rows, gpu_label
from sparktop.ui.host_view import (
    PROCESS_SORTS,
    fabric_text,
    peers_text,
    power_text,
    pressure_text,
    processes_text,
)
from sparktop.ui.screens.live import LiveScreen
from sparktop.ui.styles import STYLE_VARIABLES
from sparktop.ui.views import Cell, failure_text
from sparktop.ui.widgets.event_log import event_line
from sparktop.ui.widgets.footer import KeyFooter
from sparktop.ui.widgets.plot import Plot

if TYPE_CHECKING:
    from sparktop.ui.app_details import DetailNavigation

PLOTS = (
    ("sm_clock_mhz", "SM clock MHz"),
    ("temperature_c", "temperature °C"),
    ("power_w", "power W"),
    ("utilization_pct", "utilisation %"),
)


def plot_scale(metric: str, gpu: GpuSample, values: tuple[float, ...]) -> tuple[float, float]:
    """The fixed scale a history plot is drawn on (from 0, so a steady reading draws flat):
    SM clock up to the GPU's max clock, temperature to 100 °C, utilisation to 100 %,
    power to the highest reading."""
    top = max(values, default=0.0)
    if metric == "sm_clock_mhz" and is_num(gpu.max_sm_clock_mhz):
        top = max(top, float(gpu.max_sm_clock_mhz))
    elif metric in ("temperature_c", "utilization_pct"):
        top = max(top, 100.0)
    return 0.0, top or 1.0


def missing_reason(metric: str, gpu: GpuSample | None) -> str:
    """Why a history plot is empty: the field's n/a reason, else no readings yet."""
    if gpu is None:
        return "no GPU readings from this node"
    value = getattr(gpu, metric, None)
    if isinstance(value, NA):
        return f"{gpu_label(metric)}: {value.reason}"
    return "no readings yet"


def fields_label(sample: NodeSample, known_time_s: float | None) -> str:
    """The GPU fields' heading while the node fails: the readings are its last good ones,
    from ``known_time_s`` (how long before this poll), not from now."""
    if known_time_s is None:
        return "GPU fields (last good reading; time unknown)"
    ago = fmt.age(max(0.0, sample.time_s - known_time_s))
    return f"GPU fields (last good reading at {fmt.clock_time(known_time_s)}, {ago} before)"


@dataclass(frozen=True, slots=True)
class NodeDetail:
    """What the detail screen shows of one node: its newest sample (None before any), the
    last GPUs it reported and when, its state as the Nodes rows show it, the history and its
    events."""

    node: str
    sample: NodeSample | None
    known_gpus: tuple[GpuSample, ...]
    state: Cell
    history: History
    events: tuple[EventLike, ...]
    known_time_s: float | None = None
    """When ``known_gpus`` were read (wall clock; None: never)."""
    peers: tuple[PeerFact, ...] = ()
    """What sets the node apart from its TP peers (low power, low fabric traffic)."""
    known_sample: NodeSample | None = None
    """The node's last healthy sample (None: never): its memory and driver while it is down."""


class NodeDetailScreen(LiveScreen):
    """Everything known about one node; the app hands it a fresh :class:`NodeDetail` every
    tick (:meth:`show`). ``escape`` goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back", id="detail.back"),
        Binding(
            "s",
            "sort_processes",
            "Sort procs",
            tooltip="node details: sort the GPU "
            "processes by the next column (newest, used, pid, name)",
            id="detail.sort",
        ),
    ]

    DEFAULT_CSS = """
    NodeDetailScreen > VerticalScroll { padding: 0 1; }
    NodeDetailScreen .section { margin: 1 0 0 0; text-style: bold; color: $spark-accent; }
    NodeDetailScreen DataTable { height: auto; }
    NodeDetailScreen #plots { height: auto; }
    NodeDetailScreen .plot { height: 3; }
    NodeDetailScreen .plot > Label { width: 24; color: $spark-dim; }
    NodeDetailScreen .plot > Plot { width: 1fr; height: 3; }
    NodeDetailScreen #raw { background: $surface; padding: 0 1; }
    """

    def __init__(self, detail: NodeDetail, gpu_key: str | None = None) -> None:
        super().__init__()
        self.node = detail.node
        self.gpu_key = gpu_key
        self.detail = detail
        self._shown: NodeSample | None = None
        self._mounted = False
        self.process_sort = PROCESS_SORTS[0]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="title")
            yield Static("", id="status")
            yield Label("GPU fields", classes="section", id="fields-label")
            yield DataTable(id="fields", cursor_type="none", zebra_stripes=True)
            yield Label("memory", classes="section")
            yield Static("", id="memory")
            yield Static("", id="pressure")
            yield Label("against its TP peers", classes="section", id="peers-label")
            yield Static("", id="peers")
            yield Label(self._processes_heading(), classes="section", id="processes-label")
            yield Static("", id="processes")
            yield Label("RoCE fabric (/sys/class/infiniband)", classes="section")
            yield Static("", id="fabric")
            yield Label("spark_hwmon", classes="section", id="power-label")
            yield Static("", id="power")
            yield Label("history (oldest → newest)", classes="section")
            with Vertical(id="plots"):
                for metric, label in PLOTS:
                    with Horizontal(classes="plot"):
                        yield Label(label, id=f"label-{metric}")
                        yield Plot(id=f"plot-{metric}")
            yield Label("events", classes="section")
            yield Static("", id="node-events")
            yield Label("last probe output", classes="section", id="raw-label")
            yield Static("", id="raw")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._mounted = True
        self.show(self.detail)

    def _processes_heading(self) -> str:
        by = self.process_sort
        order = "newest first" if by == "newest" else f"by {by}"
        return f"GPU processes ({order}; s: sort)"

    def action_sort_processes(self) -> None:
        """Sort the GPU processes by the next column of :data:`PROCESS_SORTS`."""
        self.process_sort = PROCESS_SORTS[
            (PROCESS_SORTS.index(self.process_sort) + 1) % len(PROCESS_SORTS)
        ]
        self.query_one("#processes-label", Label).update(self._processes_heading())
        self._shown = None
        self.show(self.detail)

    def _gpu(self, sample: NodeSample) -> GpuSample | None:
        gpus = sample.gpus or self.detail.known_gpus
        for gpu in gpus:
            if gpu.key == self.gpu_key:
                return gpu
        return gpus[0] if gpus else None

    def follow(self, app: DetailNavigation) -> None:
        self.show(app.node_detail(self.node))

    def show(self, detail: NodeDetail) -> None:
        """Show ``detail`` (a no-op until the node's sample changes)."""
        self.detail = detail
        sample = detail.sample
        if sample is None or sample is self._shown or not self._mounted:
            return  # before on_mount the widgets are not there yet: on_mount shows it
        self._shown = sample
        # A failed poll read nothing: the last healthy sample's values, dimmed, with its time.
        known = detail.known_sample if not sample.ok else None
        driver: tuple[str, str] = (sample.driver_version or fmt.DASH, "")
        if not sample.driver_version and known is not None and known.driver_version:
            driver = (f"{known.driver_version} (at {fmt.clock_time(known.time_s)})", "dim")
        self.query_one("#title", Static).update(Content.assemble(
            ("node ", "$spark-dim"), (self.node, "bold"), ("  driver ", "$spark-dim"),
            driver, ("  probe ", "$spark-dim"),
            f"{sample.latency_s * 1000:.0f} ms" if sample.latency_s is not None else fmt.DASH,
            ("  sampled " if sample.ok else "  polled ", "$spark-dim"),
            fmt.clock_time(sample.time_s),
        ))  # fmt: skip
        if sample.ok:
            # As the Nodes row says it: ``throttled`` / ``low-power?`` are not a green ok.
            shown, role = detail.state
            status = (shown, STYLE_VARIABLES.get(role, ""))
        else:
            status = (failure_text(sample), "$spark-crit")
        # SSH failures already say since when ("unreachable since 14:02:11: …").
        since = ""
        if sample.since_s is not None and " since " not in status[0]:
            since = f" since {fmt.clock_time(sample.since_s)}"
        recheck = recheck_text(sample)  # a backed-off failure was not re-checked this poll
        since += f" · {recheck}" if recheck else ""
        self.query_one("#status", Static).update(Content.assemble(status, since))
        self._fill_fields(sample)
        mem = sample.memory if known is None else known.memory
        text = (
            f"{'unified' if mem.unified else 'host'}: used {fmt.gib(mem.used_mib)} of "
            f"{fmt.gib(mem.total_mib)} GiB; GPU-held {fmt.gib(mem.gpu_held_mib)} GiB "
            "(MemTotal − MemAvailable; sum of per-process used_memory)"
        )
        if known is not None:
            last = f"last known, read at {fmt.clock_time(mem.read_s or known.time_s)}"
            self.query_one("#memory", Static).update(
                Content.assemble((text, "$spark-dim"), ("\n" + last, "$spark-dim"))
            )
        elif mem.read_s is not None:  # older than the GPU readings: say how old and why
            age = fmt.age(max(0.0, sample.time_s - mem.read_s))
            stale = f"read at {fmt.clock_time(mem.read_s)}, {age} before this sample"
            why = f"; {mem.stale_reason}" if mem.stale_reason else ""
            self.query_one("#memory", Static).update(
                Content.assemble((text, "$spark-dim"), ("\n" + stale + why, "$spark-warn"))
            )
        else:
            self.query_one("#memory", Static).update(text)
        pressure = pressure_text(mem)
        self.query_one("#pressure", Static).update(
            Content(pressure) if known is None else Content.assemble((pressure, "$spark-dim"))
        )
        self._fill_host(sample, detail)
        gpu = self._gpu(sample)
        for metric, label in PLOTS:
            values: tuple[float, ...] = ()
            if gpu is not None:
                subject = gpu_subject(self.node, gpu.key)
                values = detail.history.get(subject, metric).values()
            # Under load the screen's first show can come before the rows nested in #plots
            # are mounted: those plots are drawn at the next show, a tick later.
            mounted = self.query(f"#plot-{metric}").results(Plot)
            plot = next(mounted, None)
            label_now = next(self.query(f"#label-{metric}").results(Label), None)
            if plot is None or label_now is None:
                continue
            if gpu is None or not values:
                plot.show((), 0.0, 1.0, missing_reason(metric, gpu))
                label_now.update(label)
                continue
            low, high = plot_scale(metric, gpu, values)
            plot.show(values, low, high)
            # btop's habit: the readings' range, the axis and the time the plot covers.
            seen = f"{min(values):.0f}–{max(values):.0f}"
            span = fmt.span(detail.history.get(subject, metric).span_s())
            axis = f"axis {low:.0f}–{high:.0f} · {span}"
            label_now.update(f"{label} {seen}\n{axis}")
        events = sorted(detail.events, key=lambda e: e.time_s, reverse=True)
        lines = [event_line(e) for e in events]
        self.query_one("#node-events", Static).update(
            Content("\n").join(lines[:20]) if lines else Content("none")
        )
        self.query_one("#raw", Static).update(Content(sample.raw or "(no output kept)"))
        # How the node was read: the stream, or one-shot and why (a node's -lms may not work).
        how = f"last probe output · read by {sample.probe}" if sample.probe else "last probe output"
        self.query_one("#raw-label", Label).update(Content(how))

    def _fill_host(self, sample: NodeSample, detail: NodeDetail) -> None:
        """Peers, processes, fabric and the spark_hwmon driver (hidden when absent)."""
        peers = peers_text(list(detail.peers))
        for name, text in (("peers", peers), ("power", power_text(sample.power))):
            self.query_one(f"#{name}-label", Label).display = bool(text)
            widget = self.query_one(f"#{name}", Static)
            widget.display = bool(text)
            widget.update(Content(text))

        # A failed poll read neither: the last healthy sample's, dimmed with its time, or
        # n/a with the failure (never "none", which would say the GPU runs nothing).
        def processes(found: tuple[GpuProcess, ...]) -> str:
            return processes_text(found, self.process_sort)

        for name, text_of in (("processes", processes), ("fabric", fabric_text)):
            widget = self.query_one(f"#{name}", Static)
            if sample.ok:
                widget.update(Content(text_of(getattr(sample, name))))
            elif detail.known_sample is not None:
                known = detail.known_sample
                last = f"last known, read at {fmt.clock_time(known.time_s)}"
                text = text_of(getattr(known, name))
                widget.update(Content.assemble((f"{text}\n{last}", "$spark-dim")))
            else:
                why = f"n/a (no healthy poll of this node yet: {sample.state.value})"
                widget.update(Content.assemble((why, "$spark-dim")))

    def _fill_fields(self, sample: NodeSample) -> None:
        table: DataTable[Any] = self.query_one("#fields", DataTable)
        gpus = sample.gpus or self.detail.known_gpus
        # A failed poll has no readings: the last good ones are shown, dimmed, with their time.
        old = not sample.gpus and bool(gpus)
        self.query_one("#fields-label", Label).update(
            fields_label(sample, self.detail.known_time_s) if old else "GPU fields"
        )
        style = "dim" if old else ""
        known = self.detail.known_sample if not sample.ok else None
        memory = sample.memory if known is None else known.memory
        rows = gpu_field_rows(gpus, unified=memory.unified)
        wanted = ["field"] + [f"GPU {g.index}" for g in gpus] + ["nvidia-smi field"]
        if [str(c.label) for c in table.columns.values()] != wanted:
            table.clear(columns=True)
            for i, label in enumerate(wanted):
                table.add_column(label, key=str(i))
            for name, label, values, source in rows:
                # rich Text: measurable for auto widths, and never parsed as markup.
                table.add_row(
                    Text(label), *(Text(v, style=style) for v in values),
                    Text(source, style="dim"), key=name,
                )  # fmt: skip
            return
        for name, _, values, _ in rows:
            for i, value in enumerate(values, start=1):
                table.update_cell(name, str(i), Text(value, style=style), update_width=True)
