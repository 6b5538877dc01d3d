"""Spark: the same bars and colours as Textual's Sparkline, rebuilt only when they change."""

from __future__ import annotations

import math

import pytest
from rich.style import Style
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.strip import Strip
from textual.widgets import Label, Sparkline

from sparktop.ui.widgets.spark import Spark, SparkRow, column_ratios

DECODE = (42.0, 63.0, 75.0, 73.8, 64.0, 60.3, 60.5, 0.0, 12.5, 80.0, 80.0, 31.0)


class Pair(App[None]):
    """A Spark and a Textual Sparkline side by side, same width, height and colours."""

    CSS = """
    Sparkline, Spark { width: 30; }
    .tall { height: 3; }
    Sparkline > .sparkline--max-color, Spark > .spark--max-color { color: $primary; }
    Sparkline > .sparkline--min-color, Spark > .spark--min-color { color: $primary 30%; }
    """

    def __init__(self, data: tuple[float, ...], tall: bool = False) -> None:
        super().__init__()
        self.data = data
        self.tall = tall

    def compose(self) -> ComposeResult:
        classes = "tall" if self.tall else ""
        yield Sparkline(self.data, classes=classes)
        yield Spark(self.data, classes=classes)


def cells(strip: Strip) -> list[tuple[str, object]]:
    """One (character, style) per cell, however the strip splits its segments."""
    return [(ch, seg.style) for seg in strip for ch in seg.text]


def lines(widget: Sparkline | Spark) -> list[list[tuple[str, object]]]:
    return [cells(s) for s in widget.render_lines(widget.size.region)]


@pytest.mark.parametrize(
    ("data", "tall"),
    [
        (DECODE, False),  # fewer values than columns: bars repeat over columns
        (tuple(50 + 40 * math.sin(i / 7) for i in range(120)), False),  # buckets take the max
        (tuple(float(i % 9) for i in range(75)), True),  # three lines high
        ((), False),  # no data: a floor in the min colour
        ((7.0,), False),  # one value: full bars in the max colour
        ((5.0, 5.0, 5.0), False),  # flat: no extent
    ],
)
async def test_spark_draws_what_textual_sparkline_draws(
    data: tuple[float, ...], tall: bool
) -> None:
    app = Pair(data, tall)
    async with app.run_test(size=(40, 8)) as pilot:
        await pilot.pause()
        ours, theirs = app.query_one(Spark), app.query_one(Sparkline)
        assert ours.size == theirs.size
        assert lines(ours) == lines(theirs)


def test_column_ratios_bucket_to_the_width_with_the_max() -> None:
    assert column_ratios((0.0, 10.0, 5.0, 5.0), 2) == (1.0, 0.5)
    # Two values over four columns: each spread over two columns.
    assert column_ratios((0.0, 10.0), 4) == (0.0, 0.0, 1.0, 1.0)
    assert column_ratios((3.0,), 4) == ()


class One(App[None]):
    CSS = "Spark { width: 24; } Spark > .spark--max-color { color: $primary; }"

    def compose(self) -> ComposeResult:
        yield Spark()


async def test_spark_repaints_only_when_its_bars_change() -> None:
    app = One()
    async with app.run_test(size=(30, 3)) as pilot:
        spark = app.query_one(Spark)
        spark.data = DECODE
        await pilot.pause()
        shown = spark.builds
        text = spark.render_line(0).text
        assert text[0] == "▄" and "█" in text and len(text) == 24

        # The same values again, and a doubled copy (same bars): no repaint.
        spark.data = list(DECODE)
        spark.data = tuple(v * 2 for v in DECODE)
        await pilot.pause()
        assert spark.builds == shown
        assert spark.render_line(0).text == text

        # A new reading changes the bars: rebuilt once.
        spark.data = (*DECODE[1:], 100.0)
        await pilot.pause()
        assert spark.builds == shown + 1
        assert spark.render_line(0).text.endswith("██")


async def test_spark_follows_theme_changes() -> None:
    app = One()
    async with app.run_test(size=(30, 3)) as pilot:
        spark = app.query_one(Spark)
        spark.data = DECODE
        await pilot.pause()
        app.theme = "textual-dark"
        await pilot.pause()
        before = {seg.style.color for seg in spark.render_line(0) if seg.style}
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        after = {seg.style.color for seg in spark.render_line(0) if seg.style}
        assert before != after
        primary = app.current_theme.primary.lower()
        tallest = next(seg for seg in spark.render_line(0) if seg.text[0] == "█")
        assert tallest.style is not None and tallest.style.color is not None
        assert tallest.style.color.triplet is not None
        assert tallest.style.color.triplet.hex == primary


ROW_CSS = """
Horizontal, SparkRow { height: 1; }
Label { width: auto; color: $text-muted; padding: 0 1 0 0; }
Spark { width: 1fr; max-width: 48; margin: 0 2 0 0; }
Spark > .spark--max-color, SparkRow > .spark--max-color { color: $primary; }
Spark > .spark--min-color, SparkRow > .spark--min-color { color: $primary 30%; }
SparkRow > .spark-row--label { color: $text-muted; }
"""


class Rows(App[None]):
    """SparkRow beside the Horizontal of Labels and Sparks it stands for."""

    CSS = ROW_CSS

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label("decode tok/s")
            yield Spark(id="a")
            yield Label("KV %")
            yield Spark(id="b")
        yield SparkRow(("decode tok/s", "KV %"))


def screen_cells(app: App[None], y: int) -> list[tuple[str, object]]:
    """The screen line's cells (selection offsets, which Labels carry, left out)."""
    strip = app.screen._compositor.render_strips()[y]
    return [(ch, s.clear_meta_and_links()) for ch, s in cells(strip) if isinstance(s, Style)]


@pytest.mark.parametrize("width", [40, 61, 80, 97, 118, 119, 160])
async def test_spark_row_draws_what_labels_and_sparks_in_a_row_draw(width: int) -> None:
    app = Rows()
    kv = tuple(float(i % 13) for i in range(120))
    async with app.run_test(size=(width, 4)) as pilot:
        await pilot.pause()
        app.query_one("#a", Spark).data = DECODE
        app.query_one("#b", Spark).data = kv
        row = app.query_one(SparkRow)
        row.set_data(0, DECODE)
        row.set_data(1, kv)
        await pilot.pause()
        assert screen_cells(app, 1) == screen_cells(app, 0)


async def test_spark_row_repaints_only_when_bars_change() -> None:
    app = Rows()
    async with app.run_test(size=(120, 4)) as pilot:
        row = app.query_one(SparkRow)
        row.set_data(0, DECODE)
        await pilot.pause()
        built = row.builds
        row.set_data(0, tuple(v * 2 for v in DECODE))  # same bars
        await pilot.pause()
        assert row.builds == built
        row.set_data(1, (1.0, 2.0, 3.0))
        await pilot.pause()
        assert row.builds == built + 1
        assert row.data(1) == (1.0, 2.0, 3.0)
