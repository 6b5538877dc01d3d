"""Every line the TUI draws made printable: :class:`ControlCharacters`, a Textual line filter.

Textual writes segment text to the terminal as it is, so an ESC in a node's error output or
a model name would start an escape sequence, and a bidi override would reorder the line. The
app registers :class:`ControlCharacters`, which passes each drawn segment through
:func:`sparktop.safe_text.printable` (the core's rule, shared with every non-TUI output).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from sparktop.safe_text import printable

__all__ = ["ControlCharacters", "printable", "without_control_filter"]


class ControlCharacters(LineFilter):
    """A line filter: control, bidi and zero-width characters in drawn text become visible
    (:func:`printable`); lines without any (nearly all) are returned as they are."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if all(seg.control or seg.text.isprintable() for seg in segments):
            return segments
        return [
            seg if seg.control or seg.text.isprintable() else seg._replace(text=printable(seg.text))
            for seg in segments
        ]


def without_control_filter(filters: Sequence[LineFilter]) -> list[LineFilter]:
    """``filters`` less :class:`ControlCharacters`, for a widget that makes its own text
    printable as it draws it (the filter would only copy each repainted line)."""
    return [f for f in filters if not isinstance(f, ControlCharacters)]
