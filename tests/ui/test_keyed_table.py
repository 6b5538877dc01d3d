"""KeyedTable: a cell update repaints its row only, and the screen shows the new value.

These guard the DataTable internals KeyedTable relies on (Textual is pinned exactly).
"""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from sparktop.ui.widgets.keyed_table import KeyedTable

ROWS, COLUMNS = 20, 6


class CountingTable(KeyedTable):
    rendered: list[str]

    def _render_cell(self, row_index: int, column_index: int, *args: Any, **kw: Any) -> Any:
        self.rendered.append(f"{row_index}:{column_index}")
        return super()._render_cell(row_index, column_index, *args, **kw)


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        table = CountingTable(cursor_type="row")
        table.rendered = []
        yield table

    def on_mount(self) -> None:
        table = self.query_one(CountingTable)
        for c in range(COLUMNS):
            table.add_column(f"c{c}", key=f"c{c}", width=6)
        for r in range(ROWS):
            table.add_row(*(f"r{r}c{c}" for c in range(COLUMNS)), key=f"r{r}")


async def test_one_cell_update_renders_one_row_and_shows_it() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(CountingTable)
        await pilot.pause()
        table.rendered.clear()
        table.update_cell("r5", "c2", "NEW")
        await pilot.pause()
        rows = {cell.split(":")[0] for cell in table.rendered}
        assert rows == {"5"}
        assert len(table.rendered) == COLUMNS
        assert "NEW" in app.export_screenshot()
        assert table.get_cell("r5", "c2") == "NEW"


async def test_deferred_refresh_and_structural_changes_still_render() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 30)) as pilot:
        table = app.query_one(CountingTable)
        await pilot.pause()
        table.rendered.clear()
        with table.deferred_refresh():
            for c in range(COLUMNS):
                table.update_cell("r1", f"c{c}", f"X{c}")
            table.update_cell("r2", "c0", "Y0")
        await pilot.pause()
        assert {cell.split(":")[0] for cell in table.rendered} == {"1", "2"}
        screen = app.export_screenshot()
        assert "X5" in screen and "Y0" in screen

        table.remove_row("r0")
        table.sort("c0", reverse=True)
        await pilot.pause()
        screen = app.export_screenshot()
        assert "r0c1" not in screen and "X1" in screen
        assert table.get_row_index("r1") == ROWS - 2  # reverse order: 'r…', 'Y0', then 'X0' last
