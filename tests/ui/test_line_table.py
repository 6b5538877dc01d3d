"""LineTable: a cell update draws its row only, the cursor and header behave like a table's."""

from __future__ import annotations

import pytest
from rich.style import Style
from textual.app import App, ComposeResult
from textual.filter import LineFilter
from textual.geometry import Region
from textual.widgets import Input

from sparktop.ui.safe_text import without_control_filter
from sparktop.ui.widgets.line_table import LineColumn, LineTable

ROWS, COLUMNS = 30, 4


class TableApp(App[None]):
    CSS = "LineTable { max-height: 60%; }"  # 12 lines of a 20-line terminal

    def __init__(self) -> None:
        super().__init__()
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield LineTable()

    def on_mount(self) -> None:
        table = self.query_one(LineTable)
        table.set_columns(LineColumn(f"c{c}", f"col{c}", 6) for c in range(COLUMNS))
        for r in range(ROWS):
            table.add_row(f"r{r}", {f"c{c}": (f"r{r}c{c}", "") for c in range(COLUMNS)}, r)
        table.focus()

    def on_line_table_row_selected(self, event: LineTable.RowSelected) -> None:
        self.selected.append(event.row_key)


def screen_lines(app: App[None]) -> list[str]:
    table = app.query_one(LineTable)
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_one_cell_update_draws_one_row_and_shows_it() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        await pilot.pause()
        assert table.size.height == 12  # header + 11 rows, the rest scrolls
        built = table.strips_built
        table.update_cell("r5", "c2", ("NEW", ""))
        await pilot.pause()
        assert table.strips_built == built + 1
        assert "NEW" in app.export_screenshot()
        assert table.cell_text("r5", "c2") == "NEW"
        assert table.row_text("r5") == ["r5c0", "r5c1", "NEW", "r5c3"]
        # A row that is not on screen is drawn when it scrolls into view, not before.
        table.update_cell("r25", "c0", ("LATER", ""))
        await pilot.pause()
        assert table.strips_built == built + 1
        table.move_cursor(25)
        await pilot.pause()
        assert "LATER" in app.export_screenshot()
        # Moving the cursor back and forth draws no row again: both looks are kept.
        table.move_cursor(24)
        await pilot.pause()
        built = table.strips_built
        table.move_cursor(25)
        await pilot.pause()
        table.move_cursor(24)
        await pilot.pause()
        assert table.strips_built == built
        with pytest.raises(KeyError):
            table.update_cell("r5", "no-such-column", ("x", ""))


async def test_the_header_stays_while_the_cursor_scrolls_the_rows() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        for _ in range(15):
            await pilot.press("down")
        await pilot.pause()
        assert table.cursor_key() == "r15"
        lines = screen_lines(app)
        assert lines[0].split() == ["col0", "col1", "col2", "col3"]
        assert lines[-1].split()[0] == "r15c0"  # the cursor row is the last one visible
        await pilot.press("end")
        assert table.cursor_key() == f"r{ROWS - 1}"
        await pilot.press("home")
        assert table.cursor_key() == "r0"
        assert screen_lines(app)[1].split()[0] == "r0c0"
        await pilot.press("pagedown")
        assert table.cursor_row > 5


async def test_enter_and_a_click_on_the_cursor_row_select_it() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        await pilot.click(LineTable, offset=(2, 3))  # line 3 = the third row
        assert table.cursor_key() == "r2" and app.selected == []
        await pilot.click(LineTable, offset=(2, 3))
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.selected == ["r2", "r3"]
        await pilot.click(LineTable, offset=(2, 0))  # the header selects nothing
        assert table.cursor_key() == "r3"


async def test_sort_and_remove_keep_the_cursor_on_its_row() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        table.move_cursor(3)
        table.sort(lambda order: -order)
        assert table.row_keys[0] == f"r{ROWS - 1}"
        assert table.cursor_key() == "r3"
        table.remove_row(f"r{ROWS - 1}")  # a row above the cursor goes
        await pilot.pause()
        assert table.row_count == ROWS - 1
        assert table.cursor_key() == "r3"
        assert f"r{ROWS - 1}c0" not in app.export_screenshot()


async def test_cells_take_theme_colours_and_follow_a_theme_change() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        table.update_cell("r1", "c0", ("hot", "$error bold"))
        await pilot.pause()

        def colour() -> str | None:
            strip = table.render_line(2)
            (segment,) = [s for s in strip if s.text.strip() == "hot"]
            assert segment.style is not None and segment.style.color is not None
            assert segment.style.bold
            return segment.style.color.triplet.hex if segment.style.color.triplet else None

        assert colour() == app.theme_variables["error"].lower()
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        assert colour() == app.theme_variables["error"].lower()


async def test_removing_the_cursor_row_moves_the_cursor_to_the_next() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        table.move_cursor(3)
        table.remove_row("r3")
        assert table.cursor_key() == "r4"
        table.move_cursor(table.row_count - 1)
        table.remove_row(table.row_keys[-1])  # the last row: the cursor clamps to the new last
        await pilot.pause()
        assert table.cursor_key() == table.row_keys[-1]


class EmptyApp(App[None]):
    def compose(self) -> ComposeResult:
        yield LineTable()

    def on_mount(self) -> None:
        table = self.query_one(LineTable)
        table.set_columns([LineColumn("name", "name", 6), LineColumn("wide", "wide", 5)])
        table.focus()


async def test_an_empty_table_takes_keys_and_clicks_and_wide_text_keeps_its_width() -> None:
    app = EmptyApp()
    async with app.run_test(size=(40, 10)) as pilot:
        table = app.query_one(LineTable)
        await pilot.press("down", "up", "pagedown", "end", "home", "enter")
        await pilot.click(LineTable, offset=(2, 3))
        assert table.cursor_key() is None and table.row_count == 0
        # Two-cell characters: cut (with …) and padded by terminal cells, not characters.
        table.add_row("k", {"name": ("長い文脈を送る", ""), "wide": ("ab", "")})
        await pilot.pause()
        await pilot.click(LineTable, offset=(2, 5))  # below the last row: nothing happens
        line = table.render_line(1).text
        # padding, two wide characters, … and a blank (6 cells), padding; then " ab    "
        assert line.startswith(" 長い…   ab    ")
        assert table.cursor_key() == "k"


async def test_the_cursor_row_keeps_cell_colours_on_the_cursor_background() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        table.update_cell("r1", "c0", ("hot", "$error"))
        table.move_cursor(1)
        await pilot.pause()
        strips = app.screen._compositor.render_strips()
        hot = next(seg for seg in strips[2] if "hot" in seg.text)
        plain = next(seg for seg in strips[2] if "r1c1" in seg.text)
        assert hot.style is not None and plain.style is not None
        assert hot.style.color is not None and hot.style.color.triplet is not None
        assert hot.style.color.triplet.hex == app.theme_variables["error"].lower()
        assert hot.style.bgcolor == plain.style.bgcolor  # the cursor's, across the row
        other = next(seg for seg in strips[3] if "r2c1" in seg.text)
        assert other.style is not None and other.style.bgcolor != plain.style.bgcolor
        # A cell of the cursor row changes: the screen shows it.
        table.update_cell("r1", "c1", ("cooler", ""))
        await pilot.pause()
        assert "cooler" in app.screen._compositor.render_strips()[2].text


async def test_a_shorter_terminal_keeps_the_cursor_row_in_view() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        table.move_cursor(10)  # the last row that fits in 11
        await pilot.pause()
        await pilot.resize_terminal(60, 8)
        await pilot.pause()
        visible = [line.split()[0] for line in screen_lines(app)[1:] if line.split()]
        assert "r10c0" in visible


class FilteredTable(LineTable):
    """The table as drawn before: every line through the app's ANSI-to-truecolor filter."""

    def get_line_filters(self) -> list[LineFilter]:
        return without_control_filter(App.get_line_filters(self.app))

    def _true(self, style: Style) -> Style:
        return style


class TwoTables(App[None]):
    CSS = "LineTable { height: 8; }"

    def compose(self) -> ComposeResult:
        yield LineTable(id="own")
        yield FilteredTable(id="filtered")

    def on_mount(self) -> None:
        styles = ("", "$text-error", "$text-warning bold", "dim", "$text-muted", "ansi_red")
        for table in self.query(LineTable):
            table.set_columns(LineColumn(f"c{c}", f"col{c}", 6) for c in range(3))
            for r in range(10):
                cells = {f"c{c}": (f"r{r}c{c}", styles[(r + c) % len(styles)]) for c in range(3)}
                table.add_row(f"r{r}", cells, r)


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light", "ansi-dark", "ansi-light"])
async def test_lines_turned_to_truecolor_as_drawn_are_the_filtered_lines(theme: str) -> None:
    """The table turns each style to truecolor once, as the app's filter would turn every
    repainted line: the same segments, focused or not, in an ANSI theme too."""
    app = TwoTables()
    async with app.run_test(size=(40, 20)) as pilot:
        app.theme = theme
        own, filtered = app.query_one("#own", LineTable), app.query_one("#filtered", LineTable)
        region = Region(0, 0, own.size.width, own.size.height)
        app.set_focus(None)
        await pilot.pause()
        assert own.render_lines(region) == filtered.render_lines(region)
        own.focus()
        await pilot.pause()
        own_focused = own.render_lines(region)
        filtered.focus()
        await pilot.pause()
        assert own_focused == filtered.render_lines(region)


class PlainTable(App[None]):
    CSS = "LineTable { max-height: 12; }"

    def compose(self) -> ComposeResult:
        yield LineTable()
        yield Input()

    def on_mount(self) -> None:
        table = self.query_one(LineTable)
        table.set_columns(LineColumn(f"c{c}", f"col{c}", 6) for c in range(COLUMNS))
        for r in range(ROWS):
            cells = {f"c{c}": (f"r{r}c{c}", "$text-error" if r % 3 else "") for c in range(4)}
            table.add_row(f"r{r}", cells, r)


async def test_lines_drawn_past_the_styles_cache_are_textuals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plain table's lines skip Textual's styled render (no border, padding, tint...):
    the same strips as through it, whole or cut, scrolled, focused or not; with padding
    the table takes Textual's render again."""
    app = PlainTable()
    async with app.run_test(size=(30, 30)) as pilot:  # scrolls both ways
        table = app.query_one(LineTable)
        app.set_focus(None)
        await pilot.pause()
        width, height = table.region.size
        crops = [Region(0, 0, width, height), Region(0, 3, width, 2), Region(5, 1, 9, 4)]

        def same() -> None:
            for crop in crops:
                plain = table.render_lines(crop)
                with monkeypatch.context() as patch:
                    patch.setattr(table, "_plain_lines", lambda crop: None)
                    styled = table.render_lines(crop)
                assert plain == styled

        for _ in range(2):
            same()
            assert table._plain_lines(crops[0]) is not None
            table.move_cursor(20)
            table.scroll_to(x=3, animate=False)
            await pilot.pause()
            assert table.scroll_x == 3 and table.scroll_y > 0
            same()
            table.focus()
            await pilot.pause()
        table.styles.padding = (0, 1)
        await pilot.pause()
        assert table._plain_lines(crops[0]) is None
        same()


async def test_a_changed_row_leaves_the_scrollbar_as_it_is() -> None:
    """A changed row refreshes the row's cells, not the scrollbar beside it (Rich would
    render it again for every changed row); scrolling moves the scrollbar as before."""
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        table = app.query_one(LineTable)
        await pilot.pause()
        rows_width = table.scrollable_content_region.width
        assert rows_width < table.size.width  # a scrollbar is shown
        table.update_cell("r5", "c2", ("NEW", ""))
        regions = set(table._repaint_regions)
        assert regions and all(r.right <= rows_width for r in regions)
        await pilot.pause()
        assert "NEW" in app.export_screenshot()
        scrollbar = table.vertical_scrollbar
        before = scrollbar.position
        table.move_cursor(25)
        await pilot.pause()
        assert scrollbar.position > before
