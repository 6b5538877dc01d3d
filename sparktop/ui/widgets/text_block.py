"""TextBlock: lines of Content that repaint only the lines that changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.content import Content
from textual.geometry import Region
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual

from sparktop.ui.frame import FramedWidget

NEWLINE = Content("\n")

RICH_STYLES_KEPT = 1024
"""Rich styles kept per TextBlock by (x, y, span style); the cache starts over past this."""


def _height(lines: Sequence[Content], width: int) -> int:
    """Lines ``lines`` take at ``width`` (Textual's own wrapping, as rendered)."""
    if all(line.cell_length <= width for line in lines):
        return len(lines)
    return len(NEWLINE.join(lines).wrap(width))


class TextBlock(FramedWidget):
    """Like ``Static`` for text that changes every tick, but cheaper to repaint:

    - a new text with the same number of lines (none wider than the widget) needs no layout
      pass (``Static.update`` always asks for one, of the whole screen);
    - each line is rendered on its own and kept: only lines whose text or styles changed are
      marked dirty and rebuilt, the others keep their strip through any repaint until the
      width, the widget's style or the theme changes.

    When a line does not fit the width (it wraps, is cut or folded), when the text is not
    left-aligned or has tabs, and while text is selected, the lines render as one block, as
    ``Static`` renders them.
    """

    DEFAULT_CSS = """
    TextBlock { height: auto; }
    """

    def __init__(self, content: Content | str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        content = content if isinstance(content, Content) else Content(content)
        self._lines: list[Content] = content.split("\n", allow_blank=True)
        self._content: Content | None = content
        self._strips: dict[int, Strip] = {}
        self._block: list[Strip] | None = None
        self._rich_styles: dict[tuple[int, int, VisualStyle], RichStyle] = {}
        self._span_styles: dict[str | VisualStyle, VisualStyle] = {}
        """Each span style over the widget's, as drawn (kept with :attr:`_rich_styles`)."""
        self._key: tuple[object, ...] | None = None
        self.line_builds = 0
        """Lines rendered so far (tests count how many a change rebuilt)."""

    @property
    def content(self) -> Content:
        if self._content is None:
            self._content = NEWLINE.join(self._lines)
        return self._content

    @property
    def lines(self) -> tuple[Content, ...]:
        return tuple(self._lines)

    def render(self) -> Content:
        return self.content

    def set_content(self, content: Content, *, layout: bool | None = None) -> None:
        """Show ``content`` (lines separated by ``\\n``); see :meth:`set_lines`."""
        self.set_lines(content.split("\n", allow_blank=True), layout=layout)
        self._content = content

    def set_lines(self, lines: Sequence[Content], *, layout: bool | None = None) -> None:
        """Show ``lines`` (none containing ``\\n``), repainting only those that changed. A
        layout pass only when the height may differ (``layout`` False: never, for
        fixed-height widgets; True: always)."""
        old, self._lines = self._lines, list(lines)
        self._content = None
        width = self.size.width
        if layout is None:
            layout = not (width > 0 and _height(old, width) == _height(self._lines, width))
        if (
            layout
            or width <= 0
            or len(old) != len(self._lines)
            or self._block is not None
            or not self._per_line(width)
        ):
            self._forget()
            self.refresh(layout=layout)
            return
        pairs = enumerate(zip(old, self._lines, strict=True))
        changed = [y for y, (was, now) in pairs if not was.is_same(now)]
        for y in changed:
            self._strips.pop(y, None)
        if changed:
            self.refresh(*(Region(0, y, width, 1) for y in changed))

    def selection_updated(self, selection: Selection | None) -> None:
        self._forget()  # the block drawn with (or without) the old selection
        super().selection_updated(selection)

    def _forget(self) -> None:
        self._strips.clear()
        self._rich_styles.clear()
        self._span_styles.clear()
        self._block = None

    def _per_line(self, width: int) -> bool:
        """Whether each line renders on its own exactly as in the whole block: every line
        fits (nothing to wrap, cut or fold), left-aligned, no tabs, nothing selected."""
        styles = self.styles
        return (
            self.text_selection is None
            and styles.text_align in ("left", "start")
            and not styles.line_pad
            and tuple(styles.content_align) == ("left", "top")
            and all(line.cell_length <= width and "\t" not in line.plain for line in self._lines)
        )

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        styles = self.styles
        style = self.visual_style
        key = (
            width,
            style,
            self.app.theme,
            styles.text_align,
            styles.text_overflow,
            styles.text_wrap,
            styles.line_pad,
            styles.content_align,
        )
        if key != self._key:
            self._key = key
            self._forget()
        if self._block is None and (self._strips or self._per_line(width)):
            strip = self._strips.get(y)
            if strip is None:
                if y >= len(self._lines):
                    return Strip.blank(width, style.rich_style)
                strip = self._strips[y] = self._line_strip(y, style)
                self.line_builds += 1
            return strip
        if self._block is None:
            self._block = Visual.to_strips(self, self.content, width, height, style)
            self.line_builds += len(self._block)
        if y < len(self._block):
            return self._block[y]
        return Strip.blank(width, style.rich_style)

    def _line_strip(self, y: int, style: VisualStyle) -> Strip:
        """Line ``y`` as ``Content.render_strips`` draws a line that fits: each span's style
        over the widget's, with the (x, y) offsets text selection reads."""
        line = self._lines[y]
        segments: list[Segment] = []
        x = 0
        cache = self._rich_styles
        if len(cache) > RICH_STYLES_KEPT:
            cache.clear()
            self._span_styles.clear()
        pieces = self._pieces(line, style)
        if pieces is None:
            pieces = list(line.render(style, end="", parse_style=self._get_style))
        for text, text_style in pieces:
            # Most spans keep their style and place from one tick to the next (only the
            # numbers change): building their Rich style is most of a line's cost.
            rich_style = cache.get((x, y, text_style))
            if rich_style is None:
                rich_style = (style + text_style).rich_style_with_offset(x, y)
                cache[x, y, text_style] = rich_style
            segments.append(Segment(text, rich_style))
            x += len(text)
        return Strip(segments, line.cell_length)

    def _pieces(self, line: Content, style: VisualStyle) -> list[tuple[str, VisualStyle]] | None:
        """What ``line.render(style)`` yields for a line whose spans follow one another
        without overlapping (the views' lines: one span per styled part), without its
        general span stack; None for any other line (``Content.render`` draws it)."""
        text = line.plain
        spans = line.spans
        if not spans:
            return [(text, style)]  # an empty line too, as Content.render yields it
        span_styles = self._span_styles
        pieces: list[tuple[str, VisualStyle]] = []
        at = 0
        for start, end, span_style in spans:
            if start < at or end < start or end > len(text):
                return None
            if start > at:
                pieces.append((text[at:start], style))
            if end > start:
                combined = span_styles.get(span_style)
                if combined is None:
                    combined = span_styles[span_style] = style + self._get_style(span_style)
                pieces.append((text[start:end], combined))
            at = end
        if at < len(text):
            pieces.append((text[at:], style))
        return pieces
