"""KeyedTable: a DataTable whose ``update_cell`` repaints one row, not the whole table.

Textual's DataTable keys every render cache (lines, rows, cells, row renderables) on one
``_update_count`` that ``update_cell`` bumps, so changing one cell re-renders every visible
cell (~40 ms for 64 rows × 12 columns on a small CPU, every second). Here ``update_cell``
instead bumps a version of that row and refreshes only its region; while a line is rendered
the count reads ``(count, row version)``, so only the changed row misses the caches.
Structural changes (rows or columns added, removed, sorted, resized) still bump the count
and invalidate everything, as in DataTable.

Cells that are :class:`~textual.content.Content` (or carry one as ``.content``) in rows one
line high also take a shorter render path: their segments are cropped, padded and styled
directly instead of going through Rich's ``Padding``/``render_lines`` twice, which is most of
DataTable's cost per cell. The result is the same segments, so snapshots do not change.

This relies on DataTable internals of the pinned Textual (``==8.2.8`` in pyproject.toml);
``tests/ui/test_keyed_table.py`` checks the behaviour so an upgrade that changes them fails
loudly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.content import Content
from textual.strip import Strip
from textual.style import Style as TextualStyle
from textual.widgets import DataTable
from textual.widgets._data_table import CellDoesNotExist, ColumnKey, Row, RowKey

CACHED_CELLS = 2000
CACHED_LINES = 300


class KeyedTable(DataTable[Any]):
    """A DataTable where a cell update costs a row, not a table."""

    _count: int = 0
    _rendering_version: int | None = None

    def __init__(self, **kwargs: Any) -> None:
        self._row_versions: dict[RowKey, int] = {}
        self._deferred: set[RowKey] | None = None
        # Cell text → segments (theme-resolved), shared by every cell showing the same text.
        self._segments: LRUCache[tuple[object, ...], list[Segment]] = LRUCache(CACHED_CELLS)
        super().__init__(**kwargs)
        # A row version bump leaves that row's old entries dead, so DataTable's sizes (10,000
        # cells, 1,000 lines) only fill with them: ~10 MB more within two minutes at 1 Hz.
        # These still hold every visible cell and line of the table on a 250-line terminal.
        self._cell_render_cache = LRUCache(CACHED_CELLS)
        self._row_render_cache = LRUCache(CACHED_LINES)
        self._line_cache = LRUCache(CACHED_LINES)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._segments.clear()  # theme variables resolve differently now

    @contextmanager
    def deferred_refresh(self) -> Iterator[None]:
        """Within the block, cell updates repaint each changed row once, at the end."""
        self._deferred = set()
        try:
            yield
        finally:
            rows, self._deferred = self._deferred, None
            for row in rows:
                index = self._row_locations.get(row)
                if index is not None:
                    self.refresh_row(index)

    # The count DataTable keys its caches on: per row while that row's line is rendered.
    @property  # type: ignore[override]
    def _update_count(self) -> int | tuple[int, int]:
        version = self._rendering_version
        return self._count if version is None else (self._count, version)

    @_update_count.setter
    def _update_count(self, value: int) -> None:
        self._count = value

    @property
    def _y_offsets(self) -> list[tuple[RowKey, int]]:
        cached = self._offset_cache.get(self._count)
        if cached is None:
            cached = [(row.key, y) for row in self.ordered_rows for y in range(row.height)]
            self._offset_cache[self._count] = cached
        return cached

    @property
    def ordered_rows(self) -> list[Row]:
        cache_key = (self.row_count, self._count)
        cached = self._ordered_row_cache.get(cache_key)
        if cached is None:
            key_at = self._row_locations.get_key
            cached = [self.rows[key] for i in range(self.row_count) if (key := key_at(i))]
            self._ordered_row_cache[cache_key] = cached
        return cached

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: Any,
        *,
        update_width: bool = False,
    ) -> None:
        """Set a cell and repaint only its row (``update_width`` falls back to DataTable)."""
        if update_width:
            super().update_cell(row_key, column_key, value, update_width=True)
            return
        row = RowKey(row_key) if isinstance(row_key, str) else row_key
        column = ColumnKey(column_key) if isinstance(column_key, str) else column_key
        if row not in self._row_locations or column not in self._column_locations:
            raise CellDoesNotExist(f"No cell exists for row_key={row!r}, column_key={column!r}.")
        self._data[row][column] = value
        self._row_versions[row] = self._row_versions.get(row, 0) + 1
        if self._deferred is not None:
            self._deferred.add(row)
            return
        index = self._row_locations.get(row)
        if index is not None:
            self.refresh_row(index)

    def remove_row(self, row_key: RowKey | str) -> None:
        super().remove_row(row_key)
        self._row_versions.pop(RowKey(row_key) if isinstance(row_key, str) else row_key, None)

    def _render_cell(
        self,
        row_index: int,
        column_index: int,
        base_style: Style,
        width: int,
        cursor: bool = False,
        hover: bool = False,
    ) -> list[list[Segment]]:
        content = self._one_line_content(row_index, column_index)
        if content is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        cache_key = (
            row_key, column_key, base_style, cursor, hover, self._show_hover_cursor,
            self._update_count, self._pseudo_class_state,
        )  # fmt: skip
        cached = self._cell_render_cache.get(cache_key)  # type: ignore[arg-type]
        if cached is not None:
            return cached
        fixed = row_index < self.fixed_rows or column_index < self.fixed_columns
        component_style, post_style = self._get_styles_to_render_cell(
            False, False, fixed, hover, cursor, self.show_cursor, self._show_hover_cursor,
            self.cursor_foreground_priority == "css", self.cursor_background_priority == "css",
        )  # fmt: skip
        pre_style = base_style + Style.from_meta({"row": row_index, "column": column_index})
        pre_style += component_style
        pad = self.cell_padding
        inner = max(0, width - 2 * pad)
        key = (content.plain, *content.spans, inner)
        body = self._segments.get(key)
        if body is None:
            body = Segment.adjust_line_length(content.render_segments(TextualStyle(), ""), inner)
            self._segments[key] = body
        line = [Segment(" " * pad), *body, Segment(" " * pad)] if pad else body
        lines = [list(Segment.apply_style(line, pre_style, post_style))]
        self._cell_render_cache[cache_key] = lines  # type: ignore[arg-type]
        return lines

    def _one_line_content(self, row_index: int, column_index: int) -> Content | None:
        """The cell's Content when the short render path applies, else None."""
        if row_index < 0 or column_index < 0:
            return None
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        if row_key is None or column_key is None or self.rows[row_key].height != 1:
            return None
        value = self._data[row_key].get(column_key)
        value = getattr(value, "content", value)
        return value if isinstance(value, Content) and "\n" not in value.plain else None

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        try:
            row_key, _ = self._get_offsets(y)
        except LookupError:
            return super()._render_line(y, x1, x2, base_style)
        self._rendering_version = self._row_versions.get(row_key, 0)
        try:
            return super()._render_line(y, x1, x2, base_style)
        finally:
            self._rendering_version = None
