"""The monitor's way into its detail screens: a node's, an engine's, an engine's curve, and
the ``:`` command line that reaches them (and the keys' actions) by name.

A base of :class:`~sparktop.ui.app.SparktopApp` (kept apart so the app's module stays
small): Enter on a Nodes row or an engine block, the palette and ``c`` land here; each
screen is given what it shows (``node_detail``, ``engine_detail``, ``curve_detail``) and the
app's tick hands it a fresh copy (:meth:`~sparktop.ui.screens.live.LiveScreen.follow`). The
screens' modules are imported when one is first opened, never at start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import App

from sparktop.alerts.peers import node_facts
from sparktop.cluster import ClusterState
from sparktop.model import EngineSample, GpuSample, NodeSample
from sparktop.plan import Plan
from sparktop.ui.command_line import parse_command
from sparktop.ui.messages import EngineChosen, NodeChosen
from sparktop.ui.safe_text import printable
from sparktop.ui.screens.live import LiveScreen
from sparktop.ui.views import ROW_SEP, Cell, ViewConfig
from sparktop.ui.widgets.command_bar import CommandBar
from sparktop.ui.widgets.engine_panel import EngineBlock, EnginePanel
from sparktop.ui.widgets.event_log import EventLog
from sparktop.ui.widgets.node_table import NodeTable

if TYPE_CHECKING:
    from sparktop.alerts.engine import AlertEngine
    from sparktop.alerts.pipeline import AlertPipeline
    from sparktop.ui.screens.curve import CurveDetail
    from sparktop.ui.screens.engine_detail import EngineDetail
    from sparktop.ui.screens.node_detail import NodeDetail


class DetailNavigation(App[int]):
    """Opening the detail screens and jumping to rows; the app sets these attributes."""

    state: ClusterState
    plan: Plan
    view_config: ViewConfig
    engine_order: dict[str, int]
    known_gpus: dict[str, tuple[GpuSample, ...]]
    known_time_s: dict[str, float]
    known_nodes: dict[str, NodeSample]
    node_states: dict[str, Cell]
    alert_engine: AlertEngine | AlertPipeline | None

    @on(NodeChosen)
    def _node_chosen(self, message: NodeChosen) -> None:
        self.show_node_details(message.node, message.gpu_key)

    def show_node_details(self, node: str, gpu_key: str | None = None) -> None:
        """Open the node's detail screen (Enter on a row, the palette)."""
        if node in self.state.nodes:
            from sparktop.ui.screens.node_detail import NodeDetailScreen

            self.push_screen(NodeDetailScreen(self.node_detail(node), gpu_key))
        else:
            self.notify(f"{node}: no details yet (its first poll has not answered)")

    def node_detail(self, node: str) -> NodeDetail:
        """What the detail screen shows of ``node``, as of now."""
        from sparktop.ui.screens.node_detail import NodeDetail

        events = self.query_one(EventLog).events
        return NodeDetail(
            node=node,
            sample=self.state.nodes.get(node),
            known_gpus=self.known_gpus.get(node, ()),
            known_time_s=self.known_time_s.get(node),
            known_sample=self.known_nodes.get(node),
            state=self.node_states.get(node, ("ok", "ok")),
            history=self.state.history,
            events=tuple(e for e in events if e.subject.split("/")[0] == node),
            peers=tuple(
                node_facts(
                    self.state, self.view_config.thresholds, self.view_config.engine_nodes, node
                )
            ),
        )

    def show_engine_details(self, engine: str) -> None:
        """Open the engine's detail screen (Enter on its block, the palette)."""
        if engine in self.state.engines:
            from sparktop.ui.screens.engine_detail import EngineDetailScreen

            self.push_screen(EngineDetailScreen(self.engine_detail(engine), self.view_config))

    @on(EngineChosen)
    def _engine_chosen(self, message: EngineChosen) -> None:
        self.show_engine_details(message.engine)

    def action_show_curve(self) -> None:
        """The curve of the engine in focus: its detail screen's, its focused block's, else
        the first engine's (the budget's)."""
        screen, focused = self.screen, self.focused
        if isinstance(screen, LiveScreen) and screen.DRAWS_CURVE:
            return
        if isinstance(screen, LiveScreen) and screen.curve_engine is not None:
            engine: str | None = screen.curve_engine
        elif isinstance(focused, EngineBlock):
            engine = focused.engine
        else:
            live = self.live_engine()
            engine = live.engine if live is not None else None
        if engine is None:
            self.notify("no engine to draw the curve for yet (none has answered)")
            return
        self.show_curve(engine)

    def show_curve(self, engine: str) -> None:
        """Open ``engine``'s curve screen (``c``, the palette's ``curve <engine>``)."""
        from sparktop.ui.screens.curve import CurveScreen

        if isinstance(self.screen, CurveScreen):
            self.pop_screen()
        self.push_screen(CurveScreen(self.curve_detail(engine)))

    def curve_detail(self, engine: str) -> CurveDetail:
        """What the curve screen draws of ``engine``, as of now."""
        from sparktop.ui.screens.curve import CurveDetail

        sample = self.state.engines.get(engine)
        return CurveDetail(
            engine, sample, self.plan.profile_for(engine), self.plan.matched_for(engine)
        )

    def engine_detail(self, engine: str) -> EngineDetail:
        """What the engine detail screen shows of ``engine``, as of now."""
        from sparktop.ui.screens.engine_detail import EngineDetail

        events = self.query_one(EventLog).events
        return EngineDetail(
            engine=engine,
            sample=self.state.engines.get(engine),
            events=tuple(e for e in events if e.subject == engine),
            alerts=tuple(self.alert_engine.active()) if self.alert_engine is not None else (),
        )

    def live_engine(self) -> EngineSample | None:
        """The engine the budget is about: the first in the plan's order that has a sample."""
        engines = self.state.engines
        names = sorted(engines, key=lambda n: (self.engine_order.get(n, 1_000_000), n))
        return engines[names[0]] if names else None

    def jump_to_node(self, node: str) -> None:
        """Move the Nodes cursor to the node's first row (command palette)."""
        table = self.query_one(NodeTable)
        for key in table.row_keys:
            if key.partition(ROW_SEP)[0] == node:
                table.move_cursor(table.get_row_index(key))
                table.focus()
                return

    def jump_to_engine(self, engine: str) -> None:
        block = self.query_one(EnginePanel).blocks.get(engine)
        if block is not None:
            block.scroll_visible()

    @on(CommandBar.Entered)
    async def _command_entered(self, message: CommandBar.Entered) -> None:
        """Run a ``:`` line: focus goes back where ``:`` left it (the Nodes table, else the
        engines), then the line's action or jump; a line it cannot read is said in one
        notice."""
        table = self.query_one(NodeTable)
        (table if table.display else self.query_one(EnginePanel)).focus()
        nodes = [*dict.fromkeys([*self.plan.nodes, *self.state.nodes])]
        engines = [*dict.fromkeys([*(e.name for e in self.plan.engines), *self.state.engines])]
        done = parse_command(message.line, nodes, engines)
        if isinstance(done, str):
            self.notify(printable(done), severity="warning", timeout=5, markup=False)
        elif done.target and done.command == "details":
            show = self.show_node_details if done.kind == "node" else self.show_engine_details
            show(done.target)
        elif done.target and done.command == "curve":
            self.show_curve(done.target)
        elif done.target:
            jump = self.jump_to_node if done.kind == "node" else self.jump_to_engine
            jump(done.target)
        elif done.action:
            await self.run_action(done.action)
