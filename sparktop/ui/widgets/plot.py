"""Plot: a history bar plot on a fixed scale, or ``n/a`` with the reason when there is none."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.content import Content
from textual.widget import Widget

from sparktop.ui import format as fmt


class Plot(Widget):
    """Bars of a metric's history scaled ``low``..``high`` (not min..max of the data, so a
    steady reading draws flat and a sag draws a sag), oldest on the left.

    With no readings it says ``n/a`` and why, never a flat line that would read as 0.
    """

    DEFAULT_CSS = """
    Plot { height: 3; color: $spark-accent; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.values: tuple[float, ...] = ()
        self.low = 0.0
        self.high = 1.0
        self.missing = "no readings yet"

    def show(
        self, values: Sequence[float], low: float, high: float, missing: str = "no readings yet"
    ) -> None:
        """Plot ``values`` on ``low``..``high``; ``missing`` says why when there are none."""
        shown = (tuple(values), low, high, missing)
        if shown != (self.values, self.low, self.high, self.missing):
            self.values, self.low, self.high, self.missing = shown
            self.refresh()

    def render(self) -> Content:
        if not self.values:
            return Content.styled(f"n/a ({self.missing})", "$spark-dim")
        rows = fmt.plot_rows(self.values, self.size.width, self.size.height, self.low, self.high)
        return Content("\n".join(rows))
