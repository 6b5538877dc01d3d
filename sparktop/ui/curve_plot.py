"""Drawing a :class:`~sparktop.sweep.expected.curve.ProfileCurve` with plotext (textual-plotext's
figure).

One function, :func:`draw_curve`, configures a figure for the monitor's curve screen, the
budget pane and the report files alike: log axes (the data is plotted as log10 and the ticks
labelled in tokens and seconds or tok/s, since plotext's own log scale re-applies itself on
every build), a line per measured concurrency drawn with the concurrency's own digit as its
marker (so the lines read without colour: ``NO_COLOR``, a monochrome theme), the band of the
line nearest the operating point shaded with ``·``, the measured cells as ``●``, the live
figure as ``◆`` and the expected figure for the same load as ``○``, joined by ``┊``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from sparktop.sweep.expected.curve import CurveLine, OperatingPoint, ProfileCurve
from sparktop.ui import format as fmt

if TYPE_CHECKING:
    from textual_plotext import Plot  # loaded by the widget that draws (ui.widgets.curve)

RGB = tuple[int, int, int]

LIVE_MARKER = "◆"
EXPECTED_MARKER = "○"
CELL_MARKER = "●"
BAND_MARKER = "·"
TYPED_MARKER = "▲"
BUCKET_MARKER = "┃"


@dataclass(frozen=True, slots=True)
class CurveColours:
    """The plot's colours (RGB), from the theme; ``None`` draws without colour."""

    background: RGB
    foreground: RGB
    dim: RGB
    live: RGB
    series: tuple[RGB, ...]


def marker_for(concurrency: int, index: int) -> str:
    """A line's marker: its concurrency's digit (1–9), else a letter by its place."""
    if 1 <= concurrency <= 9:
        return str(concurrency)
    return "abcdefghijklmnopqrstuvwxyz"[index % 26]


def token_text(tokens: float) -> str:
    """An axis label for a prompt length: ``512``, ``8k``, ``128k``, ``1M`` (binary steps)."""
    if tokens >= 1 << 20:
        return f"{tokens / (1 << 20):.3g}M"
    if tokens >= 1024:
        return f"{tokens / 1024:.3g}k"
    return f"{tokens:.0f}"


def value_text(value: float, unit: str) -> str:
    """An axis label for a figure: ``0.5s``, ``12s``, ``17m`` or ``75``, ``1.2k`` (tok/s)."""
    if unit == "s":
        return f"{value:,.0f}s" if value >= 100 else f"{value:.3g}s"
    return f"{value / 1000:.3g}k" if value >= 1000 else f"{value:.3g}"


def _ticks(low: float, high: float, most: int, steps: Sequence[float]) -> list[float]:
    """Nice ticks (``steps`` × powers of ten) inside ``low``..``high``, thinned to ``most``."""
    found = []
    for exp in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1):
        for step in steps:
            v = step * 10.0**exp
            if low <= v <= high:
                found.append(v)
    while len(found) > max(2, most):
        found = found[::2]
    return found


def _token_ticks(low: float, high: float, most: int) -> list[float]:
    found = [2.0**k for k in range(math.ceil(math.log2(low)), math.floor(math.log2(high)) + 1)]
    stride = 1
    while len(found[::stride]) > max(2, most):
        stride += 1
    # Thinned from the top, so the longest prompts on the axis keep their label.
    return found[::-1][::stride][::-1] or [low, high]


def _log(v: float) -> float:
    return math.log10(v)


def nearest_line(curve: ProfileCurve, concurrency: float) -> CurveLine | None:
    """The line whose concurrency is nearest ``concurrency`` (in logs), for its band."""
    lines = [ln for ln in curve.lines if ln.points]
    if not lines or concurrency <= 0:
        return lines[0] if lines else None
    return min(lines, key=lambda ln: abs(math.log(ln.concurrency / concurrency)))


def y_extent(curve: ProfileCurve, points: Sequence[OperatingPoint]) -> tuple[float, float]:
    """The figure's span over every line, band and point (positive; one decade if flat)."""
    values = [
        v
        for ln in curve.lines
        for p in ln.points
        for v in (p.value, p.low, p.high)
        if v is not None and v > 0
    ]
    values += [v for ln in curve.lines for _, v in ln.cells if v > 0]
    for pt in points:
        values += [v for v in (_expected(pt), pt.live) if v is not None and v > 0]
    if not values:
        return (1.0, 10.0)
    low, high = min(values), max(values)
    if high / low < 1.5:
        low, high = low / 1.25, high * 1.25
    return (low / 1.05, high * 1.05)


def _expected(pt: OperatingPoint) -> float | None:
    v = pt.expected.value
    return float(v) if isinstance(v, int | float) and v > 0 else None


def draw_curve(
    plt: Plot,
    curve: ProfileCurve,
    *,
    live: OperatingPoint | None = None,
    typed: OperatingPoint | None = None,
    colours: CurveColours | None = None,
    size: tuple[int, int] = (80, 20),
    title: str = "",
) -> None:
    """Configure ``plt`` (a cleared textual-plotext figure) to draw ``curve`` at ``size``
    (columns, rows), with the live window's point (``live``: ◆ live, ○ expected) and a typed
    budget's (``typed``: ▲ at its estimate) when given."""
    plt.clear_figure()
    width, height = size
    points = [p for p in (live, typed) if p is not None]
    x_low, x_high = curve.prompt_range
    for pt in points:
        x_low, x_high = min(x_low, pt.prompt_tokens), max(x_high, pt.prompt_tokens)
    x_low, x_high = max(x_low, 1.0), max(x_high, x_low * 1.01)
    y_low, y_high = y_extent(curve, points)
    if colours is None:
        plt.theme("clear")
    else:
        plt.canvas_color(colours.background)
        plt.axes_color(colours.background)
        plt.ticks_color(colours.foreground)
    series = colours.series if colours is not None else ("default",)
    focus = nearest_line(curve, points[0].concurrency if points else 1.0)
    if focus is not None and focus.points:
        _shade(plt, focus, (y_low, y_high), size, colours.dim if colours else "default")
    for i, line in enumerate(curve.lines):
        if not line.points:
            continue
        colour = series[i % len(series)]
        xs = [_log(p.prompt_tokens) for p in line.points]
        ys = [_log(p.value) for p in line.points]
        plt.plot(xs, ys, marker=marker_for(line.concurrency, i), color=colour)
        cells = [(x, v) for x, v in line.cells if x_low <= x <= x_high and v > 0]
        if cells:
            plt.scatter(
                [_log(x) for x, _ in cells], [_log(v) for _, v in cells],
                marker=CELL_MARKER, color=colour,
            )  # fmt: skip
    hot = colours.live if colours is not None else "default"
    if typed is not None and (value := _expected(typed)) is not None:
        plt.scatter([_log(typed.prompt_tokens)], [_log(value)], marker=TYPED_MARKER, color=hot)
    if live is not None:
        _draw_live(plt, live, (y_low, y_high), height, hot)
    plt.xlim(_log(x_low), _log(x_high))
    plt.ylim(_log(y_low), _log(y_high))
    xt = _token_ticks(x_low, x_high, max(2, width // 9))
    plt.xticks([_log(v) for v in xt], [token_text(v) for v in xt])
    yt = _ticks(y_low, y_high, max(2, height // 3), (1.0, 2.0, 5.0))
    if len(yt) < 2:
        yt = [y_low, y_high]
    plt.yticks([_log(v) for v in yt], [value_text(v, curve.unit) for v in yt])
    if title:
        plt.title(title)
    plt.xlabel("prompt tokens (log)")
    plt.plotsize(width, height)
    plt._set_size(width, height)  # as textual-plotext's widget does: plotsize alone can lag


def _run(y0: float, y1: float, y_span: tuple[float, float], height: int) -> list[float]:
    """log10 values from ``y0`` to ``y1`` close enough to fill every text row between."""
    lo, hi = sorted((_log(max(y0, y_span[0])), _log(min(y1, y_span[1]))))
    steps = max(2, int((hi - lo) / (_log(y_span[1]) - _log(y_span[0])) * height * 4))
    return [lo + (hi - lo) * k / steps for k in range(steps + 1)]


def _draw_live(
    plt: Plot, live: OperatingPoint, y_span: tuple[float, float], height: int, hot: RGB | str
) -> None:
    """○ the expected figure, ◆ the live one, ┊ between them; a live figure known only to a
    histogram bucket (``live_low``–``live_high``) drawn as ┃ over the bucket."""
    x = _log(live.prompt_tokens)
    expected = _expected(live)
    value = live.live if live.live is not None and live.live > 0 else None
    if live.live_low is not None and live.live_high is not None and value is not None:
        span = _run(max(live.live_low, y_span[0]), live.live_high, y_span, height)
        plt.scatter([x] * len(span), span, marker=BUCKET_MARKER, color=hot)
    if expected is not None and value is not None:
        span = _run(min(expected, value), max(expected, value), y_span, height)
        plt.scatter([x] * len(span), span, marker="┊", color=hot)
    if expected is not None:
        plt.scatter([x], [_log(expected)], marker=EXPECTED_MARKER, color=hot)
    if value is not None:
        plt.scatter([x], [_log(value)], marker=LIVE_MARKER, color=hot)


def _shade(
    plt: Plot,
    line: CurveLine,
    y_span: tuple[float, float],
    size: tuple[int, int],
    colour: RGB | str,
) -> None:
    """Fill ``line``'s band with ``·``: a column of dots per grid step, one per text row."""
    banded = [p for p in line.points if p.low is not None and p.high is not None]
    if not banded:
        return
    rows = max(1, size[1] - 4)
    per_row = (_log(y_span[1]) - _log(y_span[0])) / rows
    xs: list[float] = []
    ys: list[float] = []
    for a, b in pairwise(banded) if len(banded) > 1 else [(banded[0], banded[0])]:
        for k in range(4):  # between grid points too: the band has no gaps at 80 columns
            f = k / 4
            x = _log(a.prompt_tokens) * (1 - f) + _log(b.prompt_tokens) * f
            low = _log(a.low or a.value) * (1 - f) + _log(b.low or b.value) * f
            high = _log(a.high or a.value) * (1 - f) + _log(b.high or b.value) * f
            y = low
            while y <= high:
                xs.append(x)
                ys.append(y)
                y += per_row / 2
    if xs:
        plt.scatter(xs, ys, marker=BAND_MARKER, color=colour)


def curve_caption(
    curve: ProfileCurve, live: OperatingPoint | None, *, typed: bool = False
) -> list[str]:
    """The lines under the plot: what is drawn, and where the live window sits."""
    marks = (
        f"{TYPED_MARKER} this context"
        if typed
        else (f"{EXPECTED_MARKER} expected · {LIVE_MARKER} live")
    )
    lines = [
        f"{curve.label} ({curve.unit}), log axes: a line per concurrency (its "
        f"digit) · {CELL_MARKER} measured · {BAND_MARKER} band · {marks}",
    ]
    if live is None:
        return lines
    unit = curve.unit
    exp = live.expected
    text = f"window {live.concurrency:.1f}".removesuffix(".0") + (
        f" running × {fmt.si_tokens(live.prompt_tokens)} prompt tokens: "
        f"{EXPECTED_MARKER} expected {_value(exp.value, unit)}"
    )
    band = fmt.band(exp.low, exp.high, unit)
    if band:
        text += f" ({band})"
    if live.live is not None:
        shown = live.live_text or _value(live.live, unit)
        if unit != "s" and live.live_text:
            shown += " tok/s"
        label = live.live_label.removeprefix("live ")
        text += f", {LIVE_MARKER} live {label} {shown}"
        if live.live_low is not None:
            text += f" ({BUCKET_MARKER} its histogram bucket)"
        if not live.compared:
            text += f" (not compared: {live.note})"
    elif live.missing:
        text += f", live: n/a ({live.missing})"
    lines.append(text)
    return lines


def _value(value: object, unit: str) -> str:
    if not isinstance(value, int | float):
        return "no data"
    return fmt.seconds(value) if unit == "s" else f"{value:,.1f} tok/s"
