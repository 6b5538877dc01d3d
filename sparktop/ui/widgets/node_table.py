"""NodeTable: one line per GPU, keyed by node + UUID, updated cell by cell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.cells import cell_len
from textual.binding import Binding, BindingType
from textual.events import Resize

from sparktop.ui.messages import LayoutChanged, NodeChosen
from sparktop.ui.styles import STYLE_VARIABLES
from sparktop.ui.views import (
    MESSAGE_COLUMNS,
    ROW_SEP,
    WIDE_COLUMNS,
    Cell,
    Column,
    Order,
    RowView,
    columns_for,
)
from sparktop.ui.widgets.line_drawing import CELL_PADDING, CONTINUED, LineCell, LineColumn
from sparktop.ui.widgets.line_table import LineTable


def _styled(cell: Cell) -> LineCell:
    """A view cell (text, role) as a table cell (text, theme style); a continued cell stays
    one (the table draws it as part of its left neighbour)."""
    if cell == CONTINUED:
        return CONTINUED
    text, role = cell
    return text, STYLE_VARIABLES.get(role, "")


def fit_rank(text: str, width: int) -> str:
    """A TP cell (``group·rank``) cut to ``width`` in the group's name, never in the rank:
    ``deepseek-v41-flash·3`` in 12 cells is ``deepseek-v…·3``."""
    name, sep, rank = text.rpartition("·")
    if not sep or cell_len(text) <= width or width < len(rank) + 3:
        return text
    keep = width - len(rank) - 2
    return f"{name[:keep]}…·{rank}"


MESSAGE = "message"
"""Key of a failed row's message among the longest texts :meth:`NodeTable.sync` tracks."""


def _message_len(row: RowView) -> int:
    """Cells of the message a failed row runs across :data:`MESSAGE_COLUMNS`, else 0."""
    cells = [row.cells.get(k, ("", "")) for k in MESSAGE_COLUMNS]
    if CONTINUED not in cells:
        return 0
    return max(cell_len(text) for text, _style in cells)


class NodeTable(LineTable):
    """GPU rows from :func:`sparktop.ui.views.node_rows`; only changed cells are touched.

    Rows are added and removed by key, cells updated one by one (a changed row is drawn
    again, the others are not), the order re-sorted only when rows come or go or a row's
    order changes, and the cursor stays on its row. Narrower terminals get a reduced column
    set (:func:`columns_for`); the node and TP columns grow to the longest name
    (``GROWS``) when the terminal has the room, and cut a longer one with ``…``.
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

    GROWS: ClassVar[dict[str, int]] = {"node": 24, "tp": 20}
    """Columns that widen to their longest text, up to this many cells."""

    MESSAGE_GROWS = 60
    """How many cells the span of a failed row's message may widen by into spare room (its
    last column widens), so a wide terminal shows the whole reason."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._base_spec: tuple[Column, ...] = WIDE_COLUMNS
        self.columns_spec: tuple[Column, ...] = WIDE_COLUMNS
        self._longest: dict[str, int] = {}
        self._shown: dict[str, dict[str, Cell]] = {}
        self._orders: dict[str, Order] = {}
        self._pending_cursor: str | None = None
        self._build_columns()

    @property
    def narrow(self) -> bool:
        """True when a reduced column set is shown (cells use their compact forms)."""
        return self._base_spec is not WIDE_COLUMNS

    def _build_columns(self) -> None:
        self._widths = {c.key: c.width for c in self.columns_spec}
        self.set_columns(LineColumn(c.key, c.label, c.width) for c in self.columns_spec)

    def on_resize(self, event: Resize) -> None:
        self._lay_out(event.size.width)

    def _lay_out(self, width: int) -> None:
        """Choose the column set for a table ``width`` cells wide (scrollbar included) and
        widen the name columns into what is left; rebuild the columns if that changed."""
        base = columns_for(width)
        spare = width - 1 - sum(c.width + 2 for c in base)
        spec: list[Column] = []
        for column in base:
            cap = self.GROWS.get(column.key)
            if cap is not None and spare > 0:
                grow = min(max(0, min(self._longest.get(column.key, 0), cap) - column.width), spare)
                if grow:
                    column = Column(column.key, column.label, column.width + grow)
                    spare -= grow
            spec.append(column)
        span = [i for i, c in enumerate(spec) if c.key in MESSAGE_COLUMNS]
        if span and spare > 0:
            room = sum(spec[i].width + 2 * CELL_PADDING for i in span) - 2 * CELL_PADDING
            grow = min(self._longest.get(MESSAGE, 0) - room, spare, self.MESSAGE_GROWS)
            if grow > 0:
                last = spec[span[-1]]
                spec[span[-1]] = Column(last.key, last.label, last.width + grow)
        if base is self._base_spec and tuple(spec) == self.columns_spec:
            return
        self._base_spec, self.columns_spec = base, tuple(spec)
        # Rare (a resize, the budget pane, a longer name): rebuild the columns once.
        self._pending_cursor = self._pending_cursor or self.cursor_key()
        self._shown.clear()
        self._orders.clear()
        self._build_columns()
        self.post_message(LayoutChanged())

    def sync(self, rows: Sequence[RowView]) -> int:
        """Make the table show ``rows``; returns how many cells were written."""
        with self.held_refresh():
            return self._sync(rows)

    def _sync(self, rows: Sequence[RowView]) -> int:
        longest = {k: max((cell_len(r.cells.get(k, ("", ""))[0]) for r in rows), default=0)
                   for k in self.GROWS}  # fmt: skip
        longest[MESSAGE] = max((_message_len(r) for r in rows), default=0)
        if longest != self._longest:
            self._longest = longest
            if self.size.width:
                self._lay_out(self.size.width)
        wanted = {row.key for row in rows}
        restoring = self._pending_cursor is not None  # after the columns were rebuilt
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
                self.add_row(
                    row.key, {c: self._cell(c, cell) for c, cell in cells.items()}, row.order
                )
                self._shown[row.key] = cells
                self._orders[row.key] = row.order
                written += len(columns)
                reorder = True
                continue
            for column in columns:
                cell = row.cells.get(column, ("", ""))
                if shown[column] != cell:
                    self.update_cell(row.key, column, self._cell(column, cell))
                    shown[column] = cell
                    written += 1
            if self._orders[row.key] != row.order:
                self._orders[row.key] = row.order
                self.set_order(row.key, row.order)
                reorder = True
        if reorder:
            self.sort()
            if cursor is not None and cursor in self._shown:
                self.move_cursor(self.get_row_index(cursor), scroll=restoring)
        return written

    def _cell(self, column: str, cell: Cell) -> LineCell:
        if column == "tp":
            cell = (fit_rank(cell[0], self._widths.get("tp", 0)), cell[1])
        return _styled(cell)

    def on_line_table_row_selected(self, event: LineTable.RowSelected) -> None:
        event.stop()
        node, _, gpu = event.row_key.partition(ROW_SEP)
        self.post_message(NodeChosen(node, gpu or None))
