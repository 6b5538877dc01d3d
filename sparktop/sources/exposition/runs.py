"""Runs of plain sample lines, read by one regular-expression call per run.

A *plain* line is what exporters write: a legacy name, an optional label block of at most
:data:`MAX_BLOCK_CHARS` whose values hold no ``"``, ``\\``, ``}`` or line break, one space, a
value, then ``\\n`` (a line with a timestamp is not plain: the library reads that page, so
a series repeated with timestamps is its newest sample). The line reader's
``SAMPLE`` (:mod:`sparktop.sources.exposition.text`) matches every plain line with the same three
groups, and ``strip()`` leaves it as it is, so a run of plain lines read at once yields what
reading them one by one does; any other line is read by the line reader
(``tests/test_prom_runs.py`` holds the two to the same samples and refusals).

The line pattern is kept cheap, because it runs over every character of a page: the block is
taken up to its first ``}`` (and checked once per distinct block by :data:`PLAIN_LABELS`), the
value as a run of number characters (checked by ``float()`` once per distinct value text,
which reads exactly the decimal grammar of :data:`~sparktop.sources.exposition.grammar.VALUE` over
those characters, and which the kept samples need anyway). Pure and Textual-free.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from sparktop.sources.exposition.grammar import LABEL_NAME, NAME, VALUE

MAX_BLOCK_CHARS = 512
"""A plain label block's length at most, braces included (a longer one is read by line)."""
MAX_RUN_LINES = 2048
"""Lines one careful match takes at most (the caller cuts a run shorter where it must)."""
WINDOW = 1 << 18
"""Characters looked ahead for the end of a run, so a huge family costs linear time."""

_PLAIN_LABEL = LABEL_NAME + r'="[^"\\\n}]*"'
PLAIN_LABELS = re.compile(rf"\{{(?:{_PLAIN_LABEL}(?:,{_PLAIN_LABEL})*,?)?\}}")
"""A plain label block, checked once per distinct block (blocks repeat from line to line)."""
_BLOCK = rf"\{{[^}}]{{0,{MAX_BLOCK_CHARS - 2}}}\}}"  # one "not }" class: sre's fast loop
_STAMP = r"\n"
PLAIN_LINE = re.compile(rf"^({NAME})({_BLOCK}|) ([0-9.eE+-]+|[+-]?Inf|NaN){_STAMP}", re.MULTILINE)
"""One line, its block and value to be checked as the module says. A block that runs past
its line makes the match cover two lines, which :func:`plain_run` counts as not plain."""
PLAIN_RUN = re.compile(
    rf"(?:{NAME}(?:(?={_BLOCK}){PLAIN_LABELS.pattern})? (?:{VALUE}){_STAMP}){{0,{MAX_RUN_LINES}}}+"
)
"""Consecutive plain lines, fully checked, stopping before the first other line."""

Row = tuple[str, str, str]
"""A plain line as found: sample name, label block (``""`` without one), value text."""


def line_end(text: str, pos: int, lines: int) -> int:
    """The position after ``lines`` more lines from ``pos`` (each ends with ``\\n``)."""
    for _ in range(lines):
        pos = text.find("\n", pos) + 1
    return pos


def stretch_end(text: str, pos: int) -> int:
    """The position after the lines from ``pos`` up to the next line starting with ``#``
    (or the last whole line within :data:`WINDOW`); ``pos`` or less when there is none."""
    limit = pos + WINDOW
    comment = text.find("\n#", pos, limit)
    return comment + 1 if comment >= 0 else text.rfind("\n", pos, limit) + 1


class PassedRuns:
    """Stretches of lines found to be plain lines of a family, by the family's names and
    the stretch's text: whether one is depends on those and the label bound alone.

    For the families sparktop reads nothing from (most of a vLLM page), which must still
    be checked (the library refuses a page for one bad line anywhere) and which an engine
    serves unchanged scrape after scrape (``_created`` samples, idle histograms): such a
    stretch seen before costs a hash of its text, not a match. Two generations of at most
    :data:`MAX_RUN_CHARS` characters each: a stretch read every scrape stays, one that
    changed is dropped within two generations.
    """

    def __init__(self) -> None:
        self.new: dict[tuple[frozenset[str], str], None] = {}
        self.old: dict[tuple[frozenset[str], str], None] = {}
        self.chars = 0

    def __contains__(self, key: tuple[frozenset[str], str]) -> bool:
        if key in self.new:
            return True
        if key in self.old:
            self.add(key)
            return True
        return False

    def add(self, key: tuple[frozenset[str], str]) -> None:
        self.chars += len(key[1])
        if self.chars > MAX_RUN_CHARS:
            self.old, self.new, self.chars = self.new, {}, len(key[1])
        self.new[key] = None


MAX_RUN_CHARS = 1 << 20
"""Characters of stretches :class:`PassedRuns` keeps in a generation (1 Mi: the unread
families of three 8-engine pages; the monitor's memory must stay flat, so at most 2 MB)."""


def plain_run(text: str, pos: int, max_lines: int, careful: bool) -> tuple[list[Row] | None, int]:
    """The plain lines from ``pos`` (a line start) up to the next line starting with ``#``,
    at most ``max_lines``, and the position after them.

    ``(None, pos)`` when a line in that stretch is not plain: asked again ``careful``, the
    plain lines before it (``[]`` when the first is not). ``careful`` reads the lines twice,
    so it is for a family that has shown such a line.
    """
    if careful:
        end = PLAIN_RUN.match(text, pos).end()  # type: ignore[union-attr]  # {0,n} matches ""
        lines = text.count("\n", pos, end)
    else:
        end = stretch_end(text, pos)
        lines = text.count("\n", pos, end) if end > pos else 0
    if lines > max_lines:
        end, lines = line_end(text, pos, max_lines), max_lines
    if not lines:
        return [], pos
    rows: list[Row] = PLAIN_LINE.findall(text, pos, end)
    if len(rows) != lines:  # "^" starts each row at a line start: some line is not one
        return None, pos
    return rows, end


def number(text: str) -> float:
    """A value's text → the value the library reads (raises ValueError for no number)."""
    value = float(text)
    if not value and text.lstrip("+-").isdigit():
        return 0.0  # the library reads "-0" through int(): no sign
    return value


def _numbers(values: Collection[str], numbers: dict[str, float]) -> bool:
    """Read ``values`` into ``numbers`` (value text → :func:`number`); False when one is no
    number."""
    fresh = set(values).difference(numbers)
    try:
        numbers.update(zip(fresh, map(number, fresh), strict=True))
    except ValueError:
        return False
    return True


def read_run(
    rows: list[Row],
    members: frozenset[str],
    plain: Callable[[str], bool],
    known: Collection[str],
    numbers: dict[str, float],
) -> int:
    """How many leading ``rows`` are plain lines of the family: name in ``members``, label
    block in ``known`` or accepted by ``plain``, a value ``float()`` reads (then in
    ``numbers``, which a page's values share: they repeat)."""
    names, blocks, values = zip(*rows, strict=True)
    fresh = set(blocks).difference(known)
    fresh.discard("")
    if members.issuperset(names) and all(map(plain, fresh)) and _numbers(values, numbers):
        return len(rows)
    for i, (name, block, value) in enumerate(rows):  # one is not: the first of them
        if name not in members or not _numbers((value,), numbers):
            return i
        if block and block not in known and not plain(block):
            return i
    return len(rows)  # not reached: the check above failed on one of them
