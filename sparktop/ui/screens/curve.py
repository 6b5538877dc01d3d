"""CurveScreen: the profile's curve for one engine, with where its live window sits on it.

TTFT, aggregate or per-request decode (``m`` cycles) against prompt tokens on log axes, a
line per measured concurrency, the band of the line nearest the window's load shaded, the
window's expected figure (○) and live figure (◆). The app hands it the engine's newest
sample every tick (:meth:`CurveScreen.show`); the curve itself is computed again only when
the metric or the span it must hold changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.widgets import Static

from sparktop.alerts.curve_point import operating_points
from sparktop.model import EngineSample
from sparktop.safe_text import printable
from sparktop.sweep.expected.curve import OperatingPoint, ProfileCurve, profile_curve
from sparktop.sweep.expected.matched import MatchedExpected, on_grid
from sparktop.sweep.profiles.profile import Profile
from sparktop.ui.curve_plot import curve_caption
from sparktop.ui.screens.live import LiveScreen
from sparktop.ui.widgets.curve import CurvePlot
from sparktop.ui.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from sparktop.ui.app_details import DetailNavigation

METRIC_CYCLE = ("ttft_s", "aggregate_tps", "decode_tps")
"""What ``m`` steps through: the columns the expected strip compares."""


@dataclass(frozen=True, slots=True)
class CurveDetail:
    """What the screen draws: the engine, its newest sample (None before its first), the
    plan's profile (None: no profile) and window-matched row (the expected strip's)."""

    engine: str
    sample: EngineSample | None
    profile: Profile | None
    row: MatchedExpected | None


class CurveScreen(LiveScreen):
    """One engine's position on its profile's curve. ``escape`` goes back, ``m`` cycles the
    figure."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back", id="curve.back"),
        Binding("m", "next_metric", "Figure", tooltip="curve: next figure (TTFT, aggregate, "
                "decode/req)", id="curve.metric"),
    ]  # fmt: skip

    DEFAULT_CSS = """
    CurveScreen > #curve-title { height: auto; padding: 0 1; }
    CurveScreen > CurvePlot { height: 1fr; }
    CurveScreen > #curve-caption { height: auto; max-height: 4; padding: 0 1; color: $spark-dim; }
    """

    DRAWS_CURVE = True

    def __init__(self, detail: CurveDetail, metric: str = "ttft_s") -> None:
        super().__init__()
        self.engine = detail.engine
        self.curve_engine = detail.engine
        self.detail = detail
        self.metric = metric
        self._curve: tuple[tuple[object, ...], ProfileCurve] | None = None
        self._shown: tuple[object, ...] | None = None
        self._mounted = False

    def compose(self) -> ComposeResult:
        yield Static("", id="curve-title")
        yield CurvePlot()
        yield Static("", id="curve-caption")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._mounted = True
        self.show(self.detail)

    def action_next_metric(self) -> None:
        self.metric = METRIC_CYCLE[(METRIC_CYCLE.index(self.metric) + 1) % len(METRIC_CYCLE)]
        self._shown = None
        self.show(self.detail)

    def live_point(self) -> tuple[OperatingPoint | None, str]:
        """The window's point for the shown figure, or None and why there is none."""
        sample, row = self.detail.sample, self.detail.row
        if sample is None:
            return None, "no sample yet"
        if row is None:
            return None, "no sweep profile"
        got = row(sample)
        if isinstance(got, str):
            return None, got
        return operating_points(got, sample).get(self.metric), ""

    def curve(self, live: OperatingPoint | None) -> ProfileCurve | None:
        """The profile's curve for the shown figure, spanning the live prompt (kept while
        the span it needs is the same)."""
        profile = self.detail.profile
        if profile is None:
            return None
        include = (on_grid(live.prompt_tokens),) if live is not None else ()
        key = (profile, self.metric, include)
        if self._curve is None or self._curve[0] != key:
            row = self.detail.row
            estimator = row.estimator if row is not None else None
            curve = profile_curve(profile, self.metric, estimator=estimator, include=include)
            self._curve = (key, curve)
        return self._curve[1]

    def follow(self, app: DetailNavigation) -> None:
        self.show(app.curve_detail(self.engine))

    def show(self, detail: CurveDetail) -> None:
        """Show ``detail`` (a no-op until the sample or the figure changes)."""
        self.detail = detail
        if not self._mounted:
            return
        key = (detail.sample, self.metric, detail.profile)
        if key == self._shown:
            return
        self._shown = key
        live, why = self.live_point()
        curve = self.curve(live)
        self.query_one(CurvePlot).show(curve, live, missing="no sweep profile")
        profile = detail.profile.name if detail.profile is not None else "no profile"
        label = curve.label if curve is not None else self.metric
        model = detail.sample.model if detail.sample is not None else ""
        self.query_one("#curve-title", Static).update(Content.assemble(
            ("curve ", "$spark-dim"), (label, "bold"),
            (" vs prompt tokens · engine ", "$spark-dim"),
            (printable(self.engine), "bold"), ("  ", ""), (printable(model), "$spark-dim"),
            (" · profile ", "$spark-dim"), (profile, "$spark-accent"),
            ("  (m: next figure)", "$spark-dim"),
        ))  # fmt: skip
        caption = curve_caption(curve, live) if curve is not None else []
        if curve is not None and live is None and why:
            caption.append(f"live window: {why}")
        # Content (not markup): reasons come from the server.
        self.query_one("#curve-caption", Static).update(
            Content("\n").join(Content(printable(line)) for line in caption)
        )
