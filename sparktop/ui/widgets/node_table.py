"""NodeTable: one row per GPU, keyed by node + UUID, updated cell by cell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.events import Resize
from textual.widgets import DataTable

from sparktop.ui.messages import LayoutChanged, NodeChosen
from sparktop.ui.styles import styled
from sparktop.ui.views import ROW_SEP, WIDE_COLUMNS, Cell, Column, Order, RowView, columns_for
from sparktop.ui.widgets.keyed_table import KeyedTable


class OrderedCell:
    """The node cell: renders its content and carries the row's sort order."""

    __slots__ = ("content", "order")

    def __init__(self, content: Content, order: Order) -> None:
        self.content = content
        self.order = order

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.content


class NodeTable(KeyedTable):
    """GPU rows from :func:`sparktop.ui.views.node_rows`; only changed cells are touched.

    Rows are added and removed by key, cells updated with ``update_cell`` (never
    ``update_width``), the order re-sorted only when rows come or go, and the cursor stays
    on its row. Narrower terminals get a reduced column set (:func:`columns_for`).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "select_cursor",
            "Details",
            tooltip="open the node's detail screen",
            id="node.details",
        ),
    ]

    DEFAULT_CSS = """
    NodeTable {
        height: auto;
        max-height: 40%;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.columns_spec: tuple[Column, ...] = WIDE_COLUMNS
        self._shown: dict[str, dict[str, Cell]] = {}
        self._orders: dict[str, Order] = {}
        self._columns_built = False

    def on_mount(self) -> None:
        self._build_columns()

    @property
    def narrow(self) -> bool:
        """True when a reduced column set is shown (cells use their compact forms)."""
        return self.columns_spec is not WIDE_COLUMNS

    def _build_columns(self) -> None:
        for column in self.columns_spec:
            self.add_column(column.label, key=column.key, width=column.width)
        self._columns_built = True

    def on_resize(self, event: Resize) -> None:
        spec = columns_for(event.size.width)
        if spec is not self.columns_spec:
            self.columns_spec = spec
            # Rare (a resize or the budget pane opening): rebuild the columns once.
            cursor = self.cursor_key()
            self.clear(columns=True)
            self._shown.clear()
            self._orders.clear()
            self._build_columns()
            self._pending_cursor = cursor
            self.post_message(LayoutChanged())

    _pending_cursor: str | None = None

    def cursor_key(self) -> str | None:
        """The row key under the cursor, or None when the table is empty."""
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:  # the cursor can briefly point past the last row
            return None

    def sync(self, rows: Sequence[RowView]) -> int:
        """Make the table show ``rows``; returns how many cells were written."""
        wanted = {row.key for row in rows}
        cursor = self._pending_cursor or self.cursor_key()
        self._pending_cursor = None
        reorder = False
        for key in [k for k in self._shown if k not in wanted]:
            self.remove_row(key)
            del self._shown[key]
            self._orders.pop(key, None)
            reorder = True
        columns = [c.key for c in self.columns_spec]
        written = 0
        with self.deferred_refresh():
            for row in rows:
                shown = self._shown.get(row.key)
                if shown is None:
                    self.add_row(*(self._cell_value(row, c) for c in columns), key=row.key)
                    self._shown[row.key] = {c: row.cells.get(c, ("", "")) for c in columns}
                    self._orders[row.key] = row.order
                    written += len(columns)
                    reorder = True
                    continue
                for column in columns:
                    cell = row.cells.get(column, ("", ""))
                    if shown[column] != cell:
                        self.update_cell(row.key, column, self._cell_value(row, column))
                        shown[column] = cell
                        written += 1
                if self._orders[row.key] != row.order:
                    self._orders[row.key] = row.order
                    reorder = True
        if reorder:
            self.sort("node", key=lambda cell: cell.order)
            if cursor is not None and cursor in self._shown:
                self.move_cursor(row=self.get_row_index(cursor), scroll=False)
        return written

    def _cell_value(self, row: RowView, column: str) -> object:
        content = styled(row.cells.get(column, ("", "")))
        return OrderedCell(content, row.order) if column == "node" else content

    def restyle(self) -> None:
        """Re-render every cell (after a theme change; styles resolve at render time)."""
        self._clear_caches()
        self.refresh()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if key is not None:
            node, _, gpu = key.partition(ROW_SEP)
            self.post_message(NodeChosen(node, gpu or None))
