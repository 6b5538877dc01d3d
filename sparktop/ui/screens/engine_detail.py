"""EngineDetailScreen: every figure of one engine's newest sample with its source or reason,
the request breakdown (TTFT as queue + prefill, decode, end to end, per-request TPOT),
speculative decoding per draft position, the data-parallel ranks and the engine's events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Label, Static

from sparktop.model import NA, EngineSample, Quantile, is_num
from sparktop.safe_text import printable
from sparktop.ui import format as fmt
from sparktop.ui.engine_fields import NO_LIFETIME, field_label, unit_value
from sparktop.ui.engine_views import LIFETIME_MARK, engine_state
from sparktop.ui.events import EventLike
from sparktop.ui.screens.live import LiveScreen
from sparktop.ui.views import ViewConfig
from sparktop.ui.widgets.event_log import event_line
from sparktop.ui.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from sparktop.ui.app_details import DetailNavigation

SKIPPED = frozenset({"engine", "ranks", "extra"})
"""Fields shown elsewhere on the screen (the title, the ranks table) or not at all."""


def field_text(value: object) -> str:
    """One field's value as the table shows it; NA keeps its reason."""
    if isinstance(value, NA):
        return f"n/a ({value.reason})"
    if isinstance(value, Quantile):
        return str(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_short(v)}" for k, v in value.items()) or "none"
    if isinstance(value, tuple):
        return ", ".join(_short(v) for v in value) or "none"
    return _short(value)


def _short(value: object) -> str:
    if isinstance(value, float) and is_num(value):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


CLOCK_FIELDS = frozenset({"time_s", "since_s", "window_start_s"})
"""Wall-clock instants (Unix seconds): shown as local ``HH:MM:SS``."""
DURATION_FIELDS = frozenset({"latency_s", "window_s", "now_window_s"})
"""Spans in seconds: shown as durations (``340 ms``, ``30.00 s``)."""
UNSET_REASONS = {
    "since_s": "answering: no failure to date",
    "latency_s": "no answer timed",
    "window_s": "rates need two scrapes",
    "now_window_s": "rates need two scrapes",
    "window_start_s": "rates need two scrapes",
}
"""Why an optional field is empty (None), said as the rest of the UI says n/a."""


def _field_value(name: str, value: object) -> str:
    if name == "since_start" and not value:
        return NO_LIFETIME
    if (in_unit := unit_value(name, value)) is not None:
        return in_unit
    if value is None:
        return f"n/a ({UNSET_REASONS.get(name, 'not set')})"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if name in CLOCK_FIELDS and is_num(value):
        return fmt.clock_time(float(value))
    if name in DURATION_FIELDS and is_num(value):
        return fmt.seconds(float(value))
    if isinstance(value, str) and not value:
        return "none"
    return field_text(value)


def engine_field_rows(sample: EngineSample) -> list[tuple[str, str, str]]:
    """(field name, label, value) for every EngineSample field but the skipped ones: the
    label in the field's standard terms (:func:`~sparktop.ui.engine_fields.field_label`), the
    value in its unit, as the rest of the UI: n/a with the reason, yes/no, clock times."""
    return [
        (f.name, field_label(f.name), _field_value(f.name, getattr(sample, f.name)))
        for f in fields(EngineSample)
        if f.name not in SKIPPED
    ]


def breakdown_lines(sample: EngineSample) -> list[str]:
    """Where a request's time went and what speculative decoding yields, as plain lines."""

    lifetime = set(sample.since_start)

    def mark(*names: str) -> str:  # the main pane's mark of a figure over the lifetime
        return LIFETIME_MARK if lifetime.intersection(names) else ""

    def mean_p50(stem: str) -> str:
        mean, p50 = getattr(sample, f"{stem}_mean_s"), getattr(sample, f"{stem}_p50")
        if not (is_num(mean) or isinstance(p50, Quantile)):
            return f"n/a ({getattr(mean, 'reason', 'not available')})"
        return f"mean {fmt.seconds(mean)}, p50 {fmt.quantile(p50)}" + mark(
            f"{stem}_mean_s", f"{stem}_p50"
        )

    if not sample.window_s:
        window = "since server start (no earlier scrape to diff against yet)"
    elif lifetime:
        window = (
            f"in the last {sample.window_s:.0f} s; {LIFETIME_MARK} since server start "
            "(none finished in the window)"
        )
    else:
        window = f"in the last {sample.window_s:.0f} s"
    lines = [
        f"requests finished {window}",
        f"TTFT p50 {fmt.quantile(sample.ttft_p50)}{mark('ttft_p50')}; per request it is about "
        f"queue ({mean_p50('queue_time')}) + prefill ({mean_p50('prefill_time')})",
        f"decode {mean_p50('decode_time')}; end to end {mean_p50('e2e_latency')}",
        f"per-request TPOT {mean_p50('tpot')} (ITL p50 {fmt.quantile(sample.itl_p50)}"
        f"{mark('itl_p50')})",
        f"prompt tokens computed {fmt.num(sample.prefill_computed_tps)} tok/s of "
        f"{fmt.num(sample.prefill_tps)} (cache hits excluded)",
        f"waiting {fmt.num(sample.waiting)}: capacity {fmt.num(sample.waiting_capacity)}, "
        f"deferred {fmt.num(sample.waiting_deferred)}",
        f"finished {fmt.num(sample.requests_finished_per_s, '.2f')}/s, aborted "
        f"{fmt.num(sample.requests_aborted_per_s, '.2f')}/s, errored "
        f"{fmt.num(sample.requests_errored_per_s, '.2f')}/s, refused at admission "
        f"{fmt.num(sample.admission_rejections_per_s, '.2f')}/s",
    ]
    rate, length = sample.spec_acceptance_rate, sample.spec_mean_accept_len
    if is_num(rate):
        spec = f"speculative acceptance {rate * 100:.0f}% of draft tokens"
        if is_num(length):
            spec += f", {length:.2f} tokens per step"
        positions = sample.spec_accept_by_position
        if positions:
            spec += "; by position " + " ".join(f"{p * 100:.0f}%" for p in positions)
        lines.append(spec)
    else:
        lines.append(f"speculative decoding: n/a ({getattr(rate, 'reason', '')})")
    return lines


@dataclass(frozen=True, slots=True)
class EngineDetail:
    """What the screen shows of one engine: its newest sample and its events."""

    engine: str
    sample: EngineSample | None
    events: tuple[EventLike, ...]
    alerts: tuple[Any, ...] = ()
    """The active alerts (the app's alert engine): the title's verdict is the engine row's,
    its worst alert, never "ok" beside a CRIT on it."""


class EngineDetailScreen(LiveScreen):
    """Everything known about one engine; the app hands it a fresh :class:`EngineDetail`
    every tick (:meth:`show`). ``escape`` goes back."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back", id="engine_detail.back"),
    ]

    DEFAULT_CSS = """
    EngineDetailScreen > VerticalScroll { padding: 0 1; }
    EngineDetailScreen .section { margin: 1 0 0 0; text-style: bold; color: $spark-accent; }
    EngineDetailScreen DataTable { height: auto; }
    """

    def __init__(self, detail: EngineDetail, config: ViewConfig) -> None:
        super().__init__()
        self.engine = detail.engine
        self.curve_engine = detail.engine
        self.detail = detail
        self.config = config
        self._shown: EngineSample | None = None
        self._mounted = False

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static("", id="title")
            yield Label("request breakdown", classes="section")
            yield Static("", id="breakdown")
            yield Label("fields", classes="section")
            yield DataTable(id="fields", cursor_type="none", zebra_stripes=True)
            yield Label("events", classes="section")
            yield Static("", id="engine-events")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._mounted = True
        self.show(self.detail)

    def follow(self, app: DetailNavigation) -> None:
        self.show(app.engine_detail(self.engine))

    def show(self, detail: EngineDetail) -> None:
        """Show ``detail`` (a no-op until the engine's sample changes)."""
        self.detail = detail
        sample = detail.sample
        if sample is None or sample is self._shown or not self._mounted:
            return
        self._shown = sample
        state, _role = engine_state(sample, sample.time_s, self.config, detail.alerts)
        self.query_one("#title", Static).update(Content.assemble(
            ("engine ", "$spark-dim"), (self.engine, "bold"), ("  ", ""), state,
            ("  ", ""), (printable(f"{sample.kind} {sample.model}".strip()), "$spark-dim"),
            ("  sampled ", "$spark-dim"), fmt.clock_time(sample.time_s),
        ))  # fmt: skip
        # Content (not markup): messages and reasons come from the server.
        self.query_one("#breakdown", Static).update(
            Content("\n").join(Content(line) for line in breakdown_lines(sample))
        )
        self._fill(sample)
        events = sorted(detail.events, key=lambda e: e.time_s, reverse=True)
        lines = [event_line(e) for e in events]
        self.query_one("#engine-events", Static).update(
            Content("\n").join(lines[:20]) if lines else Content("none")
        )

    def _fill(self, sample: EngineSample) -> None:
        table: DataTable[Any] = self.query_one("#fields", DataTable)
        rows = engine_field_rows(sample)
        if not table.columns:
            table.add_column("figure", key="label")
            table.add_column("value", key="value")
            table.add_column("field", key="field")  # the key, as in --json and recordings
        if table.row_count != len(rows):
            table.clear()
            for name, label, value in rows:
                table.add_row(Text(label), Text(value), Text(name, style="dim"), key=name)
            return
        for name, _label, value in rows:
            table.update_cell(name, "value", Text(value), update_width=True)
