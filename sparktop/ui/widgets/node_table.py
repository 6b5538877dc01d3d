"""NodeTable: one line per GPU, keyed by node + UUID, updated cell by cell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.events import Resize

from sparktop.ui.messages import LayoutChanged, NodeChosen
from sparktop.ui.styles import STYLE_VARIABLES
from sparktop.ui.views import ROW_SEP, WIDE_COLUMNS, Cell, Column, Order, RowView, columns_for
from sparktop.ui.widgets.line_table import LineCell, LineColumn, LineTable


def _styled(cell: Cell) -> LineCell:
    """A view cell (text, role) as a table cell (text, theme style)."""
    text, role = cell
    return text, STYLE_VARIABLES.get(role, "")


class NodeTable(LineTable):
    """GPU rows from :func:`sparktop.ui.views.node_rows`; only changed cells are touched.

    Rows are added and removed by key, cells updated one by one (a changed row is drawn
    again, the others are not), the order re-sorted only when rows come or go or a row's
    order changes, and the cursor stays on its row. Narrower terminals get a reduced column
    set (:func:`columns_for`).
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
        super().__init__(**kwargs)
        self.columns_spec: tuple[Column, ...] = WIDE_COLUMNS
        self._shown: dict[str, dict[str, Cell]] = {}
        self._orders: dict[str, Order] = {}
        self._pending_cursor: str | None = None
        self._build_columns()

    @property
    def narrow(self) -> bool:
        """True when a reduced column set is shown (cells use their compact forms)."""
        return self.columns_spec is not WIDE_COLUMNS

    def _build_columns(self) -> None:
        self.set_columns(LineColumn(c.key, c.label, c.width) for c in self.columns_spec)

    def on_resize(self, event: Resize) -> None:
        spec = columns_for(event.size.width)
        if spec is not self.columns_spec:
            self.columns_spec = spec
            # Rare (a resize or the budget pane opening): rebuild the columns once.
            self._pending_cursor = self.cursor_key()
            self._shown.clear()
            self._orders.clear()
            self._build_columns()
            self.post_message(LayoutChanged())

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
        for row in rows:
            shown = self._shown.get(row.key)
            if shown is None:
                cells = {c: row.cells.get(c, ("", "")) for c in columns}
                self.add_row(row.key, {c: _styled(cell) for c, cell in cells.items()}, row.order)
                self._shown[row.key] = cells
                self._orders[row.key] = row.order
                written += len(columns)
                reorder = True
                continue
            for column in columns:
                cell = row.cells.get(column, ("", ""))
                if shown[column] != cell:
                    self.update_cell(row.key, column, _styled(cell))
                    shown[column] = cell
                    written += 1
            if self._orders[row.key] != row.order:
                self._orders[row.key] = row.order
                self.set_order(row.key, row.order)
                reorder = True
        if reorder:
            self.sort()
            if cursor is not None and cursor in self._shown:
                self.move_cursor(self.get_row_index(cursor), scroll=False)
        return written

    def on_line_table_row_selected(self, event: LineTable.RowSelected) -> None:
        event.stop()
        node, _, gpu = event.row_key.partition(ROW_SEP)
        self.post_message(NodeChosen(node, gpu or None))
