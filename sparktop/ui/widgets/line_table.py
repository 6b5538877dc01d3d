"""LineTable: keyed rows one line high, each drawn as one cached Strip.

Textual's DataTable renders cell by cell (padding, styles and caches per cell) and keys its
caches on one counter that any cell update bumps; at 64 GPU rows × 12 columns refreshed every
second that is most of the UI's cost. Here a row is one line: its Strip is built once from its
cells when a cell of that row changes (or the focus or theme does) and reused for every repaint
until then, so a tick costs the rows that changed and nothing else; the cursor is drawn over
the kept strip.

A cell is ``(text, style)``: plain text (never markup) and a Textual style string such as
``"$spark-crit bold"``, resolved against the theme once per style when rows are drawn. The
header stays on the first line while the rows scroll under it. The look (header, cursor,
focus tint) is DataTable's, from the same theme variables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

from rich.style import Style
from textual import events, on
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.filter import ANSIToTruecolor
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from sparktop.ui.frame import FramedWidget
from sparktop.ui.widgets.line_drawing import (
    CELL_PADDING,
    EMPTY,
    LineCell,
    LineColumn,
    LineDrawing,
    _Row,
)


class LineTable(LineDrawing, FramedWidget, can_focus=True):
    """A table of one-line rows, addressed by string keys, with a row cursor.

    ``set_columns`` defines the columns; rows are added, updated (``update_cell``) and removed
    by key and shown in ``sort`` order. Enter (or a click on the cursor row) posts
    :class:`LineTable.RowSelected`.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        # j/k/g/G as in k9s, less and vim; replay's ``g`` (start, a priority binding) wins.
        Binding("up,k", "cursor_up", "Cursor up", show=False),
        Binding("down,j", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,ctrl+home,g", "first", "First row", show=False),
        Binding("end,ctrl+end,G", "last", "Last row", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"line-table--header", "line-table--cursor"}

    DEFAULT_CSS = """
    LineTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .line-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .line-table--header {
                background-tint: $foreground 5%;
            }
        }
        & > .line-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .line-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .line-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    # No repaint of the whole table on a move: the watcher refreshes the two rows involved.
    cursor_row: reactive[int] = reactive(0, init=False, always_update=True, repaint=False)

    class RowSelected(Message):
        """Enter, or a click on the row under the cursor."""

        def __init__(self, table: LineTable, row_key: str) -> None:
            super().__init__()
            self.table = table
            self.row_key = row_key

        @property
        def control(self) -> LineTable:
            return self.table

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.columns: tuple[LineColumn, ...] = ()
        self._column_keys: frozenset[str] = frozenset()
        self._rows: dict[str, _Row] = {}
        self._ordered: list[str] = []
        self._index: dict[str, int] = {}
        self._styles: dict[int, dict[str, Style]] = {}
        self._header: Strip | None = None
        self._base: Style | None = None
        self._cursor_base: Style | None = None
        self._frame: tuple[int, int, int] | None = None
        self._truecolor_filter: ANSIToTruecolor | None = None
        self._truecolor_background: Color | None = None
        """The filter and the background it draws over, until the styles change."""
        self._true_styles: dict[Style, Style] = {}
        """Each style as :meth:`_turned` turned it, until the styles change."""
        self._header_base: Style | None = None
        self._plain_key: int | None = None
        self._plain = False
        """Whether the styles (as of their cache key) let :meth:`_plain_lines` draw."""
        self._shown_size = Size(0, 0)
        """The size at the last repaint: a row below it is drawn when it comes into view."""
        self._rows_width = 0
        """The width left of the vertical scrollbar at the last repaint: a changed row
        refreshes only that (the scrollbar, drawn by Rich, would be rendered again)."""
        self._held: list[Region] | None = None
        """Rows to refresh at the end of :meth:`held_refresh` (None: refreshed at once)."""
        self.strips_built = 0
        """Rows drawn since the table was made (tests count repaints with it)."""

    # -- data ------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._ordered)

    @property
    def row_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._ordered)

    def set_columns(self, columns: Iterable[LineColumn]) -> None:
        """Replace the columns and drop every row."""
        self.columns = tuple(columns)
        self._column_keys = frozenset(c.key for c in self.columns)
        self.clear()

    def clear(self) -> None:
        """Drop every row (the columns stay)."""
        self._rows.clear()
        self._ordered.clear()
        self._index.clear()
        self._header = None
        self._resized()

    def add_row(self, key: str, cells: Mapping[str, LineCell], order: Any = None) -> None:
        """Add a row at the end (``sort`` places it); a missing cell shows blank."""
        if key in self._rows:
            raise KeyError(f"row {key!r} already exists")
        self._rows[key] = _Row(dict(cells), order)
        self._index[key] = len(self._ordered)
        self._ordered.append(key)
        self._resized()

    def remove_row(self, key: str) -> None:
        """Remove a row (``KeyError`` if there is none); the cursor stays on its row, or on
        the next one when its own row goes."""
        index = self._index[key]
        del self._rows[key]
        del self._ordered[index]
        self._index = {k: i for i, k in enumerate(self._ordered)}
        if index < self.cursor_row:
            self.cursor_row -= 1
        self._resized()

    def update_cell(self, key: str, column: str, cell: LineCell) -> None:
        """Set one cell; only its row is drawn again. ``KeyError`` for a row or column that
        does not exist."""
        if column not in self._column_keys:
            raise KeyError(f"no column {column!r}")
        row = self._rows[key]
        row.cells[column] = cell
        if row.strip is not None or row.cursor_strip is not None:  # drawn: draw it again
            row.strip = row.cursor_strip = None
            self._refresh_row(self._index[key])

    def set_order(self, key: str, order: Any) -> None:
        """The value ``sort`` orders this row by."""
        self._rows[key].order = order

    def sort(self, key: Callable[[Any], Any] = lambda order: order) -> None:
        """Order rows by ``key(order)`` of each row (stable); the cursor stays on its row."""
        current = self.cursor_key()
        self._ordered.sort(key=lambda k: key(self._rows[k].order))
        self._index = {k: i for i, k in enumerate(self._ordered)}
        if current is not None:
            self.move_cursor(self._index[current], scroll=False)
        self.refresh()

    def get_cell(self, key: str, column: str) -> LineCell:
        """The cell as set (``EMPTY`` if never set); ``KeyError`` for an unknown row."""
        return self._rows[key].cells.get(column, EMPTY)

    def cell_text(self, key: str, column: str) -> str:
        """The cell's text; ``KeyError`` for an unknown row."""
        return self.get_cell(key, column)[0]

    def get_row_index(self, key: str) -> int:
        """The row's place in display order (0 = top); ``KeyError`` for an unknown row."""
        return self._index[key]

    def row_text(self, key: str) -> list[str]:
        """The row's cells as plain text, in column order."""
        return [self.cell_text(key, c.key) for c in self.columns]

    # -- cursor ----------------------------------------------------------------------------

    def cursor_key(self) -> str | None:
        """The row key under the cursor, or None when the table is empty."""
        if not self._ordered:
            return None
        return self._ordered[min(self.cursor_row, len(self._ordered) - 1)]

    def move_cursor(self, row: int, *, scroll: bool = True) -> None:
        """Put the cursor on display row ``row`` (clamped to the rows there are), scrolled
        into view unless ``scroll`` is False."""
        self.cursor_row = max(0, min(row, len(self._ordered) - 1))
        if scroll:
            self._scroll_cursor_visible()

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._refresh_row(old)
        self._refresh_row(new)

    def _scroll_cursor_visible(self) -> None:
        visible = max(1, self.scrollable_content_region.height - 1)
        top = round(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)

    def _step(self, rows: int) -> None:
        self.move_cursor(self.cursor_row + rows)

    def action_cursor_up(self) -> None:
        self._step(-1)

    def action_cursor_down(self) -> None:
        self._step(1)

    def action_page_up(self) -> None:
        self._step(-max(1, self.scrollable_content_region.height - 2))

    def action_page_down(self) -> None:
        self._step(max(1, self.scrollable_content_region.height - 2))

    def action_first(self) -> None:
        self.move_cursor(0)

    def action_last(self) -> None:
        self.move_cursor(len(self._ordered) - 1)

    def action_select_cursor(self) -> None:
        key = self.cursor_key()
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        index = round(self.scroll_y) + offset.y - 1
        if index >= len(self._ordered):
            return
        if index == self.cursor_row:
            self.action_select_cursor()
        else:
            self.move_cursor(index, scroll=False)

    @on(events.Resize)
    def _keep_cursor_in_view(self) -> None:
        # The cursor row stays in view when the table gets shorter (or its rows move).
        self.call_after_refresh(self._scroll_cursor_visible)
        self._forget_lines()  # drawn for the old width

    def on_focus(self) -> None:
        self._restyled()

    def on_blur(self) -> None:
        self._restyled()

    # -- styles ----------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._restyled()

    def _restyled(self) -> None:
        """Styles resolve differently (theme, focus): draw everything again."""
        self._styles.clear()
        self._true_styles.clear()
        self._truecolor_background = None
        self._header_base = None
        self._base = None
        self._cursor_base = None
        self._forget_lines()

    def _forget_lines(self) -> None:
        self._header = None
        for row in self._rows.values():
            row.strip = row.cursor_strip = None
        self.refresh()

    def _resized(self) -> None:
        width = sum(c.width + 2 * CELL_PADDING for c in self.columns)
        size = Size(width, len(self._ordered) + 1)
        if size != self.virtual_size:
            self.virtual_size = size  # a layout pass: the table's height follows its rows
        if self._ordered and self.cursor_row >= len(self._ordered):
            self.cursor_row = len(self._ordered) - 1
        self.refresh()

    def _refresh_row(self, index: int) -> None:
        y = index + 1 - round(self.scroll_y)  # on screen, under the header
        width, height = self._rows_width, self._shown_size.height
        if 1 <= y < height:
            if self._held is not None:
                self._held.append(Region(0, y, width, 1))
            else:
                self.refresh(Region(0, y, width, 1))

    @contextmanager
    def held_refresh(self) -> Iterator[None]:
        """The rows changed inside are marked for the next repaint together as it ends: one
        refresh of the widget with every changed line (a refresh works out the widget's
        offset and clears its caches each time: a tick changing every row paid it per row)."""
        if self._held is not None:
            yield
            return
        self._held = []
        try:
            yield
        finally:
            regions, self._held = self._held, None
            if regions:
                self.refresh(*regions)
