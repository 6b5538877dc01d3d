"""EnginePanel: one block per inference server (lines, sparklines, expected strip)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.events import Click, Resize
from textual.widgets import Static

from sparktop.cluster import ClusterState
from sparktop.model import EngineSample
from sparktop.safe_text import printable
from sparktop.ui import format as fmt
from sparktop.ui import styles
from sparktop.ui.engine_views import engine_lines, limit_seqs
from sparktop.ui.expected import DeficitClock, RowFn, expected_lines
from sparktop.ui.messages import EngineChosen, LayoutChanged
from sparktop.ui.views import ViewConfig
from sparktop.ui.widgets.filter_bar import matches
from sparktop.ui.widgets.spark import SparkRow
from sparktop.ui.widgets.text_block import TextBlock

SPARK_POINTS = 120


class ExpectedStrip(TextBlock):
    """The profile's row for the live (prompt length, running) beside the live values."""

    DEFAULT_CSS = """
    ExpectedStrip {
        height: auto;
        padding: 0 0 0 2;
        background: $surface;
    }
    """


class EngineBlock(Vertical, can_focus=True):
    """One engine: text lines, decode tok/s and KV % sparklines (one :class:`SparkRow`), and
    its ExpectedStrip. Focusable (Tab, a click): Enter opens its details, ``c`` its curve."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "details", "Details", tooltip="open the engine's detail screen",
                id="engine.details"),
    ]  # fmt: skip

    DEFAULT_CSS = """
    EngineBlock {
        height: auto;
        margin: 0 0 1 0;
    }
    EngineBlock:focus { background: $boost; }
    EngineBlock:last-of-type { margin: 0; }
    EngineBlock > .engine-lines { height: auto; }
    EngineBlock SparkRow > .spark-row--label { color: $spark-dim; }
    EngineBlock SparkRow > .spark--max-color { color: $spark-accent; }
    EngineBlock SparkRow > .spark--min-color { color: $spark-accent 30%; }
    """

    def __init__(self, engine: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = engine
        self.sample: EngineSample | None = None
        self._shown: tuple[object, ...] | None = None
        self._expected_shown: object = None
        self._laid_out_width = 0

    def compose(self) -> ComposeResult:
        yield TextBlock("", classes="engine-lines")
        # KV % on 0–100 and decode from 0: a steady 1 % or an idle start draws low, not a
        # min–max swing or a full bar next to "decode 0 tok/s".
        yield SparkRow(
            ("decode tok/s", "KV %"), scales=((0.0, None), (0.0, 100.0)), caption_width=12
        )
        yield ExpectedStrip("")

    def show(
        self,
        state: ClusterState,
        sample: EngineSample,
        now: float,
        config: ViewConfig,
        max_seqs: float | None,
        expected: tuple[str, RowFn | None, DeficitClock],
        alerts: Sequence[Any] = (),
    ) -> bool:
        """Render if the sample or its displayed state changed; True when anything changed.
        ``alerts``: the active ones (the worst on this engine is its header's state)."""
        width = self.size.width or 118
        lines = engine_lines(sample, now, config, max_seqs, width, alerts)
        key = tuple(tuple(line) for line in lines)
        changed = False
        if key != self._shown:
            self._shown = key
            self.query_one(".engine-lines", TextBlock).set_lines([styles.line(r) for r in lines])
            changed = True
        if sample is not self.sample:
            self.sample = sample
            history = state.history
            # The last ~3 s rate where the source gives one: a stop draws as a drop within
            # seconds, not as the 30 s window's ramp; else the window's (Prometheus sources).
            recent = history.get(sample.engine, "decode_tps_now")
            decode_series = recent if len(recent) else history.get(sample.engine, "decode_tps")
            kv_series = history.get(sample.engine, "kv_usage")
            decode = decode_series.values(last=SPARK_POINTS)
            kv = kv_series.values(last=SPARK_POINTS)
            sparks = self.query_one(SparkRow)
            sparks.set_data(0, decode)
            sparks.set_data(1, tuple(v * 100 for v in kv))
            # btop's habit: each graph says its scale and the time it covers.
            top = fmt.num(max(decode)) if decode else "n/a"
            sparks.set_caption(0, f"0–{top} {fmt.span(decode_series.span_s(SPARK_POINTS))}")
            sparks.set_caption(1, f"0–100 {fmt.span(kv_series.span_s(SPARK_POINTS))}")
            changed = True
        profile_name, row, clock = expected
        strip = expected_lines(
            sample, profile_name, row, config.expected_deficit_pct, clock, now, width - 2
        )
        strip_key = tuple(tuple(line) for line in strip)
        if strip_key != self._expected_shown:
            self._expected_shown = strip_key
            self.query_one(ExpectedStrip).set_lines([styles.line(r) for r in strip])
            changed = True
        return changed

    def action_details(self) -> None:
        self.post_message(EngineChosen(self.engine))

    def on_click(self, event: Click) -> None:
        if event.chain >= 2:  # a double click opens, as Enter does; one click focuses
            self.action_details()

    def on_resize(self, event: Resize) -> None:
        # Lines are packed to the width: lay them out again now (a height change, which
        # new content itself causes, needs nothing).
        if event.size.width != self._laid_out_width:
            self._laid_out_width = event.size.width
            self._shown = None
            self._expected_shown = None
            self.post_message(LayoutChanged())


class EnginePanel(VerticalScroll):
    """Every engine's block, in inventory order; blocks are mounted once and updated.
    ``empty_text`` says why there is none yet (what was tried)."""

    DEFAULT_CSS = """
    EnginePanel {
        height: auto;
        max-height: 55%;
        min-height: 5;
        padding: 0 1;
        border-top: solid $panel;
    }
    EnginePanel > .empty { color: $spark-dim; }
    """

    def __init__(
        self, empty_text: str = "no inference server configured or answering", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.blocks: dict[str, EngineBlock] = {}
        self.clock = DeficitClock()
        self.empty_text = empty_text
        self.query_text = ""
        """The ``/`` filter: blocks whose engine name, kind, model or state do not hold it
        are hidden ("" shows all)."""
        self._no_match_said = False
        """Whether a "no engine matches" line was mounted (and not removed since)."""
        self._auto_focused: EngineBlock | None = None
        """The block :meth:`focus_first` gave the focus, until the operator moves it."""

    def compose(self) -> ComposeResult:
        yield Static(self.empty_text, classes="empty")

    def sync(
        self,
        state: ClusterState,
        now: float,
        config: ViewConfig,
        order: Mapping[str, int],
        max_seqs: Mapping[str, float],
        profile_name: Callable[[str], str],
        row: RowFn | None,
        alerts: Sequence[Any] = (),
    ) -> int:
        """Update every engine block; mount blocks for new engines. Returns blocks changed.
        ``profile_name``: engine → the name of the profile its expected row is from;
        ``alerts``: the active alerts (each engine's header shows its worst)."""
        changed = shown = 0
        names = sorted(state.engines, key=lambda n: (order.get(n, 1_000_000), n))
        new = [n for n in names if n not in self.blocks]
        if new:
            self.query(".empty").remove()
            for name in new:
                block = self.blocks[name] = EngineBlock(name)
                # Mount in order: before the first existing block that sorts after it.
                later = [
                    self.blocks[n]
                    for n in names[names.index(name) + 1 :]
                    if n in self.blocks and n not in new
                ]
                self.mount(block, before=later[0] if later else None)
            return len(new)  # the new blocks render on the next tick, once composed
        for name in names:
            block = self.blocks[name]
            if not block.is_mounted:
                continue  # mounted by an earlier tick, not composed yet (a resize re-ticks)
            sample = state.engines[name]
            # A node of its TP group matches too: filtering on a node keeps what it serves.
            texts = (name, sample.kind, sample.model, str(sample.state),
                     *config.engine_nodes.get(name, ()))  # fmt: skip
            block.display = matches(self.query_text, texts)
            shown += block.display
            seqs = limit_seqs(sample, max_seqs.get(name))
            expected = (profile_name(name), row, self.clock)
            if block.show(state, sample, now, config, seqs, expected, alerts):
                changed += 1
        self._say_no_match(bool(names) and not shown)
        focused = self.app.focused
        # Engines only, the focus not moved by the operator: the first engine shown has it
        # (blocks composed since, or an earlier engine that answered late).
        auto = focused is self or (focused is not None and focused is self._auto_focused)
        if auto and self.first_shown() is not focused:
            self.focus_first(unless_moved=True)
        return changed

    def first_shown(self) -> EngineBlock | None:
        """The first block on screen, in inventory order (blocks are mounted in it, in
        whatever order their engines first answered), or None."""
        for child in self.children:
            if isinstance(child, EngineBlock) and child.display and child.is_mounted:
                return child
        return None

    def focus_first(self, *, unless_moved: bool = False) -> None:
        """Focus the first engine shown (the pane itself when none is). With
        ``unless_moved``, only while the focus is on the pane or on the block this gave it
        last: an engine that answers late but sorts first takes the focus the operator has
        not moved yet."""
        focused = self.app.focused
        if (
            unless_moved
            and focused is not self
            and (focused is None or focused is not self._auto_focused)
        ):
            return
        first = self.first_shown()
        self._auto_focused = first
        (first or self).focus()

    def _say_no_match(self, none_shown: bool) -> None:
        """A line saying the filter hid every engine (the pane was blank), or none."""
        if not none_shown and not self._no_match_said:
            return  # nothing to remove: no query of the pane on every tick
        notes = self.query(".no-match")
        self._no_match_said = none_shown
        if not none_shown:
            notes.remove()
            return
        text = f'no engine matches "{printable(self.query_text.strip())}" (Esc clears)'
        if notes:
            notes.first(Static).update(text)
            return
        self.mount(Static(text, classes="empty no-match", markup=False))
