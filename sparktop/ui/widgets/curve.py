"""CurvePlot: a profile's curve with the live (or typed) operating point, via textual-plotext."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual.widget import Widget

from sparktop.sweep.expected.curve import OperatingPoint, ProfileCurve
from sparktop.ui.curve_plot import RGB, CurveColours, draw_curve

if TYPE_CHECKING:
    from textual_plotext import Plot

SERIES_VARIABLES = ("spark-accent", "accent", "spark-ok", "secondary", "primary", "warning")
"""Theme variables the concurrency lines take in turn (themes/*.tcss)."""


def theme_colours(variables: dict[str, str], background: Color) -> CurveColours:
    """The plot's colours from the app's theme variables, over ``background``."""

    def rgb(name: str, fallback: str) -> RGB:
        try:
            colour = background + Color.parse(variables.get(name, fallback))
        except Exception:  # a theme file without the variable or with a bad value
            colour = Color.parse(fallback)
        r, g, b = colour.rgb
        return (r, g, b)

    return CurveColours(
        background=(background.r, background.g, background.b),
        foreground=rgb("foreground", "#d0d4dc"),
        dim=rgb("spark-dim", "#7f8796"),
        live=rgb("spark-crit", "#ff6b6b"),
        series=tuple(rgb(name, "#5fafd7") for name in SERIES_VARIABLES),
    )


class CurvePlot(Widget):
    """Draws a :class:`~sparktop.sweep.expected.curve.ProfileCurve` (:meth:`show`); redrawn only
    when what it shows, its size or the theme changes. Without a curve it says why (``missing``).
    Under ``NO_COLOR`` it draws without colour: the lines carry their concurrency's digit.

    It draws through textual-plotext's :class:`Plot` (what its ``PlotextPlot`` widget
    wraps), made with the first curve drawn: the budget pane composes a CurvePlot at start,
    hidden, and plotext with textual-plotext is ~20 modules a monitor that never shows a
    curve does not need."""

    DEFAULT_CSS = """
    CurvePlot { width: 1fr; height: 1fr; min-height: 8; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.curve: ProfileCurve | None = None
        self.live: OperatingPoint | None = None
        self.typed: OperatingPoint | None = None
        self.missing = "no sweep profile"
        self.builds = 0
        """How many times the plot was drawn (tests: a tick that changes nothing draws none)."""
        self._drawn: tuple[object, ...] | None = None
        self._text: Text | None = None
        self._plot: Plot | None = None

    @property
    def plt(self) -> Plot:
        """The plotext figure the curve is drawn on (made, and plotext loaded, on first use)."""
        if self._plot is None:
            from textual_plotext import Plot

            self._plot = Plot()
        return self._plot

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def show(
        self,
        curve: ProfileCurve | None,
        live: OperatingPoint | None = None,
        typed: OperatingPoint | None = None,
        missing: str = "no sweep profile",
    ) -> None:
        """Draw ``curve`` with the live window's point and a typed budget's; ``missing`` says
        why there is no curve when ``curve`` is None."""
        if (curve, live, typed, missing) != (self.curve, self.live, self.typed, self.missing):
            self.curve, self.live, self.typed, self.missing = curve, live, typed, missing
            self.refresh()

    def render(self) -> RenderResult:
        if self.curve is None:
            return Text(f"n/a ({self.missing})", style="dim")
        width, height = self.size.width, self.size.height
        colours = None
        if not self.app.no_color:
            colours = theme_colours(self.app.theme_variables, self.background_colors[1])
        key = (self.curve, self.live, self.typed, width, height, colours)
        if key != self._drawn or self._text is None:
            draw_curve(
                self.plt, self.curve, live=self.live, typed=self.typed, colours=colours,
                size=(width, height),
            )  # fmt: skip
            self._text = Text.from_ansi(self.plt.build())
            self._drawn = key
            self.builds += 1
        return self._text
