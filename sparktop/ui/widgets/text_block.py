"""TextBlock: lines of Content that repaint without a layout pass when their height holds."""

from __future__ import annotations

from typing import Any

from textual.content import Content
from textual.widget import Widget


def _height(content: Content, width: int) -> int:
    """Lines ``content`` takes at ``width`` (Textual's own wrapping, as rendered)."""
    if all(len(line) <= width for line in content.plain.split("\n")):
        return content.plain.count("\n") + 1
    return len(content.wrap(width))


class TextBlock(Widget):
    """Like ``Static`` for text that changes every tick, but a new text with the same number
    of lines (none wider than the widget) only repaints: ``Static.update`` always asks for a
    layout pass of the whole screen, which at 1–2 Hz is most of the UI's cost."""

    DEFAULT_CSS = """
    TextBlock { height: auto; }
    """

    def __init__(self, content: Content | str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._content = content if isinstance(content, Content) else Content(content)

    @property
    def content(self) -> Content:
        return self._content

    def render(self) -> Content:
        return self._content

    def set_content(self, content: Content, *, layout: bool | None = None) -> None:
        """Show ``content``; a layout pass only when its height may differ (``layout``
        False: never, for fixed-height lines)."""
        old, self._content = self._content, content
        if layout is not None:
            self.refresh(layout=layout)
            return
        width = self.content_region.width
        same_height = width > 0 and _height(old, width) == _height(content, width)
        self.refresh(layout=not same_height)
