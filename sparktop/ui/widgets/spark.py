"""Spark: a sparkline that keeps its rendered lines until its bars, size or colours change."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any, ClassVar

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.strip import Strip
from textual.widget import Widget

BARS = "▁▂▃▄▅▆▇█"


def column_ratios(data: Sequence[float], width: int) -> tuple[float, ...]:
    """Each of ``width`` columns' bar height in 0–1, as Textual's ``Sparkline`` draws it: the
    data cut into ``width`` buckets (fewer when there are fewer values, each then spread over
    several columns), a bucket's value its maximum, scaled from the data's min to its max.
    Fewer than two values have no scale: an empty tuple."""
    n = len(data)
    if n < 2 or width <= 0:
        return ()
    low, high = min(data), max(data)
    extent = high - low or 1
    # Bucket b is data[n*b//width : n*(b+1)//width] (the exact integer form of Textual's
    # Fraction steps); empty buckets are skipped.
    bounds = [n * b // width for b in range(width + 1)]
    peaks = [max(data[s:e]) for s, e in pairwise(bounds) if e > s]
    step = len(peaks) / width
    out: list[float] = []
    index = 0.0
    for _ in range(width):
        out.append((peaks[int(index)] - low) / extent)
        index += step  # accumulated like Textual's, so columns repeat at the same places
    return tuple(out)


def _blend(low: RichColor, high: RichColor, ratio: float) -> RichColor:
    if low.triplet is None or high.triplet is None:
        return high
    r1, g1, b1 = low.triplet
    r2, g2, b2 = high.triplet
    return RichColor.from_rgb(
        r1 + (r2 - r1) * ratio, g1 + (g2 - g1) * ratio, b1 + (b2 - b1) * ratio
    )


def spark_lines(
    data: Sequence[float],
    ratios: Sequence[float],
    width: int,
    height: int,
    base: Style,
    low: RichColor,
    high: RichColor,
) -> list[Strip]:
    """The ``height`` lines (top first) of a sparkline ``width`` cells wide: bars ▁…█ coloured
    from ``low`` (the data's minimum) to ``high`` (its maximum) over the ``base`` style.
    ``ratios`` is :func:`column_ratios` of ``data``. No data: a floor of ▁ in ``low``; one
    value: full █ bars in ``high``."""
    if width <= 0 or height <= 0:
        return [Strip([])] * max(height, 0)
    if len(data) == 0:
        ground = Strip([Segment("▁" * width, base + Style.from_color(low))], width)
        return [Strip([])] * (height - 1) + [ground]
    if len(data) == 1:
        return [Strip([Segment("█" * width, base + Style.from_color(high))], width)] * height
    levels = len(BARS)
    top = levels * height - 1
    styles: dict[float, Style] = {}
    strips: list[Strip] = []
    for line in reversed(range(height)):
        floor, ceiling = line * levels, (line + 1) * levels
        cells: list[tuple[str, Style]] = []
        for ratio in ratios:
            index = int(ratio * top)
            if index < floor:
                cells.append((" ", base))
                continue
            style = styles.get(ratio)
            if style is None:
                style = styles[ratio] = base + Style.from_color(_blend(low, high, ratio))
            cells.append(("█" if index >= ceiling else BARS[index % levels], style))
        strips.append(Strip(_runs(cells), width))
    return strips


def _runs(cells: Iterable[tuple[str, Style]]) -> list[Segment]:
    """Adjacent cells of one style as one segment."""
    segments: list[Segment] = []
    text: list[str] = []
    current: Style | None = None
    for char, style in cells:
        if style is not current and style != current:
            if text:
                segments.append(Segment("".join(text), current))
            text, current = [], style
        text.append(char)
    if text:
        segments.append(Segment("".join(text), current))
    return segments


class Spark(Widget):
    """A sparkline of the values given to :attr:`data` (oldest first), one bar per column
    (Textual ``Sparkline``'s bucketing and look: the maximum of each bucket, ▁▂▃▄▅▆▇█ from
    the ``spark--min-color`` to the ``spark--max-color`` component colour).

    Unlike ``Sparkline`` it renders its lines itself and keeps them: new data whose bars come
    out the same (an idle engine's flat line) does not repaint at all, and a repaint for any
    other reason (a theme change, a neighbour's refresh) rebuilds only if the size or the
    colours changed."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"spark--max-color", "spark--min-color"}

    DEFAULT_CSS = """
    Spark { height: 1; }
    Spark > .spark--max-color { color: $primary; }
    Spark > .spark--min-color { color: $primary 30%; }
    """

    def __init__(self, data: Sequence[float] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._data: tuple[float, ...] = tuple(data)
        self._ratios: tuple[float, ...] = ()
        self._ratios_width = -1
        self._strips: list[Strip] = []
        self._strips_key: tuple[object, ...] | None = None
        self.builds = 0
        """How many times the lines were rebuilt (tests count repaints that did work)."""

    @property
    def data(self) -> tuple[float, ...]:
        return self._data

    @data.setter
    def data(self, values: Sequence[float]) -> None:
        values = tuple(values)
        width = self.size.width
        if width and self._ratios_width == width and self._strips_key is not None:
            ratios = column_ratios(values, width)
            # Same bars (and the same no-data / one-value case): nothing to repaint.
            same = ratios == self._ratios and min(len(values), 2) == min(len(self._data), 2)
            self._data = values
            if same:
                return
            self._ratios = ratios
        else:
            self._data = values
            self._ratios_width = -1
        self._strips_key = None
        self.refresh()

    def _colours(self) -> tuple[Style, RichColor, RichColor]:
        _, background = self.background_colors
        low: Color = background + self.get_component_styles("spark--min-color").color
        high: Color = background + self.get_component_styles("spark--max-color").color
        return self.visual_style.rich_style, low.rich_color, high.rich_color

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        colours = self._colours()
        key = (width, height, colours)
        if key != self._strips_key:
            if self._ratios_width != width:
                self._ratios = column_ratios(self._data, width)
                self._ratios_width = width
            self._strips = spark_lines(self._data, self._ratios, width, height, *colours)
            self._strips_key = key
            self.builds += 1
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, colours[0])
