"""Text from nodes and servers shown as text: control characters become visible symbols.

A node's error output, a model name or a metric label can hold any character; Textual writes
segment text to the terminal as it is, so an ESC in it would start an escape sequence (set
the title, write the clipboard with OSC 52, move the cursor). Every line drawn passes through
:class:`ControlCharacters` (registered by the app), which shows C0 controls as their Unicode
control pictures (ESC → ``␛``), DEL as ``␡`` and C1 controls as ``�``: one cell each, nothing
the terminal acts on.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

_VISIBLE = str.maketrans(
    {c: chr(0x2400 + c) for c in range(0x20)}
    | {0x7F: "\u2421"}
    | {c: "\ufffd" for c in range(0x80, 0xA0)}
)


def printable(text: str) -> str:
    """``text`` with every control character replaced by a visible one-cell symbol."""
    return text if text.isprintable() else text.translate(_VISIBLE)


class ControlCharacters(LineFilter):
    """A line filter: control characters in drawn text become visible (:func:`printable`);
    lines without any (nearly all) are returned as they are."""

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
