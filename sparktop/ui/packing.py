"""Lines of (text, style) cells from groups that never split, filled to a width (Textual-free).

The engine block, its expected strip and the budget pane lay their items out with
:func:`pack`, so the same block reads well at 200, 120 and 80 columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sparktop.ui.views import Cell

Line = list[Cell]
Group = list[Cell]

GAP = "  "
"""Between two groups on a line."""

_WORD = re.compile(r"\S+\s*|\s+")
_FIGURE = re.compile(r"(?<![\w/.,])\d[\d,.]*(?![\w/])( m?s\b)?")
"""A number or duration in text, not one in a name (``p50``, ``1/ITL``)."""
NUMBER_ROOM = 6
"""A number's room in a :class:`Figures` group: ``16,399``, ``308.4``."""
DURATION_ROOM = 7
"""A duration's: ``12.50 s``, ``999 ms``."""


class Field(list[Cell]):
    """A group whose room in a line is its labels plus ``value_room`` columns for its
    values, however long they are now: :func:`pack` wraps by that room, so a value that
    changes length (``9 ms`` → ``10 ms``) never moves a group to another line. A block that
    changed height as its values did moved everything below it, and the whole screen was
    repainted every tick. Labels are the ``dim`` cells (an n/a reason too: it is said as long
    as it lasts)."""

    def __init__(self, cells: Sequence[Cell], value_room: int) -> None:
        super().__init__(cells)
        self.room = sum(len(text) for text, style in cells if style == "dim") + value_room


class Figures(list[Cell]):
    """A group of text with figures in it (the expected strip's load, each comparison),
    measured for :func:`pack` with each number at least :data:`NUMBER_ROOM` columns and each
    duration :data:`DURATION_ROOM` (``999`` as ``16,399``, ``9 ms`` as ``12.50 s``), and the
    whole at least ``at_least``: where lines wrap follows what the group says (a range or one
    count, a verdict or none), not how long its figures are this tick."""

    def __init__(self, cells: Sequence[Cell], at_least: int = 0) -> None:
        super().__init__(cells)
        self.room = max(at_least, sum(_measure(text) for text, _ in cells))


def _measure(text: str) -> int:
    grown = sum(
        max(0, (DURATION_ROOM if m.group(1) else NUMBER_ROOM) - len(m.group()))
        for m in _FIGURE.finditer(text)
    )
    return len(text) + grown


def pack(
    groups: Sequence[Group], width: int, indent: str = GAP, hang: str | None = None
) -> list[Line]:
    """Lay groups out left to right, two spaces apart, starting a new line when one would
    overflow ``width``; continuation lines start with ``indent``. A :class:`Field` takes
    its room (or its text, when longer), so where lines wrap does not follow its value.

    A group wider than a line (a long reason) breaks between words and goes on under
    ``hang`` (``indent`` and two more spaces unless given): deeper than the line it
    continues, where the terminal's own wrap put it at the edge, under nothing."""
    lines: list[Line] = []
    line: Line = []
    used = 0
    for group in groups:
        size = max(sum(len(text) for text, _ in group), getattr(group, "room", 0))
        if line and used + len(GAP) + size > width:
            lines.append(line)
            line, used = [(indent, "")], len(indent)
        elif line:
            line.append((GAP, ""))
            used += len(GAP)
        line += group
        used += size
    if line:
        lines.append(line)
    return fit(lines, width, indent + GAP if hang is None else hang)


def fit(lines: list[Line], width: int, indent: str) -> list[Line]:
    """Lines no wider than ``width``: one longer (a reply or reason :func:`pack` could not
    split, being one group) breaks between words, its styles kept, and goes on under
    ``indent``, instead of the terminal wrapping it at the edge into the next column."""
    out: list[Line] = []
    for line in lines:
        if sum(len(text) for text, _ in line) <= width:
            out.append(line)
            continue
        current: Line = []
        used = 0
        for text, style in line:
            for word in _WORD.findall(text):
                if used + len(word.rstrip()) > width and used > len(indent):
                    last_text, last_style = current[-1]
                    current[-1] = (last_text.rstrip(), last_style)
                    out.append(current)
                    current, used = [(indent, "")], len(indent)
                    word = word.lstrip()
                while len(word.rstrip()) > width - used:  # longer than a line: cut it
                    cut = max(1, width - used)
                    current.append((word[:cut], style))
                    out.append(current)
                    current, used = [(indent, "")], len(indent)
                    word = word[cut:]
                current.append((word, style))
                used += len(word)
        out.append(current)
    return out
