"""Tables that fit a terminal by leaving out whole columns, never by clipping values to ``…``.

Each :class:`Col` has a priority: 0 is always shown, higher numbers are left out first when
the table is wider than the console. Columns are tried most important first and a column
that does not fit is skipped (a narrower, less important one may still fit after it); the
columns left out are named in a note under the table. Values are never shortened: a column
is either shown whole, or (``wrap=True``, for words such as a state) wrapped at spaces.

Tables are borderless (``box=None``) with two spaces between columns, like ``kubectl get``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

GAP = 2
"""Spaces between two columns (padding 1 on each side, none at the table's edges)."""


@dataclass(frozen=True, slots=True)
class Col:
    """One column: header (``\\n`` for a two-line header), priority (0 = always shown,
    higher = left out sooner), justification, and whether its cells may wrap at spaces."""

    header: str
    priority: int = 0
    justify: Literal["left", "right"] = "right"
    wrap: bool = False


@dataclass(frozen=True, slots=True)
class Fitted:
    """A table built to fit: ``hidden`` names the columns left out (one-line headers) and
    ``needed`` is the width, in cells, the table would take with every column."""

    table: Table
    hidden: tuple[str, ...]
    needed: int


def text_width(value: str | Text, wrap: bool = False) -> int:
    """Cells ``value`` needs: its longest line, or its longest word when it may wrap."""
    plain = value.plain if isinstance(value, Text) else value
    lines = plain.split("\n")
    if wrap:
        return max((cell_len(word) for line in lines for word in line.split()), default=0)
    return max(cell_len(line) for line in lines)


def _widths(cols: Sequence[Col], rows: Sequence[Sequence[Text]], wrap: bool) -> list[int]:
    return [
        max(
            text_width(col.header, wrap and col.wrap),
            max((text_width(row[i], wrap and col.wrap) for row in rows), default=0),
        )
        for i, col in enumerate(cols)
    ]


def total_width(widths: Sequence[int]) -> int:
    """Cells a borderless table with these column widths takes."""
    return sum(widths) + GAP * max(0, len(widths) - 1)


def choose(cols: Sequence[Col], rows: Sequence[Sequence[Text]], width: int) -> list[int]:
    """Indices (in display order) of the columns that fit in ``width`` cells, by priority."""
    least = _widths(cols, rows, wrap=True)
    kept: list[int] = []
    used = 0
    for i in sorted(range(len(cols)), key=lambda i: (cols[i].priority, i)):
        extra = least[i] + (GAP if kept else 0)
        if cols[i].priority == 0 or used + extra <= width:
            kept.append(i)
            used += extra
    return sorted(kept)


def fit_table(
    cols: Sequence[Col], rows: Sequence[Sequence[Text]], width: int, title: str = ""
) -> Fitted:
    """A borderless table of ``rows`` (one :class:`Text` per column) within ``width`` cells."""
    keep = choose(cols, rows, width)
    table = Table(
        title=title or None,
        title_justify="left",
        box=None,
        pad_edge=False,
        padding=(0, 1),
        header_style="bold",
        expand=False,
    )
    for i in keep:
        col = cols[i]
        # Only a column that must stay (priority 0) or may wrap can be narrowed, and then it
        # folds: a console narrower than the must-stay columns still shows every character.
        bendable = col.wrap or col.priority == 0
        table.add_column(
            col.header,
            justify=col.justify,
            no_wrap=not bendable,
            overflow="fold" if bendable else "ellipsis",
        )
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    hidden = tuple(cols[i].header.replace("\n", " ") for i in range(len(cols)) if i not in keep)
    return Fitted(table, hidden, total_width(_widths(cols, rows, wrap=False)))


def hidden_note(fitted: Sequence[Fitted], width: int) -> Text | None:
    """``not shown at 80 columns: memory (94 needed; widen the terminal or use --json)``."""
    hidden = [name for f in fitted for name in f.hidden]
    if not hidden:
        return None
    needed = max(f.needed for f in fitted)
    return Text(
        f"not shown at {width} columns: {', '.join(dict.fromkeys(hidden))} "
        f"({needed} needed; widen the terminal or use --json)",
        style="dim",
    )
