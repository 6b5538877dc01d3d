"""SparkRow: draws what Textual's Label and Sparkline widgets in a row draw, rebuilt only when
the bars change."""

from __future__ import annotations

import math

import pytest
from rich.style import Style
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.strip import Strip
from textual.widgets import Label, Sparkline

from sparktop.ui.widgets.spark import SparkRow, column_ratios, spark_lines

DECODE = (42.0, 63.0, 75.0, 73.8, 64.0, 60.3, 60.5, 0.0, 12.5, 80.0, 80.0, 31.0)


def cells(strip: Strip) -> list[tuple[str, object]]:
    """One (character, style) per cell, however the strip splits its segments."""
    return [(ch, seg.style) for seg in strip for ch in seg.text]


class One(App[None]):
    CSS = """
    Sparkline { width: 30; }
    .tall { height: 3; }
    Sparkline > .sparkline--max-color { color: $primary; }
    Sparkline > .sparkline--min-color { color: $primary 30%; }
    """

    def __init__(self, data: tuple[float, ...], tall: bool) -> None:
        super().__init__()
        self.data = data
        self.tall = tall

    def compose(self) -> ComposeResult:
        yield Sparkline(self.data, classes="tall" if self.tall else "")


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
async def test_spark_lines_draw_what_textual_sparkline_draws(
    data: tuple[float, ...], tall: bool
) -> None:
    app = One(data, tall)
    async with app.run_test(size=(40, 8)) as pilot:
        await pilot.pause()
        theirs = app.query_one(Sparkline)
        width, height = theirs.size
        _, background = theirs.background_colors
        low = background + theirs.get_component_styles("sparkline--min-color").color
        high = background + theirs.get_component_styles("sparkline--max-color").color
        ours = spark_lines(
            data, column_ratios(data, width), width, height,
            theirs.visual_style.rich_style, low.rich_color, high.rich_color,
        )  # fmt: skip
        expected = theirs.render_lines(theirs.size.region)
        assert [cells(s) for s in ours] == [cells(s) for s in expected]


def test_column_ratios_bucket_to_the_width_with_the_max() -> None:
    assert column_ratios((0.0, 10.0, 5.0, 5.0), 2) == (1.0, 0.5)
    # Two values over four columns: each spread over two columns.
    assert column_ratios((0.0, 10.0), 4) == (0.0, 0.0, 1.0, 1.0)
    assert column_ratios((3.0,), 4) == ()


class Rows(App[None]):
    """A SparkRow under the Horizontal of Labels and Sparklines it stands for."""

    CSS = """
    Horizontal, SparkRow { height: 1; }
    Label { width: auto; color: $text-muted; padding: 0 1 0 0; }
    Sparkline { width: 1fr; max-width: 48; margin: 0 2 0 0; }
    Sparkline > .sparkline--max-color, SparkRow > .spark--max-color { color: $primary; }
    Sparkline > .sparkline--min-color, SparkRow > .spark--min-color { color: $primary 30%; }
    SparkRow > .spark-row--label { color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label("decode tok/s")
            yield Sparkline(id="a")
            yield Label("KV %")
            yield Sparkline(id="b")
        yield SparkRow(("decode tok/s", "KV %"))


def screen_cells(app: App[None], y: int) -> list[tuple[str, object]]:
    """The screen line's cells (selection offsets, which Labels carry, left out)."""
    strip = app.screen._compositor.render_strips()[y]
    return [(ch, s.clear_meta_and_links()) for ch, s in cells(strip) if isinstance(s, Style)]


@pytest.mark.parametrize("width", [40, 61, 80, 97, 118, 119, 160])
async def test_spark_row_draws_what_labels_and_sparklines_in_a_row_draw(width: int) -> None:
    app = Rows()
    kv = tuple(float(i % 13) for i in range(120))
    async with app.run_test(size=(width, 4)) as pilot:
        await pilot.pause()
        app.query_one("#a", Sparkline).data = list(DECODE)
        app.query_one("#b", Sparkline).data = list(kv)
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
        text = row.render_line(0).text
        assert text.startswith("decode tok/s ▄") and "KV % n/a" in text

        # The same values again, and a doubled copy (same bars): nothing to repaint.
        row.set_data(0, list(DECODE))
        row.set_data(0, tuple(v * 2 for v in DECODE))
        await pilot.pause()
        assert row.builds == built
        assert row.render_line(0).text == text

        # A new reading changes the bars: rebuilt once.
        row.set_data(1, (1.0, 2.0, 3.0))
        await pilot.pause()
        assert row.builds == built + 1
        assert row.data(1) == (1.0, 2.0, 3.0)
        assert row.render_line(0).text.rstrip().endswith("█")


async def test_spark_row_follows_theme_changes() -> None:
    app = Rows()
    async with app.run_test(size=(120, 4)) as pilot:
        row = app.query_one(SparkRow)
        row.set_data(0, DECODE)
        app.theme = "textual-dark"
        await pilot.pause()

        def tallest_colour() -> str | None:
            bar = next(seg for seg in row.render_line(0) if seg.text[0] == "█")
            assert bar.style is not None and bar.style.color is not None
            return bar.style.color.triplet.hex if bar.style.color.triplet else None

        dark = tallest_colour()
        app.theme = "textual-light"
        await pilot.pause()
        assert tallest_colour() != dark
        assert tallest_colour() == app.current_theme.primary.lower()


async def test_a_spark_row_without_values_says_n_a_not_a_floor() -> None:
    app = Rows()
    async with app.run_test(size=(120, 4)) as pilot:
        row = app.query_one(SparkRow)
        row.set_data(0, DECODE)
        await pilot.pause()
        text = row.render_line(0).text
        assert text.split("KV %")[1].strip() == "n/a"
        assert "▁" not in text.split("KV %")[1]
