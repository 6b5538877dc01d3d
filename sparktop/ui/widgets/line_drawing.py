"""How a :class:`~sparktop.ui.widgets.line_table.LineTable` draws: its cells, columns and rows
as values, and the base class that turns a row into one cached Strip (styles resolved once
per theme, neighbouring cells in one style joined into one segment, the ANSI-to-truecolor
filter applied per style rather than per line) and hands Textual the lines, skipping its
per-line work when it would only pass them through (:meth:`LineDrawing._plain_lines`).

Kept apart from the table's data and cursor so each module stays small; the table sets the
attributes declared on :class:`LineDrawing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.content import Content
from textual.filter import ANSIToTruecolor, LineFilter
from textual.geometry import NULL_SPACING, Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.style import Style as TextualStyle

from sparktop.ui.safe_text import without_control_filter
from sparktop.ui.views import CONTINUED as VIEW_CONTINUED
from sparktop.ui.widgets.cell_fit import fit, fit_words

CELL_PADDING = 1
"""Blank cells each side of a column, as DataTable's default ``cell_padding``."""


LineCell = tuple[str, str]
"""A cell: its text and its Textual style (``""`` for the table's own)."""
EMPTY: LineCell = ("", "")
CONTINUED: LineCell = VIEW_CONTINUED
"""A cell the one on its left runs into: their text is drawn as one, across both widths and
the padding between (a failed row's message over the memory, reasons and trend cells)."""


@dataclass(frozen=True, slots=True)
class LineColumn:
    """A column: its key, header label and content width in cells (padding excluded)."""

    key: str
    label: str
    width: int


@dataclass(slots=True)
class _Row:
    """A row's cells by column key, its sort value, and its drawn line while it holds."""

    cells: dict[str, LineCell]
    order: Any
    strip: Strip | None = None
    """The whole row drawn (no cursor), until a cell changes."""
    cursor_strip: Strip | None = None
    """The same under the cursor, while the cursor is on it."""


class LineDrawing(ScrollView):
    """The drawing half of a LineTable: rows to Strips, Strips to the screen."""

    columns: tuple[LineColumn, ...]
    cursor_row: int
    strips_built: int
    _rows: dict[str, _Row]
    _ordered: list[str]
    _styles: dict[int, dict[str, Style]]
    _header: Strip | None
    _base: Style | None
    _cursor_base: Style | None
    _frame: tuple[int, int, int] | None
    _truecolor_filter: ANSIToTruecolor | None
    _truecolor_background: Color | None
    _true_styles: dict[Style, Style]
    _header_base: Style | None
    _plain_key: int | None
    _plain: bool
    _shown_size: Size
    _rows_width: int

    def get_line_filters(self) -> Sequence[LineFilter]:
        # Cells are made printable as they are drawn (_fit), and each style is turned to
        # truecolor once as the ANSI-to-truecolor filter turns it (_true): either filter
        # would only copy every repainted line.
        filters = without_control_filter(super().get_line_filters())
        return [f for f in filters if not isinstance(f, ANSIToTruecolor)]

    def _true(self, style: Style) -> Style:
        """``style`` as the app's ANSI-to-truecolor filter draws it over this widget's
        background (``style`` itself while that filter is off)."""
        if self._truecolor_background is None:
            self._truecolor_background = self.background_colors[1]
            self._truecolor_filter = next(
                (
                    f
                    for f in super().get_line_filters()
                    if isinstance(f, ANSIToTruecolor) and f.enabled
                ),
                None,
            )
        if self._truecolor_filter is None:
            return style
        return self._truecolor_filter.truecolor_style(style, self._truecolor_background.rich_color)

    def _style(self, style: str, base: Style) -> Style:
        """``base`` plus the Rich style a Textual style string resolves to in this theme
        (``base`` is the row's or the cursor's, each kept until the styles change)."""
        styles = self._styles.get(id(base))
        if styles is None:
            styles = self._styles[id(base)] = {}
        resolved = styles.get(style)
        if resolved is None:
            segments = list(Content.styled("x", style).render_segments(TextualStyle(), ""))
            own = segments[0].style if segments else None
            resolved = styles[style] = base + own
        return resolved

    def _draw(self, cells: Sequence[LineCell], base: Style) -> Strip:
        """One line of ``cells`` (one per column), each padded by blanks in ``base``;
        neighbouring text in one style shares a segment (most cells and all padding are in
        ``base``). Drawn for every changed row of every tick: the loop is kept flat."""
        pad = " " * CELL_PADDING
        runs: list[tuple[list[str], Style]] = []
        run: list[str] = []
        run_style = base
        columns = self.columns
        count = len(columns)
        at = 0
        while at < count:
            text, role = cells[at]
            width = columns[at].width
            at += 1
            spans = at < count and cells[at] == CONTINUED
            while at < count and cells[at] == CONTINUED:
                width += 2 * CELL_PADDING + columns[at].width
                at += 1
            style = self._style(role, base) if role else base
            # pad, text, pad: the pads in ``base``, each piece joining the run of its style.
            if run_style is not base:
                runs.append((run, run_style))
                run, run_style = [], base
            run.append(pad)
            if style is not base:
                runs.append((run, base))
                run, run_style = [], style
            run.append(fit_words(text, width) if spans else fit(text, width))
            if run_style is not base:
                runs.append((run, run_style))
                run, run_style = [], base
            run.append(pad)
        # As wide as the widget too, so a repaint takes the line as it is (no crop or pad).
        columns_width = self.virtual_size.width
        width = max(columns_width, self._frame[0] if self._frame else self.size.width)
        if width > columns_width:
            run.append(" " * (width - columns_width))
        if run:
            runs.append((run, run_style))
        turned = self._turned
        return Strip([Segment("".join(texts), turned(st)) for texts, st in runs], width)

    def _turned(self, style: Style) -> Style:
        """:meth:`_true` of ``style``, kept until the styles change: a dict look-up where the
        filter's own memo hashes its three arguments, for every run of every drawn row."""
        turned = self._true_styles.get(style)
        if turned is None:
            turned = self._true_styles[style] = self._true(style)
        return turned

    def _header_style(self) -> Style:
        if self._header_base is None:
            self._header_base = self.base_style + self.get_component_rich_style(
                "line-table--header"
            )
        return self._header_base

    def _header_strip(self) -> Strip:
        if self._header is None:
            self._header = self._draw([(c.label, "") for c in self.columns], self._header_style())
        return self._header

    def _cells(self, row: _Row) -> list[LineCell]:
        get = row.cells.get
        return [get(c.key, EMPTY) for c in self.columns]

    def _row_strip(self, key: str) -> Strip:
        row = self._rows[key]
        if row.strip is None:
            self.strips_built += 1
            row.strip = self._draw(self._cells(row), self.base_style)
        return row.strip

    def render_lines(self, crop: Region) -> list[Strip]:
        # Read once per repaint what every line needs (``size`` walks the styles).
        size = self._shown_size = self.size
        self._rows_width = self.scrollable_content_region.width
        self._frame = (size.width, round(self.scroll_x), round(self.scroll_y))
        try:
            lines = self._plain_lines(crop)
            return lines if lines is not None else super().render_lines(crop)
        finally:
            self._frame = None

    def _plain_lines(self, crop: Region) -> list[Strip] | None:
        """The lines as Textual's styled render would give them when it would only pass
        them through (no border, outline, padding, tint, hatch, title, opacity or line
        filter), without its per-line work (~15 µs a line: the styles looked up, closures
        made, the line copied); None otherwise (then Textual renders them)."""
        styles = self.styles
        key = styles._cache_key
        if self._plain_key != key:
            self._plain_key = key
            self._plain = (
                not any(edge for edge, _color in styles.border)
                and not any(edge for edge, _color in styles.outline)
                and styles.padding == NULL_SPACING
                and not styles.tint.a
                and styles.text_opacity == 1.0
                and not (styles.has_rule("hatch") and styles.hatch != "none")
            )
        if not self._plain or self._border_title is not None or self._border_subtitle is not None:
            return None
        if self.opacity != 1.0 or self.get_line_filters() or self.hover_style._link_id:
            return None
        width, height = self.region.size
        if self.content_region.size != (width, height):
            return None
        lines = [self.render_line(y) for y in crop.line_range]
        if any(line.cell_length != width for line in lines):
            return None  # Textual pads or cuts each line to the width
        x1, x2 = crop.column_span
        if (x1, x2) != (0, width):
            return [line.crop(x1, x2) for line in lines]
        return lines

    def render_line(self, y: int) -> Strip:
        width, x, top = self._frame or (self.size.width, round(self.scroll_x), round(self.scroll_y))
        if y == 0:  # the header and its background span the whole width, as the cursor
            return self._fitted(self._header_strip(), x, width, self._turned(self._header_style()))
        index = top + y - 1
        if index >= len(self._ordered):
            return Strip.blank(width, self._turned(self.base_style))
        key = self._ordered[index]
        if index != self.cursor_row:
            return self._fitted(self._row_strip(key), x, width, self._turned(self.base_style))
        return self._fitted(self._cursor_strip(key), x, width, self._turned(self.cursor_base))

    @staticmethod
    def _fitted(strip: Strip, x: int, width: int, style: Style) -> Strip:
        """The part of a drawn line on screen (the line itself when it is exactly that)."""
        if x == 0 and strip.cell_length == width:
            return strip
        return strip.crop_extend(x, x + width, style)

    def _cursor_strip(self, key: str) -> Strip:
        """The row under the cursor: the cursor's background and text style; cells keep their
        own colour (a throttled reading stays red when selected), the rest take the cursor's."""
        row = self._rows[key]
        if row.cursor_strip is None:
            row.cursor_strip = self._draw(self._cells(row), self.cursor_base)
        return row.cursor_strip

    @property
    def cursor_base(self) -> Style:
        if self._cursor_base is None:
            self._cursor_base = self.base_style + self.get_component_rich_style(
                "line-table--cursor"
            )
        return self._cursor_base

    @property
    def base_style(self) -> Style:
        """The widget's own style (``rich_style``), kept until the styles change: computing it
        walks the DOM, which per line would cost more than drawing the line."""
        if self._base is None:
            self._base = self.rich_style
        return self._base
