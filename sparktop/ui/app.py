"""SparktopApp: the live monitor screen, and ``run_tui`` to start it.

Data flows one way: sources → :class:`~sparktop.poller.Poller` (its own tasks) → ``_record``
(state, history, derived events; no widget work) → a UI tick at 1–2 Hz renders what changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.driver import Driver
from textual.filter import LineFilter
from textual.screen import Screen
from textual.theme import Theme
from textual.widget import Widget
from textual.widgets import Static

from sparktop import gcpolicy
from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.pipeline import AlertPipeline
from sparktop.cluster import ClusterState
from sparktop.model import GpuSample, NodeSample, NodeState, Sample, Source
from sparktop.plan import Plan
from sparktop.poller import Poller
from sparktop.safe_text import held_warnings
from sparktop.ui import themes
from sparktop.ui.app_actions import KeyActions
from sparktop.ui.commands import ClusterCommands
from sparktop.ui.events import AlertLike, EventLike, transition_events
from sparktop.ui.frame import frame
from sparktop.ui.messages import EventRecorded, LayoutChanged, SampleArrived
from sparktop.ui.notices import no_driver_text, no_engine_text, no_node_text
from sparktop.ui.safe_text import ControlCharacters
from sparktop.ui.screens.live import LiveScreen
from sparktop.ui.views import Cell, ViewConfig, node_rows, node_states
from sparktop.ui.widgets.body import Body
from sparktop.ui.widgets.command_bar import CommandBar
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.event_log import EventLog
from sparktop.ui.widgets.filter_bar import FilterBar, matches
from sparktop.ui.widgets.footer import KeyFooter
from sparktop.ui.widgets.header import AlertBar, HeaderBar
from sparktop.ui.widgets.node_table import NodeTable

_W = TypeVar("_W", bound=Widget)

if TYPE_CHECKING:
    from sparktop.exporter.server import MetricsEndpoint
    from sparktop.ui.widgets.budget import BudgetPane

INTERVAL = Binding.Group("interval", compact=True)


class SparktopApp(KeyActions):
    """The monitor of one :class:`~sparktop.plan.Plan`, polling ``sources`` (usually
    ``plan.sources()``; tests pass their own) and judging with ``alerts`` (the plan's alert
    engine, or the pipeline around it that delivers and records)."""

    # Absolute, so subclasses in other packages (the replay app, tests) find it too.
    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "sparktop"
    COMMANDS = App.COMMANDS | {ClusterCommands}
    # In the footer's order: what matters most first (it is cut at the right on 80 columns).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("ctrl+c", "interrupt", "Quit", show=False, priority=True, id="app.interrupt"),
        Binding("question_mark", "help", "Help", tooltip="help: columns, sources, keys",
                id="app.help"),
        Binding("b", "toggle_budget", "Budget", tooltip="open / close the context budget",
                id="app.budget"),
        Binding("p", "toggle_pause", "Pause", tooltip="pause / resume polling",
                id="app.pause"),
        Binding("e", "toggle_events", "Events", tooltip="show / hide the events pane",
                id="app.events"),
        # Priority: handled as it arrives, so keys typed right behind it reach the bar
        # (check_action lets an input have it otherwise).
        Binding("slash", "filter", "Filter", tooltip="filter the nodes, engines and events "
                "(as you type; Enter keeps it, Esc clears)", id="app.filter", priority=True),
        Binding("escape", "clear_filter", "Clear filter", show=False,
                tooltip="clear the / filter", id="app.clear_filter"),
        Binding("colon", "command", "Command", show=False, tooltip="command line, as k9s's: "
                ":q, :help, :budget, :node NAME, :details NAME, a bare name jumps to it",
                id="app.command", priority=True),
        Binding("c", "show_curve", "Curve", tooltip="the profile's curve (TTFT, aggregate vs "
                "prompt tokens) with the live window on it, for the engine in focus",
                id="app.curve"),
        Binding("plus", "interval(1)", "+interval", group=INTERVAL,
                tooltip="poll less often (next longer interval)", id="app.interval_up"),
        Binding("minus", "interval(-1)", "-interval", group=INTERVAL,
                tooltip="poll more often (next shorter interval)", id="app.interval_down"),
        Binding("t", "cycle_theme", "Theme", tooltip="next colour theme", id="app.theme"),
        Binding("r", "poll_now", "Poll now", show=False, tooltip="poll every source now",
                id="app.poll_now"),
        Binding("S", "screenshot", "Screenshot", show=False, tooltip="save the screen as SVG "
                "in the working directory (also palette → Screenshot)", id="app.screenshot"),
    ]  # fmt: skip
    # Textual declares it without ClassVar; the screen gets -narrow below 110 columns.
    HORIZONTAL_BREAKPOINTS = [  # noqa: RUF012
        (0, "-narrow"),
        (110, "-wide"),
    ]

    def __init__(
        self,
        plan: Plan,
        sources: Sequence[Source] = (),
        alerts: AlertEngine | AlertPipeline | None = None,
        *,
        theme: str | None = None,
        clock: Callable[[], float] = time.time,
        autostart: bool = True,
        sample_hooks: Iterable[Callable[[Sample], None]] = (),
    ) -> None:
        super().__init__()
        self.plan = plan
        self.view_config = ViewConfig.from_plan(plan)
        self.sources = tuple(sources)
        self.alert_engine = alerts
        self.recording = isinstance(alerts, AlertPipeline) and alerts.recorder is not None
        self.state = ClusterState()
        self.clock = clock
        self.autostart = autostart
        self.own_events: bool | None = None
        self.sample_hooks = tuple(sample_hooks)
        self.metrics: MetricsEndpoint | None = None
        """Serves the monitor's judgements while the app runs (``--serve-metrics``)."""
        # Shared with the alert rules (one row per sample), each engine's from its profile.
        self.expected_row = plan.row if plan.matched is not None or plan.own_profiles else None
        self.engine_order = {e.name: i for i, e in enumerate(plan.engines)}
        self.max_num_seqs = plan.max_num_seqs()
        self.keymap: dict[str, str] = {}
        """The key remapping applied (the inventory's ``keys:`` that were valid)."""
        self.known_gpus: dict[str, tuple[GpuSample, ...]] = {}
        self._tick_soon = False
        """A tick is queued for a subject's first sample (see :meth:`_record`)."""
        self.known_time_s: dict[str, float] = {}
        """When each node's :attr:`known_gpus` were read (its last healthy poll)."""
        self.known_nodes: dict[str, NodeSample] = {}
        """Each node's last healthy sample (its memory and driver, shown dimmed while down)."""
        self.node_states: dict[str, Cell] = {}
        """Each node's state as its rows show it (worst GPU), as of the last tick."""
        self.poller = Poller(self.sources, self.view_config.interval_s, self._record)
        self.requested_theme = theme
        self.paused_at: float | None = None
        self.ticks = 0
        self.last_tick_cells = 0
        self.cells_written = 0
        """Cells written by every tick so far (the 1 s UI timer may tick between a poll and
        its own render, so what a poll changed is a difference of this, not one tick's)."""
        self._theme_names: list[str] = []
        self._main_widgets: dict[type[Widget] | str, Widget] = {}
        self._tick_handle: asyncio.TimerHandle | None = None

    # -- layout ----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield AlertBar(id="alerts")
        no_nodes = no_node_text(self.sources)
        with (
            Body(budget=self._budget_pane, id="body"),
            Vertical(id="main", classes="-no-nodes" if no_nodes else ""),
        ):
            yield FilterBar(id="filter")
            yield CommandBar(id="command")
            yield Static(no_driver_text(self.plan), id="notice")
            yield Static(no_nodes, id="no-nodes", markup=False)
            yield NodeTable(id="nodes")
            yield EnginePanel(self._no_engine_text(), id="engines")
            yield EventLog(id="events")
        yield KeyFooter()

    def _no_engine_text(self) -> str:
        return no_engine_text(self.plan, self.sources)

    def _budget_pane(self) -> BudgetPane:
        """The budget pane, built when ``b`` first opens it (see :class:`Body`), with the
        engine it is about as of now (each tick hands it the next)."""
        from sparktop.ui.widgets.budget import BudgetPane

        urls = {e.name: e.url for e in self.plan.engines if e.url}
        pane = BudgetPane(
            self.plan.profile, urls, profile_limits=self.plan.profile_describes,
            engine_profiles=self.plan.own_profiles, id="budget",
        )  # fmt: skip
        pane.live = self.live_engine()
        return pane

    _control_characters = ControlCharacters()

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then :class:`~sparktop.ui.safe_text.ControlCharacters`: text
        from nodes and servers never reaches the terminal as control codes."""
        return [*super().get_line_filters(), self._control_characters]

    def get_default_screen(self) -> Screen[Any]:
        # Partial updates render only the widgets they change (see the module).
        from sparktop.ui.compositor import MonitorScreen

        return MonitorScreen(id="_default")

    def get_driver_class(self) -> type[Driver]:
        # Textual's Linux driver, with its input thread asleep between keys (see the module).
        from textual.drivers.linux_driver import LinuxDriver

        from sparktop.ui.driver import QuietLinuxDriver

        found = super().get_driver_class()
        return QuietLinuxDriver if found is LinuxDriver else found

    @property
    def current_theme(self) -> Theme:
        # Textual's looks the name up in a fresh copy of every registered theme, and each
        # widget's render asks for it (through ``ansi_theme``): a fifth of the monitor's
        # CPU at 4 nodes. The registered theme itself when the name is one; else Textual's.
        found = self._registered_themes.get(self.theme)
        return found if found is not None else super().current_theme

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return themes.variable_defaults(self.current_theme.to_color_system().generate())

    def on_mount(self) -> None:
        self._register_themes()
        if self.plan.keys:
            self._apply_keymap(self.plan.keys)
        if self.plan.profile_problem:
            self.notify(self.plan.profile_problem, severity="warning", timeout=10)
        if self.autostart:
            self.poller.start()
        if self.metrics is not None:
            self.run_worker(self.metrics.start(), name="serve-metrics")
        self._tick_every(0.5 if self.view_config.interval_s < 1 else 1.0)
        self.tick()
        # Engines only: the engines pane has the focus (never the filter's input, which
        # Textual's auto-focus would pick, so q would be typed, not quit).
        self.focus_main()

    def _register_themes(self) -> None:
        loaded = themes.load_themes()
        for theme in loaded.themes:
            self.register_theme(theme)
        self._theme_names = [t.name for t in loaded.themes]
        for error in loaded.errors:
            self.notify(f"theme file skipped: {error}", severity="warning", timeout=10)
        wanted = self.requested_theme or themes.DEFAULT_THEME
        name, problem = themes.resolve_theme(self, wanted)
        if problem:
            self.notify(problem, severity="warning", timeout=10)
        self.theme = name

    def _apply_keymap(self, keys: Mapping[str, str]) -> None:
        """Apply the inventory's ``keys:``; unknown ids and keys already in use are named in
        a notification (a clashing remap is not applied)."""
        from sparktop.ui.keymap import checked_keymap
        from sparktop.ui.screens.help import all_bindings

        keymap, problems = checked_keymap(self._normalize_keymap(keys), all_bindings(type(self)))
        for problem in problems:
            self.notify(problem, severity="warning", timeout=15)
        self.keymap = dict(keymap)
        self.set_keymap(keymap)

    # -- data in ---------------------------------------------------------------------------

    def _record(self, sample: Sample) -> None:
        """Poller callback (event loop): record the sample and derived events; no rendering."""
        if isinstance(sample, NodeSample):
            previous: Sample | None = self.state.nodes.get(sample.node)
            if sample.ok and sample.gpus:
                self.known_gpus[sample.node] = sample.gpus
                self.known_time_s[sample.node] = sample.time_s
                self.known_nodes[sample.node] = sample
        else:
            previous = self.state.engines.get(sample.engine)
        self.state.apply(sample)
        if previous is None and not self._tick_soon and self.is_running:
            # A node's or engine's first sample is drawn at once, not at the next tick (up
            # to a second later): the first screen with data is what a user waits for.
            self._tick_soon = True
            self.call_later(self._first_sample_tick)
        if self.derives_events:
            for event in transition_events(previous, sample):
                self.add_event(event)
        for hook in self.sample_hooks:
            hook(sample)

    def _first_sample_tick(self) -> None:
        self._tick_soon = False
        self.tick()

    def focus_main(self) -> None:
        """Focus the Nodes table; with no nodes, the first engine shown (Enter opens its
        details), else the engines pane. A hidden table never keeps the focus: its keys
        would act on rows nobody sees."""
        table = self.query_one(NodeTable)
        if table.display:
            table.focus()
        else:
            self.query_one(EnginePanel).focus_first()

    @property
    def derives_events(self) -> bool:
        """Whether the events pane gets the UI's own events (node down/recovered, scrape
        failed/recovered, server restarted, gauges stale). The alert engine's rules cover
        each of these (``node.down``, ``engine.down``/``restarted``/``stale``), so with an
        engine attached they would be logged twice; ``own_events`` overrides (replay: the
        recording holds the alert engine's events)."""
        return self.alert_engine is None if self.own_events is None else self.own_events

    def feed(self, sample: Sample) -> None:
        """Record a sample from outside the poller (replay): coalesces per subject."""
        self.post_message(SampleArrived(sample))

    def on_layout_changed(self, message: LayoutChanged) -> None:
        self.tick()

    def on_sample_arrived(self, message: SampleArrived) -> None:
        self._record(message.sample)

    def add_event(self, event: EventLike) -> None:
        """Add an event (derived transition or the alert engine's) to the events pane."""
        self._main(EventLog).add(event)
        self.post_message(EventRecorded(event))

    def set_active_alerts(self, alerts: Sequence[AlertLike]) -> None:
        """Show active alerts in the alert bar (severity, subject, message, since_s)."""
        self._main(AlertBar).show_alerts(alerts, self.clock())

    # -- rendering -------------------------------------------------------------------------

    def _tick_every(self, interval_s: float) -> None:
        """Call :meth:`tick` every ``interval_s`` from the event loop, on a fixed grid (a late
        tick skips the slots it missed, as Textual's timers do). A Textual timer wakes its
        own task through a sleeping future each time: two callbacks a tick, not one."""
        loop = asyncio.get_running_loop()
        start = loop.time()

        def run() -> None:
            if self._exit:
                return
            slots = int((loop.time() - start) / interval_s) + 1
            self._tick_handle = loop.call_at(start + slots * interval_s, run)
            try:
                self.tick()
            except Exception as error:  # as a Textual timer's callback: the app shows it
                self._handle_exception(error)

        self._tick_handle = loop.call_at(start + interval_s, run)

    def _main(self, kind: type[_W], selector: str | None = None) -> _W:
        """``query_one(selector or kind)`` on the main screen, kept while the widget is
        attached (its widgets are made once; a tick asked for ten, ~6 µs each)."""
        key = selector or kind
        found = self._main_widgets.get(key)
        if found is None or not found.is_attached:
            found = self._main_widgets[key] = self.query_one(selector or kind.__name__, kind)
        return cast(_W, found)

    def tick(self) -> None:
        """Render what changed since the last tick (drawn on the screen as it ends)."""
        try:
            with frame(self):
                self._tick()
        except NoMatches:
            if self.is_running and self.screen_stack:
                raise
            # A timer or message that landed while the screens were being torn down.

    def _tick(self) -> None:
        now = self.clock()
        view_now = self.paused_at if self.paused_at is not None else now
        config = self.view_config
        # The rules first: the table reads the GPU views and peer facts they built.
        alerts = self.alert_engine
        if alerts is not None:
            for event in alerts.update(self.state, now):
                self.add_event(event)
            self.set_active_alerts(alerts.active())
        table = self._main(NodeTable)
        rows = node_rows(
            self.state, self.known_gpus, view_now, config, table.narrow, table.columns_spec,
            alerts.last_context if alerts is not None else None,
        )  # fmt: skip
        self.node_states = node_states(rows)
        query = self._main(FilterBar).query_text
        if query:
            rows = [r for r in rows if matches(query, (r.node, *(c[0] for c in r.cells.values())))]
        engines, log = self._main(EnginePanel), self._main(EventLog)
        engines.query_text = query
        log.set_filter(query)
        cells = table.sync(rows)
        cells += engines.sync(
            self.state, view_now, config, self.engine_order, self.max_num_seqs,
            self.plan.profile_name_for, self.expected_row,
            alerts.active() if alerts is not None else (),
        )  # fmt: skip
        newest = self.state.newest_time_s()
        self._main(HeaderBar).show(
            config.cluster, config.profile, self.poller.interval_s,
            None if newest is None else now - newest,
            paused=self.poller.paused, recording=self.recording,
            recording_failed=isinstance(alerts, AlertPipeline) and alerts.recording_failed,
        )  # fmt: skip
        log.flush()
        pane = self._main(Body).pane
        if pane is not None:
            pane.live_changed(self.live_engine())
        if isinstance(self.screen, LiveScreen):
            self.screen.follow(self)
        nodes = self.state.nodes.values()
        no_driver = bool(nodes) and all(s.state is NodeState.NO_DRIVER for s in nodes)
        self._main(Static, "#notice").display = no_driver
        self.ticks += 1
        self.last_tick_cells = cells
        self.cells_written += cells

    async def on_unmount(self) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        await self.poller.aclose()
        if self.metrics is not None:
            await self.metrics.close()


def serve_metrics(app: SparktopApp, metrics: MetricsEndpoint) -> None:
    """Serve ``app``'s judgements on ``metrics`` (a bound ``MetricsEndpoint``) while it runs:
    the same series as ``sparktop exporter``, from the monitor's own state and alerts."""
    from sparktop.exporter.judgements import Judgements, SourceStats

    stats = SourceStats()
    app.sample_hooks = (*app.sample_hooks, stats.observe)
    metrics.register(Judgements(app.state, lambda: app.alert_engine, stats))
    app.metrics = metrics


def run_tui(
    plan: Plan,
    sources: Sequence[Source],
    alerts: AlertEngine | AlertPipeline | None = None,
    *,
    theme: str | None = None,
    metrics: MetricsEndpoint | None = None,
) -> int:
    """Run the monitor until the operator quits; returns the exit code. A pipeline's bell
    (``--bell``) rings the app's; ``metrics`` (a bound endpoint) serves the monitor's
    judgements."""
    app = SparktopApp(plan, sources, alerts, theme=theme)
    if isinstance(alerts, AlertPipeline):
        alerts.bell = app.bell
    if metrics is not None:
        serve_metrics(app, metrics)
    gcpolicy.tune()  # a long-running process: see sparktop.gcpolicy
    with held_warnings():  # never written over the screen
        result = app.run()
    return int(result or 0)
