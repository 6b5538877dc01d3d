"""BudgetCurve: where the typed context lands on the profile's TTFT curve (budget pane)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from sparktop.sweep.expected.curve import OperatingPoint, ProfileCurve, profile_curve
from sparktop.sweep.expected.matched import EstimateFn, cached_estimator, on_grid
from sparktop.sweep.profiles.profile import Profile
from sparktop.ui import format as fmt
from sparktop.ui.curve_plot import TYPED_MARKER
from sparktop.ui.widgets.curve import CurvePlot


def typed_text(point: OperatingPoint) -> str:
    """``▲ 8,192 tok × 2: TTFT 2.31 s (2.12 s–2.52 s), interpolated`` or the reason."""
    head = f"{TYPED_MARKER} {point.prompt_tokens:,.0f} tok × {point.concurrency:.0f}: TTFT "
    fig = point.expected
    if not isinstance(fig.value, int | float):
        return head + f"no data ({fig.reason})"
    band = fmt.band(fig.low, fig.high, "s")
    return head + fmt.seconds(fig.value) + (f" ({band})" if band else "") + f", {fig.basis}"


class BudgetCurve(Vertical):
    """The profile's TTFT curve with the typed (prompt, concurrency) marked ▲ on it, and one
    line saying what it reads there. Given what to show by the pane (:meth:`show`)."""

    DEFAULT_CSS = """
    BudgetCurve { height: auto; margin: 1 0 0 0; }
    BudgetCurve > CurvePlot { height: 12; min-height: 8; }
    Screen.-narrow BudgetCurve > CurvePlot { height: 10; }
    BudgetCurve > .typed { height: auto; color: $spark-dim; }
    """

    def __init__(self, profile: Profile | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.profile = profile
        self._estimator: EstimateFn | None = None
        self._curve: tuple[float, ProfileCurve] | None = None
        self.typed: OperatingPoint | None = None
        self._wanted: tuple[int, int] | None = None

    def set_profile(self, profile: Profile | None) -> None:
        """Draw ``profile``'s curve from now on (the budget's engine changed profile)."""
        if profile is not self.profile:
            self.profile = profile
            self._estimator = None
            self._curve = None
            if self._wanted is not None and self.size.width:
                self._draw(*self._wanted)

    def compose(self) -> ComposeResult:
        yield CurvePlot()
        yield Static("", classes="typed")

    def show(self, prompt_tokens: int, concurrency: int) -> None:
        """Mark ``concurrency`` requests of ``prompt_tokens`` on the profile's TTFT curve
        (drawn once the pane is open: the first curve fits the profile, ~0.3 s)."""
        self._wanted = (prompt_tokens, concurrency)
        if self.size.width:
            self._draw(prompt_tokens, concurrency)

    def on_resize(self) -> None:
        if self._wanted is not None and self.size.width:
            self._draw(*self._wanted)

    def _draw(self, prompt_tokens: int, concurrency: int) -> None:
        plot = self.query_one(CurvePlot)
        profile = self.profile
        if profile is None:
            plot.show(None, missing="no sweep profile")
            return
        if self._estimator is None:
            self._estimator = cached_estimator(profile)
        span = on_grid(float(prompt_tokens))
        if self._curve is None or self._curve[0] != span:
            curve = profile_curve(profile, "ttft_s", estimator=self._estimator, include=(span,))
            self._curve = (span, curve)
        fig = self._estimator(float(prompt_tokens), concurrency).ttft_s
        self.typed = OperatingPoint("ttft_s", float(prompt_tokens), float(concurrency), fig)
        plot.show(self._curve[1], typed=self.typed)
        self.query_one(".typed", Static).update(Content(typed_text(self.typed)))
