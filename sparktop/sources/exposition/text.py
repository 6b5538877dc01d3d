"""The fast reader of the Prometheus text format (0.0.4): the plain lines every exporter writes.

It reads a page exactly as ``prometheus_client.parser.text_string_to_metric_families`` does,
or not at all: every line must match a strict subset of what that parser accepts (a legacy
metric name or a quoted ``{"name",…}`` one, ``name="value"`` labels without blanks, one value,
an optional integer timestamp; ``# HELP``/``# TYPE`` with a legacy name and a known type; other
comments), and any other line makes :func:`scan_text` raise :class:`NotUnderstood` so the
caller hands the whole page to the library, which decides. Within the subset it follows the
library's families as well: a ``counter`` family whose name lacks ``_total`` names its samples
``…_total``, and a sample that does not belong to the current family ends it. The equivalence
is checked by a differential test against the library (tests/test_prom_differential.py).

Within a family, a run of *plain* lines (a legacy name, labels without escapes, one space
before the value: what exporters write) is read by one regular-expression call, each distinct
label block checked once (and remembered across pages); that yields what reading the lines
one at a time does (tests/test_prom_runs.py), and any other line is read alone. Only samples
whose library name is in ``accept`` are kept. Pure and Textual-free; bounded by
:class:`ParseBounds` (series, labels, CPU).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from types import MappingProxyType

from sparktop.sources.exposition.grammar import LABEL_NAME as _LABEL_NAME
from sparktop.sources.exposition.grammar import LABEL_VALUE
from sparktop.sources.exposition.grammar import NAME as _NAME
from sparktop.sources.exposition.grammar import VALUE as _VALUE
from sparktop.sources.exposition.runs import (
    MAX_RUN_LINES,
    Row,
    line_end,
    number,
    plain_run,
    read_run,
    stretch_end,
)
from sparktop.sources.exposition.tables import (
    _PASSED,
    _VALUES,
    LABEL_PAIR,
    MAX_BLOCKS,
    MAX_VALUES,
    _drop_full_tables,
    _page_runs,
    _page_values,
    _read_block,
)

Raw = tuple[str, Mapping[str, str], float]
"""One sample as the library names it: sample name, labels, value. The fast reader's labels
are read-only and shared by the samples (and pages) with the same label block."""
NO_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ParseBounds:
    """Limits on one page's parse; a page over one is refused with the reason (never cut).

    ``max_series``: samples sparktop reads (one series each); ``max_labels``: labels on one
    line; ``max_label_value``: characters in one label value, on any line (Prometheus's
    ``label_value_length_limit``, which fails the scrape too; vLLM's ``lora_requests_info``
    lists adapters in one value: 200 pass 4,096); ``max_cpu_s``: CPU seconds spent on
    one page; ``max_fallback_lines``: lines the (slower, pure-Python) library parser is given.
    """

    max_series: int = 10_000
    max_labels: int = 128
    max_label_value: int = 65_536
    max_cpu_s: float = 2.0
    max_fallback_lines: int = 100_000


class NotUnderstood(Exception):
    """A line outside the fast subset: the library must read this page."""


class PageRefused(Exception):
    """A page over one of the :class:`ParseBounds`; the message says which and by how much."""


_LABEL = _LABEL_NAME + "=" + LABEL_VALUE
_LABELS = rf"\{{(?:{_LABEL}(?:,{_LABEL})*,?)?\}}"
_REST = rf"[ \t]+({_VALUE})([ \t]+-?[0-9]+)?"
SAMPLE = re.compile(rf"({_NAME})({_LABELS})?{_REST}")
QUOTED_SAMPLE = re.compile(rf'\{{"([^"\\]+)"((?:,{_LABEL})*,?\}}){_REST}')
TYPES = "counter|gauge|histogram|summary|untyped|unknown|info|stateset|gaugehistogram"
DECLARATION = re.compile(rf"#[ \t]+(HELP|TYPE)[ \t]+({_NAME})(?:[ \t]+(.*))?")
KNOWN_TYPE = re.compile(TYPES)
# A comment the library ignores: "#" alone, or "#", blanks, and a first word that is not
# HELP or TYPE (no quotes before it ends: quotes change how the library splits words).
OTHER_COMMENT = re.compile(
    r'#(?:[ \t]+(?!(?:HELP|TYPE)(?:[ \t]|$))[^ \t"\r\x0b\x0c]+(?:[ \t].*)?)?'
)
_SUFFIXES = {
    "summary": ("_count", "_sum", ""),
    "histogram": ("_count", "_sum", "_bucket"),
}
CHECK_EVERY = MAX_RUN_LINES
"""Lines between two looks at the CPU clock (and at the series bound); runs end there."""
LONG_LINE = 4096
"""Lines longer than this have their labels counted before they are matched."""
_LEADING_NAME = re.compile(rf'^[ \t]*\{{?"?({_NAME})', re.MULTILINE)


def _count_wanted(text: str, pos: int, wanted: Callable[[str], bool]) -> int:
    """Sample lines from ``pos`` on whose name is wanted (for the message of a page already
    refused: one match per line, as each line's leading name)."""
    names = Counter(_LEADING_NAME.findall(text, pos))
    return sum(count for name, count in names.items() if wanted(name))


def check_long_line(text: str, start: int, end: int, line_no: int, bounds: ParseBounds) -> None:
    """The line ``text[start:end]``, longer than :data:`LONG_LINE` or the label value bound,
    checked before it is copied or read: raises :class:`PageRefused` for more labels than
    ``bounds.max_labels`` or a value longer than ``bounds.max_label_value``."""
    if text.count("=", start, end) <= bounds.max_labels and text.count('"', start, end) < 2:
        return
    count = 0
    for pair in LABEL_PAIR.finditer(text, start, end):
        count += 1
        chars = pair.end(2) - pair.start(2) - 2
        if chars > bounds.max_label_value:
            raise PageRefused(
                f"line {line_no}: label {pair.group(1)} has a value of {chars:,} characters; "
                f"limit {bounds.max_label_value:,}"
            )
    if count > bounds.max_labels:
        raise PageRefused(f"line {line_no} has {count:,} labels; limit {bounds.max_labels:,}")


def cpu_guard(bounds: ParseBounds) -> Callable[[], None]:
    """A callable that raises :class:`PageRefused` once this thread has spent the budget."""
    start = time.thread_time()

    def check() -> None:
        spent = time.thread_time() - start
        if spent > bounds.max_cpu_s:
            raise PageRefused(f"parsing took over {bounds.max_cpu_s:g} s of CPU; page refused")

    return check


class _Labels:
    """Label blocks (``{…}``) checked once: they repeat on most lines, and from page to page.

    Every block is checked (a repeated label name or one over the label bound), wanted or
    not: the library refuses the page for a bad one anywhere. ``cache`` holds the blocks
    that passed (this page's and the earlier pages', :data:`_PASSED`).
    """

    def __init__(self, max_labels: int) -> None:
        self.max_labels = max_labels
        cache = _PASSED.get(max_labels)
        if cache is None or len(cache) >= MAX_BLOCKS:
            if len(_PASSED) >= 8:  # bounds other than the default: tests, a few at most
                _PASSED.clear()
            cache = _PASSED[max_labels] = {"": NO_LABELS}
        self.cache = cache

    def parse(self, block: str, line_no: int) -> Mapping[str, str]:
        """The labels of ``block`` (on line ``line_no``), unescaped, read-only and shared.
        Raises :class:`PageRefused` over the label bound, :class:`NotUnderstood` for a
        repeated label name."""
        labels = self.cache.get(block)
        if labels is None:
            count, labels, _plain = _read_block(block, self.max_labels)
            if count > self.max_labels:
                raise PageRefused(f"line {line_no} has {count:,} labels; limit {self.max_labels:,}")
            if labels is None:  # a repeated label name: the library refuses it
                raise NotUnderstood(line_no)
            self.cache[block] = labels
        return labels

    def plain(self, block: str) -> bool:
        """True for a plain block the page may have (then in ``cache``); False for any other,
        which the line reader meets again and, if the page may not have it, says so."""
        count, labels, plain = _read_block(block, self.max_labels)
        if not plain or labels is None or count > self.max_labels:
            return False
        self.cache[block] = labels
        return True


Declaration = tuple[str, str, str]
"""``("HELP" | "TYPE", metric name, the rest of the line)``."""


def scan_text(
    text: str, accept: frozenset[str] | None, bounds: ParseBounds
) -> tuple[list[Raw], list[Declaration]]:
    """Every sample of ``text`` whose library name is in ``accept`` (None: all), in page
    order, as ``text_string_to_metric_families`` would yield them; and every ``# HELP`` /
    ``# TYPE`` line.

    Raises :class:`NotUnderstood` at the first line outside the fast subset (nothing is
    returned: the library reads the page), :class:`PageRefused` over a bound.

    Memory: the shared block and value tables grow with the page's distinct label blocks
    and values (a 25 MiB page of 546,000 distinct series: ~190 MB before its CPU budget
    runs out); a table past its cap is dropped when the page ends, read or refused, so what
    stays between scrapes is at most :data:`MAX_BLOCKS` blocks and :data:`MAX_VALUES` values.
    """
    try:
        return _scan_text(text, accept, bounds)
    finally:
        _drop_full_tables(bounds.max_labels)


def _trim_tables(
    labels: _Labels, numbers: dict[str, float], pending: list[Row]
) -> dict[str, float]:
    """Mid-page, tables grown past twice their caps (a page of distinct series) cut to what the
    queued rows still look up, so the page's peak memory stays bounded instead of one entry a
    line; the next page starts with fresh shared tables. Returns the page's new value table
    (its block table is replaced in ``labels``)."""
    cache = {"": NO_LABELS}
    cache.update((b, labels.cache[b]) for b in {row[1] for row in pending} if b in labels.cache)
    labels.cache = cache
    _PASSED[labels.max_labels] = {"": NO_LABELS}
    _VALUES[0] = {}
    return {v: numbers[v] for v in {row[2] for row in pending} if v in numbers}


def _legacy_validation() -> bool:
    """prometheus_client's name-validation setting, without loading the library for it: its
    environment variable until the library is loaded, then its own (a program may change it)."""
    library = sys.modules.get("prometheus_client.validation")
    if library is not None:
        return bool(library.get_legacy_validation())
    setting = os.environ.get("PROMETHEUS_LEGACY_NAME_VALIDATION", "False")
    return setting.lower() in ("true", "1", "t")


def _scan_text(
    text: str, accept: frozenset[str] | None, bounds: ParseBounds
) -> tuple[list[Raw], list[Declaration]]:
    if _legacy_validation():  # the library was told to check names its stricter way
        raise NotUnderstood(0)
    out: list[Raw] = []
    decls: list[Declaration] = []
    labels = _Labels(bounds.max_labels)
    check = cpu_guard(bounds)
    series = 0
    family = ""
    typ = "untyped"
    allowed: tuple[str, ...] = ()
    members: frozenset[str] = frozenset()  # ``allowed`` as a set, for a run's names
    careful = False  # this family has a line that is not plain: runs are found the slow way
    taking: frozenset[str] = frozenset()  # the wanted names in ``members``
    pending: list[Row] = []  # the current family's wanted samples (blocks and values read)
    numbers = _page_values()  # value text → value, every queued row's value in it
    runs = _page_runs(bounds.max_labels)

    def wanted(name: str) -> bool:
        return accept is None or name in accept or name + "_total" in accept

    def emit(rows: list[Row], rename: bool) -> None:
        """Queued rows out as samples (every block and value was read before a row was
        queued), a whole family at a time: one lookup per row and column, no Python loop."""
        nonlocal series
        if not rows:
            return
        raw_names = dict.fromkeys(map(itemgetter(0), rows))
        names = {raw: raw + "_total" if rename else raw for raw in raw_names}
        if accept is not None and not accept.issuperset(names.values()):
            names = {raw: name for raw, name in names.items() if name in accept}
            rows = [row for row in rows if row[0] in names]
        room = bounds.max_series - series
        series += len(rows)  # counted on past the bound, so the refusal can say how many
        if len(rows) > room:
            rows = rows[: max(room, 0)]
        if not rows:
            return
        raws, blocks, values = zip(*rows, strict=True)
        column = map(names.__getitem__, raws) if rename else raws
        out.extend(
            zip(
                column,
                map(labels.cache.__getitem__, blocks),
                map(numbers.__getitem__, values),
                strict=True,
            )
        )

    def flush() -> None:
        if not family:
            return
        if typ == "counter" and family == "_total":
            raise NotUnderstood(0)  # the library's family name would be empty
        emit(pending, typ == "counter" and not family.endswith("_total"))
        pending.clear()

    def start(name: str, kind: str, names: tuple[str, ...]) -> None:
        nonlocal family, typ, allowed, members, careful, taking
        family, typ, allowed, members, careful = name, kind, names, frozenset(names), False
        taking = frozenset(filter(wanted, names))

    def take_run(pos: int, line_no: int) -> tuple[int, int]:
        """Plain lines of the current family from ``pos``: (lines taken, position after)."""
        room = CHECK_EVERY - line_no % CHECK_EVERY  # a run ends where the clock is looked at
        if careful or taking:
            return read_plain(pos, room)
        end = stretch_end(text, pos)  # a family nothing is read from: checked, or known
        lines = text.count("\n", pos, end) if end > pos else 0
        if not 0 < lines <= room:
            return read_plain(pos, room)
        key = (members, text[pos:end])
        if key in runs:
            return lines, end
        taken, after = read_plain(pos, room)
        if taken == lines:
            runs.add(key)
        return taken, after

    def read_plain(pos: int, room: int) -> tuple[int, int]:
        """:func:`take_run` by matching the lines."""
        nonlocal careful
        rows, end = plain_run(text, pos, room, careful)
        if rows is None:
            careful = True
            rows, end = plain_run(text, pos, room, careful)
        if not rows:
            return 0, pos
        taken = read_run(rows, members, labels.plain, labels.cache, numbers)
        if taken < len(rows):  # the line after them is read alone (it may end the family)
            careful = True
            rows, end = rows[:taken], line_end(text, pos, taken)
        if taking:
            pending.extend(
                rows if len(taking) == len(members) else [r for r in rows if r[0] in taking]
            )
        return taken, end

    last_line = text.count("\n") + 1
    longest = min(LONG_LINE, bounds.max_label_value)
    pos = 0
    line_no = 1
    while line_no <= last_line:
        if line_no % CHECK_EVERY == 0:
            check()
            if series + len(pending) > bounds.max_series:  # refused: count what is left
                series += len(pending) + _count_wanted(text, pos, wanted)
                pending.clear()
                break
            if len(labels.cache) > 2 * MAX_BLOCKS or len(numbers) > 2 * MAX_VALUES:
                numbers = _trim_tables(labels, numbers, pending)
        if allowed and text[pos : pos + 1] not in ("#", ""):
            taken, after = take_run(pos, line_no)
            if taken:
                line_no, pos = line_no + taken, after
                continue
        stop = text.find("\n", pos)
        stop = len(text) if stop < 0 else stop
        if stop - pos > longest:
            check_long_line(text, pos, stop, line_no, bounds)  # before any copy or match
        line = text[pos:stop].strip()
        here, line_no, pos = line_no, line_no + 1, stop + 1
        if not line:
            continue
        if line[0] == "#":
            decl = DECLARATION.fullmatch(line)
            if decl is None:
                if OTHER_COMMENT.fullmatch(line) is None:
                    raise NotUnderstood(here)
                continue
            kind, name, rest = decl.groups()
            decls.append((kind, name, rest or ""))
            if kind == "HELP":
                if name != family:
                    flush()
                    start(name, "untyped", (name,))
                continue
            if rest is None or KNOWN_TYPE.fullmatch(rest) is None:
                raise NotUnderstood(here)
            if name != family:
                flush()
            start(name, rest, tuple(name + s for s in _SUFFIXES.get(rest, ("",))))
            continue
        match = SAMPLE.fullmatch(line) or QUOTED_SAMPLE.fullmatch(line)
        if match is None or match.group(4):  # a timestamp: the newest of a repeated series
            raise NotUnderstood(here)  # counts, which the library's samples carry
        name, block, value = match.group(1), match.group(2) or "", match.group(3)
        if block:
            labels.parse(block, here)
        if value not in numbers:
            numbers[value] = number(value)
        if name not in allowed:
            flush()
            start("", "untyped", ())
            if wanted(name):
                emit([(name, block, value)], False)
        elif wanted(name):
            pending.append((name, block, value))
    flush()
    if series > bounds.max_series:
        raise PageRefused(f"page has {series:,} series; limit {bounds.max_series:,}")
    return out, decls
