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

Only samples whose library name is in ``accept`` have their labels parsed; the others are
only matched. Pure and Textual-free; bounded by :class:`ParseBounds` (series, labels, CPU).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client.validation import get_legacy_validation

Raw = tuple[str, dict[str, str], float]
"""One sample as the library names it: sample name, labels, value."""


@dataclass(frozen=True, slots=True)
class ParseBounds:
    """Limits on one page's parse; a page over one is refused with the reason (never cut).

    ``max_series``: samples sparktop reads (one series each); ``max_labels``: labels on one
    line; ``max_cpu_s``: CPU seconds the parsing thread may spend on one page;
    ``max_fallback_lines``: lines the (slower, pure-Python) library parser is given.
    """

    max_series: int = 10_000
    max_labels: int = 128
    max_cpu_s: float = 2.0
    max_fallback_lines: int = 100_000


class NotUnderstood(Exception):
    """A line outside the fast subset: the library must read this page."""


class PageRefused(Exception):
    """A page over one of the :class:`ParseBounds`; the message says which and by how much."""


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL_NAME = r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*"  # "__…" is reserved (the library refuses it)
_LABEL_VALUE = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_LABEL = _LABEL_NAME + "=" + _LABEL_VALUE
_LABELS = rf"\{{(?:{_LABEL}(?:,{_LABEL})*,?)?\}}"
_VALUE = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN"
_REST = rf"[ \t]+({_VALUE})(?:[ \t]+-?[0-9]+)?"
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
LABEL_PAIR = re.compile(rf"({_LABEL_NAME})=({_LABEL_VALUE})")
_ESCAPE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_SUFFIXES = {
    "summary": ("_count", "_sum", ""),
    "histogram": ("_count", "_sum", "_bucket"),
}
CHECK_EVERY = 2048
"""Lines between two looks at the CPU clock (and at the series bound)."""
LONG_LINE = 4096
"""Lines longer than this have their labels counted before they are matched."""
_LEADING_NAME = re.compile(rf'[ \t]*\{{?"?({_NAME})')


def _count_wanted(lines: list[str], wanted: Callable[[str], bool]) -> int:
    """Sample lines whose name is wanted (for the message of a page already refused)."""
    count = 0
    for line in lines:
        match = _LEADING_NAME.match(line)
        count += match is not None and wanted(match.group(1))
    return count


def unescape(text: str) -> str:
    """A label value's text between its quotes → the value (``\\\\``, ``\\n``, ``\\"``)."""
    return _ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], text) if "\\" in text else text


def cpu_guard(bounds: ParseBounds) -> Callable[[], None]:
    """A callable that raises :class:`PageRefused` once this thread has spent the budget."""
    start = time.thread_time()

    def check() -> None:
        spent = time.thread_time() - start
        if spent > bounds.max_cpu_s:
            raise PageRefused(f"parsing took over {bounds.max_cpu_s:g} s of CPU; page refused")

    return check


class _Labels:
    """Label blocks (``{…}``) checked and parsed once per page: they repeat on most lines.

    Every block is checked (a repeated label name or one over the label bound), wanted or
    not: the library refuses the page for a bad one anywhere.
    """

    MAX_CACHED = 50_000

    def __init__(self, max_labels: int) -> None:
        self.max_labels = max_labels
        self.cache: dict[str, dict[str, str]] = {}

    def parse(self, block: str, line_no: int) -> dict[str, str]:
        labels = self.cache.get(block)
        if labels is None:
            pairs = LABEL_PAIR.findall(block)
            if len(pairs) > self.max_labels:
                raise PageRefused(
                    f"line {line_no} has {len(pairs):,} labels; limit {self.max_labels:,}"
                )
            labels = {name: value for name, value in pairs}
            if len(labels) != len(pairs):  # a repeated label name: the library refuses it
                raise NotUnderstood(line_no)
            if len(self.cache) >= self.MAX_CACHED:
                self.cache.clear()
            self.cache[block] = labels
        return labels

    def read(self, block: str, line_no: int) -> dict[str, str]:
        """The labels of ``block``, unescaped (a new dict)."""
        return {k: unescape(v[1:-1]) for k, v in self.parse(block, line_no).items()}


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
    """
    if get_legacy_validation():  # the library was told to check names its stricter way
        raise NotUnderstood(0)
    out: list[Raw] = []
    decls: list[Declaration] = []
    labels = _Labels(bounds.max_labels)
    check = cpu_guard(bounds)
    series = 0
    family = ""
    typ = "untyped"
    allowed: tuple[str, ...] = ()
    pending: list[tuple[str, str, str, int]] = []  # raw name, label block, value, line

    def wanted(name: str) -> bool:
        return accept is None or name in accept or name + "_total" in accept

    def emit(name: str, block: str, value: str, line_no: int) -> None:
        nonlocal series
        if accept is not None and name not in accept:
            return
        series += 1
        if series > bounds.max_series:
            return  # counted on, so the refusal can say how many there are
        number = float(value)
        if not number and value.lstrip("+-").isdigit():
            number = 0.0  # the library reads "-0" through int(): no sign
        out.append((name, labels.read(block, line_no) if block else {}, number))

    def flush() -> None:
        if not family:
            return
        rename = typ == "counter" and not family.endswith("_total")
        if typ == "counter" and family == "_total":
            raise NotUnderstood(0)  # the library's family name would be empty
        for raw, block, value, line_no in pending:
            emit(raw + "_total" if rename else raw, block, value, line_no)
        pending.clear()

    lines = text.split("\n")
    for line_no, raw_line in enumerate(lines, 1):
        if line_no % CHECK_EVERY == 0:
            check()
            if series + len(pending) > bounds.max_series:  # refused: count what is left
                series += len(pending) + _count_wanted(lines[line_no - 1 :], wanted)
                pending.clear()
                break
        line = raw_line.strip()
        if not line:
            continue
        if len(line) > LONG_LINE and line.count("=") > bounds.max_labels:
            count = len(LABEL_PAIR.findall(line))  # before any full match of a huge line
            if count > bounds.max_labels:
                raise PageRefused(
                    f"line {line_no} has {count:,} labels; limit {bounds.max_labels:,}"
                )
        if line[0] == "#":
            decl = DECLARATION.fullmatch(line)
            if decl is None:
                if OTHER_COMMENT.fullmatch(line) is None:
                    raise NotUnderstood(line_no)
                continue
            kind, name, rest = decl.groups()
            decls.append((kind, name, rest or ""))
            if kind == "HELP":
                if name != family:
                    flush()
                    family, typ, allowed = name, "untyped", (name,)
                continue
            if rest is None or KNOWN_TYPE.fullmatch(rest) is None:
                raise NotUnderstood(line_no)
            if name != family:
                flush()
                family = name
            typ = rest
            allowed = tuple(family + s for s in _SUFFIXES.get(typ, ("",)))
            continue
        match = SAMPLE.fullmatch(line) or QUOTED_SAMPLE.fullmatch(line)
        if match is None:
            raise NotUnderstood(line_no)
        name, block, value = match.group(1), match.group(2) or "", match.group(3)
        if block:
            labels.parse(block, line_no)
        if name not in allowed:
            flush()
            family, typ, allowed = "", "untyped", ()
            if wanted(name):
                emit(name, block, value, line_no)
        elif wanted(name):
            pending.append((name, block, value, line_no))
    flush()
    if series > bounds.max_series:
        raise PageRefused(f"page has {series:,} series; limit {bounds.max_series:,}")
    return out, decls
