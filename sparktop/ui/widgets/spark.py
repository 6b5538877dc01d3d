"""SparkRow: labelled sparklines on one line, kept until their bars, size or colours change.

The bars are Textual ``Sparkline``'s (same bucketing, glyphs and min→max colour blend), drawn
as strips here so that a tick that moves no bar repaints nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any, ClassVar

from rich.cells import cell_len, set_cell_size
from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import LineFilter
from textual.strip import Strip
from textual.widget import Widget

from sparktop.ui.safe_text import without_control_filter

BARS = "▁▂▃▄▅▆▇█"


BAR_STYLES_KEPT = 2048
"""Bar styles a SparkRow keeps by ratio (two sparklines of 48 columns); it starts over past
this."""

Scale = tuple[float | None, float | None]
"""A sparkline's fixed bottom and top (``(0, 100)`` for a percentage, ``(0, None)`` for a rate:
0 up to the data's maximum); ``None`` takes the data's minimum / maximum as Textual does."""

AUTO: Scale = (None, None)


def column_ratios(data: Sequence[float], width: int, scale: Scale = AUTO) -> tuple[float, ...]:
    """Each of ``width`` columns' bar height in 0–1, as Textual's ``Sparkline`` draws it: the
    data cut into ``width`` buckets (fewer when there are fewer values, each then spread over
    several columns), a bucket's value its maximum, scaled from ``scale``'s bottom to its top
    (default: the data's min to its max; values outside a fixed scale are clamped). Without a
    fixed bottom fewer than two values have no scale: an empty tuple."""
    n = len(data)
    if n < (1 if scale[0] is not None else 2) or width <= 0:
        return ()
    low = min(data) if scale[0] is None else scale[0]
    high = max(data) if scale[1] is None else scale[1]
    extent = high - low
    # Bucket b is data[n*b//width : n*(b+1)//width] (the exact integer form of Textual's
    # Fraction steps); empty buckets are skipped.
    bounds = [n * b // width for b in range(width + 1)]
    peaks = [max(data[s:e]) for s, e in pairwise(bounds) if e > s]
    step = len(peaks) / width
    out: list[float] = []
    index = 0.0
    for _ in range(width):
        ratio = (peaks[int(index)] - low) / extent if extent > 0 else 0.0
        out.append(min(1.0, max(0.0, ratio)))
        index += step  # accumulated like Textual's, so columns repeat at the same places
    return tuple(out)


def _bar_style(base: Style, low: RichColor, high: RichColor, ratio: float) -> Style:
    """``base`` in the colour ``ratio`` of the way from ``low`` to ``high`` (whole RGB steps,
    as ``Color.from_rgb`` rounds them)."""
    if low.triplet is None or high.triplet is None:
        return _styled(base, high)
    r1, g1, b1 = low.triplet
    r2, g2, b2 = high.triplet
    rgb = (int(r1 + (r2 - r1) * ratio), int(g1 + (g2 - g1) * ratio), int(b1 + (b2 - b1) * ratio))
    return _rgb_style(base, rgb)


@functools.lru_cache(maxsize=4096)
def _rgb_style(base: Style, rgb: tuple[int, int, int]) -> Style:
    # A blend yields at most a few hundred distinct colours: build each Style once.
    return _styled(base, RichColor.from_rgb(*rgb))


def _styled(base: Style, colour: RichColor) -> Style:
    return base + Style.from_color(colour)


def spark_lines(
    data: Sequence[float],
    ratios: Sequence[float],
    width: int,
    height: int,
    base: Style,
    low: RichColor,
    high: RichColor,
    styles: dict[float, Style] | None = None,
) -> list[Strip]:
    """The ``height`` lines (top first) of a sparkline ``width`` cells wide: bars ▁…█ coloured
    from ``low`` (the data's minimum) to ``high`` (its maximum) over the ``base`` style.
    ``ratios`` is :func:`column_ratios` of ``data``. No data: a floor of ▁ in ``low``; one
    value without a fixed scale (no ``ratios``): full █ bars in ``high``. ``styles``: each
    ratio's bar style, filled as drawn and kept by the caller for these same colours (a
    shifted window draws mostly the ratios of the last tick)."""
    if width <= 0 or height <= 0:
        return [Strip([])] * max(height, 0)
    if len(data) == 0:
        ground = Strip([Segment("▁" * width, base + Style.from_color(low))], width)
        return [Strip([])] * (height - 1) + [ground]
    if not ratios:
        return [Strip([Segment("█" * width, base + Style.from_color(high))], width)] * height
    levels = len(BARS)
    top = levels * height - 1
    if styles is None:
        styles = {}
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
                style = styles[ratio] = _bar_style(base, low, high, ratio)
            cells.append(("█" if index >= ceiling else BARS[index % levels], style))
        strips.append(Strip(_runs(cells), width))
    return strips


def _runs(cells: Iterable[tuple[str, Style]]) -> list[Segment]:
    """Adjacent cells of one style as one segment."""
    segments: list[Segment] = []
    text: list[str] = []
    current: Style | None = None
    for char, style in cells:
        if style is not current:  # equal styles are one object (cached): no == needed
            if text:
                segments.append(Segment("".join(text), current))
            text, current = [], style
        text.append(char)
    if text:
        segments.append(Segment("".join(text), current))
    return segments


class SparkRow(Widget):
    """Labelled sparklines side by side on one line (``decode tok/s ▁▂▃…  KV % ▁▂▃…``).

    One widget draws what a ``Horizontal`` of ``Label`` and ``Sparkline`` widgets would (label,
    one blank, bars sharing the rest equally up to ``max_width`` each, ``gap`` blanks after
    each), so a tick repaints one line instead of five widgets. Set values with
    :meth:`set_data`; the line is rebuilt only when some bars or the size or colours change.
    A sparkline with no values says ``n/a`` (Textual's draws a floor, which reads as 0).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "spark--max-color",
        "spark--min-color",
        "spark-row--label",
    }

    DEFAULT_CSS = """
    SparkRow { height: 1; }
    SparkRow > .spark--max-color { color: $primary; }
    SparkRow > .spark--min-color { color: $primary 30%; }
    SparkRow > .spark-row--label { color: $text-muted; }
    """

    def __init__(
        self,
        labels: Sequence[str],
        *,
        scales: Sequence[Scale] | None = None,
        max_width: int = 48,
        gap: int = 2,
        caption_width: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.labels = tuple(labels)
        self.caption_width = caption_width
        """Cells after each sparkline for its caption (its scale and time span, btop-style:
        ``0–412 · 2m``); 0: none. Fixed, so a changing caption never moves the bars."""
        self.captions: list[str] = ["" for _ in self.labels]
        self.scales: tuple[Scale, ...] = tuple(scales or [AUTO] * len(self.labels))
        self.max_width = max_width
        self.gap = gap
        self._data: list[tuple[float, ...]] = [() for _ in self.labels]
        self._ratios: list[tuple[float, ...]] = [() for _ in self.labels]
        self._widths: tuple[int, ...] = ()
        self._strip: Strip | None = None
        self._strip_key: tuple[object, ...] | None = None
        self._colour_set: tuple[Style, Style, RichColor, RichColor] | None = None
        """:meth:`_colours`, kept until the styles change (``rich_style`` walks every
        ancestor's styles: most of a line's cost when read for each repaint)."""
        self._bar_styles: dict[float, Style] = {}
        """Each bar ratio's style in :attr:`_colour_set`'s colours (bounded: see
        :data:`BAR_STYLES_KEPT`)."""
        self.builds = 0
        """How many times the line was rebuilt (tests count repaints that did work)."""

    def get_line_filters(self) -> Sequence[LineFilter]:
        # Bars and fixed labels only: the app's control-character filter would only copy
        # the line every time it changes.
        return without_control_filter(super().get_line_filters())

    def data(self, index: int) -> tuple[float, ...]:
        return self._data[index]

    def set_data(self, index: int, values: Sequence[float]) -> None:
        """Show ``values`` (oldest first) in sparkline ``index``; repaint only if its bars
        change."""
        values = tuple(values)
        old = self._data[index]
        self._data[index] = values
        if self._widths:
            ratios = column_ratios(values, self._widths[index], self.scales[index])
            same_case = min(len(values), 2) == min(len(old), 2)
            if ratios == self._ratios[index] and same_case:
                return
            self._ratios[index] = ratios
        self._strip_key = None
        self.refresh()

    def set_caption(self, index: int, text: str) -> None:
        """Show ``text`` after sparkline ``index`` (cut to :attr:`caption_width`)."""
        if text != self.captions[index]:
            self.captions[index] = text
            self._strip_key = None
            self.refresh()

    def spark_widths(self, width: int) -> tuple[int, ...]:
        """Each sparkline's width in a line ``width`` cells wide (the labels and gaps first,
        the rest shared equally as ``1fr`` shares it, each at most ``max_width``)."""
        count = len(self.labels)
        if not count:
            return ()
        caption = self.caption_width + 1 if self.caption_width else 0
        fixed = sum(cell_len(label) + 1 + caption + self.gap for label in self.labels)
        free = max(0, width - fixed)
        widths = [free * (i + 1) // count - free * i // count for i in range(count)]
        return tuple(min(w, self.max_width) for w in widths)

    def notify_style_update(self) -> None:
        # Textual calls this on the widget and on every descendant of a node whose styles
        # change (theme, classes, pseudo-classes such as :focus).
        super().notify_style_update()
        self._colour_set = None
        self._bar_styles = {}

    def _colours(self) -> tuple[Style, Style, RichColor, RichColor]:
        if self._colour_set is None:
            self._colour_set = self._resolve_colours()
        return self._colour_set

    def _resolve_colours(self) -> tuple[Style, Style, RichColor, RichColor]:
        _, background = self.background_colors
        low: Color = background + self.get_component_styles("spark--min-color").color
        high: Color = background + self.get_component_styles("spark--max-color").color
        label: Color = background + self.get_component_styles("spark-row--label").color
        base = self.rich_style
        return base, base + Style.from_color(label.rich_color), low.rich_color, high.rich_color

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        colours = self._colours()
        key = (width, colours)
        if self._strip is None or key != self._strip_key:
            widths = self.spark_widths(width)
            if widths != self._widths:
                self._widths = widths
                self._ratios = [
                    column_ratios(d, w, scale)
                    for d, w, scale in zip(self._data, widths, self.scales, strict=True)
                ]
            base, label_style, low, high = colours
            if len(self._bar_styles) > BAR_STYLES_KEPT:
                self._bar_styles = {}
            blank = Style(bgcolor=base.bgcolor)  # as the padding and margins between widgets
            segments: list[Segment] = []
            for label, data, ratios, spark_width, caption in zip(
                self.labels, self._data, self._ratios, widths, self.captions, strict=True
            ):
                segments += (Segment(label, label_style), Segment(" ", blank))
                if data:
                    (bars,) = spark_lines(
                        data, ratios, spark_width, 1, base, low, high, self._bar_styles
                    )
                    segments += bars
                else:  # no readings (not provided, or none yet): never a floor that reads as 0
                    segments.append(Segment(set_cell_size("n/a", spark_width), label_style))
                if self.caption_width:
                    text = " " + set_cell_size(caption, self.caption_width)
                    segments.append(Segment(text, label_style))
                segments.append(Segment(" " * self.gap, blank))
            self._strip = Strip(segments).extend_cell_length(width, blank).crop(0, width)
            self._strip_key = key
            self.builds += 1
        return self._strip if y == 0 else Strip.blank(width, colours[0])
