"""The ``exit status:`` section that ends every ``--help``, in one format.

::

    exit status (the first that applies):
      3    a critical condition in what answered (…)
      1    some node or engine did not answer (…, wrapped under the meaning)

A heading (with an optional qualifier in parentheses), then one row per status: the code in
a column five wide after two spaces, its meaning beside it, wrapped under itself. Scripts and
readers find every command's statuses in the same place and shape
(``tests/test_cli_interrupt.py`` holds each ``--help`` to it).
"""

from __future__ import annotations

import textwrap

WIDTH = 95
"""Columns the section wraps at (the width the other help paragraphs are written to)."""

CODE_COLUMN = 7
"""Where each status's meaning starts: two spaces, the code, padding to this column."""


def exit_status(rows: list[tuple[int, str]], qualifier: str = "") -> str:
    """The section for ``rows`` (status, meaning), in the order given; ``qualifier`` goes in
    parentheses after the heading (``the first that applies``). Ends with a newline."""
    head = f"exit status ({qualifier}):" if qualifier else "exit status:"
    lines = [head]
    for code, meaning in rows:
        lead = f"  {code:<{CODE_COLUMN - 2}}"
        lines += textwrap.wrap(
            meaning,
            WIDTH,
            initial_indent=lead,
            subsequent_indent=" " * CODE_COLUMN,
            break_on_hyphens=False,
            break_long_words=False,
        )
    return "\n".join(lines) + "\n"
