"""Prometheus ``/metrics`` text → normalised samples (pure, Textual-free, no I/O).

A page reads exactly as prometheus_client reads it: text format 0.0.4 through the fast
reader in :mod:`sparktop.sources.exposition.text` (the same samples as
``prometheus_client.parser``, or it hands the page to that parser), an OpenMetrics body (by
its content type) through ``prometheus_client.openmetrics.parser``. An OpenMetrics-shaped
body served as text still reads (``# EOF`` is a comment there). Names are normalised
``vllm_`` → ``vllm:`` and ``sglang_`` → ``sglang:``; ``*_created`` samples are dropped; a
series repeated on the page is read once. Samples are flattened by *sample* name
(``…_bucket``, ``…_sum``, ``…_total``), so a family whose ``# TYPE`` line does not match its
sample names (OpenMetrics counters) still reads.

A page of several thousand lines is mostly families sparktop never shows; callers pass the
sample names they want, and only those samples have their labels parsed.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass, field, replace
from itertools import groupby
from operator import itemgetter
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from sparktop.safe_text import printable
from sparktop.sources.exposition.tables import unescape
from sparktop.sources.exposition.text import (
    LONG_LINE,
    Declaration,
    NotUnderstood,
    PageRefused,
    ParseBounds,
    Raw,
    check_long_line,
    cpu_guard,
    scan_text,
)

if TYPE_CHECKING:
    from prometheus_client.samples import Sample

DEFAULT_BOUNDS = ParseBounds()

_PREFIXES = (("vllm_", "vllm:"), ("sglang_", "sglang:"))


def normalise(name: str) -> str:
    """``vllm_x`` → ``vllm:x`` and ``sglang_x`` → ``sglang:x``; other names unchanged."""
    for old, new in _PREFIXES:
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def spellings(names: Iterable[str]) -> Iterable[str]:
    """Each normalised name as itself and as the ``vllm_``/``sglang_`` sample spelling."""
    for name in names:
        yield name
        for old, new in _PREFIXES:
            if name.startswith(new):
                yield old + name[len(new) :]


class PromSample(NamedTuple):
    """One sample line: normalised sample name, labels, value (may be NaN or ±Inf).

    A named tuple, not a dataclass: a page makes thousands a scrape, and a tuple is built
    in a third of a frozen dataclass's time."""

    name: str
    labels: Mapping[str, str]
    value: float

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)


@dataclass(frozen=True, slots=True)
class PromPage:
    """A parsed page: samples by normalised sample name, plus what the page declared.

    ``declared`` holds the normalised family names that had a ``# HELP`` or ``# TYPE`` line
    (so "declared but no samples" can be told from "not exported"); ``types`` maps them to
    their declared type. ``error`` says why a page was refused whole (not valid for
    prometheus_client, or over a :class:`~sparktop.sources.exposition.text.ParseBounds` bound); it
    then has no samples. ``parser`` names what read it: ``fast``, ``prometheus_client`` (a
    line outside the fast subset) or ``openmetrics``.
    ``duplicates`` counts samples that repeat a series already read (same name and labels):
    they are left out, never summed (data-parallel ranks differ by their ``engine`` label).
    ``conflicts`` names the series repeated with a *different* value (``vllm:num_requests_running
    {engine="0"}: 3 then 300``): the page keeps the first, as prometheus_client does, and
    :meth:`ambiguous_as_nan` gives the page a reader of figures should use (which value is
    right is unknown).
    """

    samples: Mapping[str, tuple[PromSample, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    declared: frozenset[str] = frozenset()
    types: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    duplicates: int = 0
    conflicts: tuple[str, ...] = ()
    conflict_keys: Mapping[tuple[str, frozenset[tuple[str, str]]], str] = field(
        default_factory=lambda: MappingProxyType({})
    )
    """(normalised name, label items) of each series in ``conflicts`` → its two values
    (``"3 then 300"``), for the reason a reader gives its n/a."""
    error: str = ""
    parser: str = "fast"
    refused: bool = False
    """``error`` is a :class:`~sparktop.sources.exposition.text.ParseBounds` bound (the page is too
    big, not broken: the same page will be refused again)."""

    def ambiguous_as_nan(self) -> PromPage:
        """This page with each conflicting series' value NaN (refused by every reader, so
        shown n/a) instead of the first; the page itself when there is no conflict."""
        if not self.conflict_keys:
            return self
        names = {name for name, _ in self.conflict_keys}
        samples = dict(self.samples)
        for name in names & samples.keys():
            samples[name] = tuple(
                PromSample(s.name, s.labels, math.nan)
                if (name, frozenset(s.labels.items())) in self.conflict_keys
                else s
                for s in samples[name]
            )
        return replace(self, samples=MappingProxyType(samples))

    def get(self, name: str) -> tuple[PromSample, ...]:
        """Every sample with this normalised sample name (empty when absent)."""
        return self.samples.get(name, ())

    @property
    def sample_count(self) -> int:
        return sum(len(v) for v in self.samples.values())


_DECL = re.compile(r'#[ \t]+(HELP|TYPE)[ \t]+("(?:[^"\\]|\\.)*"|[^\s"]+)(?:[ \t]+(.*))?')


def _declared_lines(text: str) -> list[Declaration]:
    """Every ``# HELP``/``# TYPE`` line (names quoted or not), for a page the library reads."""
    out: list[Declaration] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if line[:1] == "#" and (match := _DECL.match(line)):
            kind, name, rest = match.groups()
            out.append((kind, unescape(name[1:-1]) if name[:1] == '"' else name, rest or ""))
    return out


def _declarations(decls: list[Declaration]) -> tuple[frozenset[str], dict[str, str]]:
    """Normalised names with a ``# HELP``/``# TYPE`` line, and the declared types."""
    declared: set[str] = set()
    types: dict[str, str] = {}
    for kind, raw_name, rest in decls:
        name = normalise(raw_name)
        declared.add(name)
        if kind == "TYPE" and rest.strip():
            types[name] = rest.strip()
    return frozenset(declared), types


_REPR_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[ntr\\'\"])")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


def _unrepr(match: re.Match[str]) -> str:
    code = match.group(1)
    if code in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[code]
    return chr(int(code[1:], 16))


class _Lines(io.StringIO):
    """The page as the library reads it (it iterates its file), counting the lines: the line
    it failed on is the last one read."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.number = 0
        self.last = ""

    def __next__(self) -> str:  # type: ignore[override]  # typeshed's _IOBase says bytes
        self.last = super().__next__()
        self.number += 1
        return self.last


CLIP = 40
"""Characters of server text a parse error quotes (then ``…``)."""


def _clip(text: str) -> str:
    return printable(text[:CLIP]) + ("…" if len(text) > CLIP else "")


def _short(exc: BaseException, lines: _Lines) -> str:
    """The library's message with the text it quotes clipped to :data:`CLIP` characters, in
    the product's visible rendering.

    prometheus_client quotes the offending text with ``repr`` (``'\\x1b'``): its escapes are
    turned back into the characters and then shown as every server text is
    (:func:`~sparktop.safe_text.printable`: ESC → ``␛``), in every output alike. A bare
    ``ValueError`` (an invalid name in a ``# HELP`` line) names the line it failed on and
    quotes it. Text
    that is not UTF-8 (undecoded bytes, shown as U+FFFD) is named as such, not quoted: random
    bytes would make the message new at every scrape."""
    text = _REPR_ESCAPE.sub(_unrepr, str(exc))
    line = lines.last.strip()
    if "\ufffd" in text or "\ufffd" in line:
        return "the page is not UTF-8 text (binary data?)"
    if not text:
        return f"line {lines.number:,} refused: {_clip(line)}"
    head, sep, quoted = text.partition(":")
    return f"{head}: {_clip(quoted.strip())}" if sep else _clip(head)


def long_lines(text: str, longest: int) -> Iterator[tuple[int, int, int]]:
    """``(line number, start, end)`` of each line of ``text`` longer than ``longest``."""
    pos, line_no = 0, 1
    while pos <= len(text):
        stop = text.find("\n", pos)
        stop = len(text) if stop < 0 else stop
        if stop - pos > longest:
            yield line_no, pos, stop
        pos, line_no = stop + 1, line_no + 1


def _library(text: str, accept: frozenset[str] | None, bounds: ParseBounds, om: bool) -> list[Raw]:
    """The page through prometheus_client's own parser, within the same bounds."""
    lines = text.count("\n") + 1
    if lines > bounds.max_fallback_lines:
        raise PageRefused(
            f"page has {lines:,} lines the fast reader cannot take; "
            f"limit {bounds.max_fallback_lines:,} for the full parser"
        )
    # The library's label parsing is quadratic in the label count, and it copies every value.
    for line_no, start, end in long_lines(text, min(LONG_LINE, bounds.max_label_value)):
        check_long_line(text, start, end, line_no, bounds)
    # The library (~30 modules with its HTTP server's) loads only for a page the fast reader
    # does not take: a monitor of vLLM servers never needs it.
    from prometheus_client.openmetrics.parser import (
        text_fd_to_metric_families as om_fd_families,
    )
    from prometheus_client.parser import text_fd_to_metric_families as fd_families

    check = cpu_guard(bounds)
    parse = om_fd_families if om else fd_families
    reader = _Lines(text)
    out: list[Raw] = []
    series = 0
    stamped: dict[tuple[str, frozenset[tuple[str, str]]], tuple[int, object]] = {}
    try:
        for family in parse(reader):
            check()
            for s in family.samples:
                if accept is None or s.name in accept:
                    if s.timestamp is not None and _newer_kept(s, out, stamped):
                        continue
                    series += 1
                    if series <= bounds.max_series:
                        out.append((s.name, s.labels, float(s.value)))
    except PageRefused:
        raise
    except Exception as exc:  # the library raises ValueError, KeyError, IndexError…
        what = "OpenMetrics" if om else "Prometheus text"
        why = _short(exc, reader)
        raise PageInvalid(f"page is not valid {what} (prometheus_client: {why})") from None
    if series > bounds.max_series:
        raise PageRefused(f"page has {series:,} series; limit {bounds.max_series:,}")
    return out


def _newer_kept(
    s: Sample,
    out: list[Raw],
    stamped: dict[tuple[str, frozenset[tuple[str, str]]], tuple[int, object]],
) -> bool:
    """For a sample with a timestamp: True when it repeats a series already in ``out``, whose
    value it then replaces if its timestamp is newer (a series's current value is its newest
    sample, as Prometheus ingests them; on a tie the first stays, like the library's own)."""
    key = (s.name, frozenset(s.labels.items()))
    held = stamped.get(key)
    if held is None:
        stamped[key] = (len(out), s.timestamp)
        return False
    index, at = held
    if s.timestamp > at and index < len(out):  # type: ignore[operator]
        out[index] = (s.name, s.labels, float(s.value))
        stamped[key] = (index, s.timestamp)
    return True


_ITEMS: dict[int, tuple[Mapping[str, str], frozenset[tuple[str, str]]]] = {}
"""A label set's items by the identity of its mapping, for the read-only mappings the fast
reader shares between samples and pages (its series key is built once, not every scrape); a
hit is checked to be that very mapping, which the entry keeps alive. Bounded by
:data:`MAX_ITEMS`."""
MAX_ITEMS = 16_384


def _items(labels: Mapping[str, str]) -> tuple[Mapping[str, str], frozenset[tuple[str, str]]]:
    known = (labels, frozenset(labels.items()))
    if isinstance(labels, MappingProxyType):  # a library dict is one sample's, never shared
        if len(_ITEMS) >= MAX_ITEMS:
            _ITEMS.clear()
        _ITEMS[id(labels)] = known
    return known


class PageInvalid(Exception):
    """prometheus_client's parser rejects the page: it is refused whole, as Prometheus does."""


def parse_page(
    text: str,
    wanted: Collection[str] | None = None,
    drop: Callable[[Set[str]], Set[str]] | None = None,
    *,
    openmetrics: bool = False,
    bounds: ParseBounds = DEFAULT_BOUNDS,
) -> PromPage:
    """Parse an exposition page into a :class:`PromPage`; never raises on page content.

    ``wanted``: normalised sample names to keep (e.g. ``vllm:prompt_tokens_total``,
    ``vllm:time_to_first_token_seconds_bucket``); None keeps every sample. ``drop`` is given
    the wanted names present on the page and returns those to leave out (an old alias when
    its new name is there). ``openmetrics``: the body is OpenMetrics (its content type says
    so), read by prometheus_client's OpenMetrics parser; else the text format 0.0.4, read by
    :func:`~sparktop.sources.exposition.text.scan_text` or, for a line outside its subset, by
    ``text_string_to_metric_families``. A page either parser rejects, or over one of
    ``bounds``, has no samples and ``error`` says why. NaN/Inf values are kept (the reader
    decides what they mean). Cost: CPU-bound, up to ``bounds.max_cpu_s``; callers on an
    event loop run it in a thread.
    """
    accept = None if wanted is None else frozenset(spellings(wanted))
    parser = "fast"
    decls: list[Declaration] = []
    try:
        if openmetrics:
            parser = "openmetrics"
            raws = _library(text, accept, bounds, om=True)
        else:
            try:
                raws, decls = scan_text(text, accept, bounds)
            except NotUnderstood:
                parser = "prometheus_client"
                raws = _library(text, accept, bounds, om=False)
        if parser != "fast":
            decls = _declared_lines(text)
    except (PageRefused, PageInvalid) as exc:
        declared, types = _declarations(decls)
        return PromPage(
            declared=declared,
            types=MappingProxyType(types),
            error=str(exc),
            parser=parser,
            refused=isinstance(exc, PageRefused),
        )
    declared, types = _declarations(decls)

    norms: dict[str, str] = {}  # sample name → normalised, "" for one not kept
    for name in set(map(itemgetter(0), raws)):
        norm = normalise(name)
        keep = not norm.endswith("_created") and (wanted is None or norm in wanted)
        norms[name] = norm if keep else ""
    dropped = drop(set(norms.values()) - {""}) if drop else frozenset()
    grouped: dict[str, list[PromSample]] = {}
    seen: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    conflicts: dict[tuple[str, frozenset[tuple[str, str]]], tuple[str, str]] = {}
    duplicates = 0
    make = tuple.__new__  # PromSample(*raw) without the named tuple's Python-level __new__
    for name, run in groupby(raws, itemgetter(0)):  # a name's samples come together
        norm = norms[name]
        if not norm:
            continue
        out = None if norm in dropped else grouped.setdefault(norm, [])
        same = norm == name
        for raw in run:
            labels = raw[1]
            items = _ITEMS.get(id(labels))
            if items is None or items[0] is not labels:
                items = _items(labels)
            key = (norm, items[1])
            if key in seen:  # the same series again: Prometheus keeps the first, so do we
                duplicates += 1
                first_value = seen[key]
                if key not in conflicts and out is not None and _differs(first_value, raw[2]):
                    conflicts[key] = _conflict(norm, labels, first_value, raw[2])
                continue
            seen[key] = raw[2]
            if out is not None:
                out.append(make(PromSample, raw if same else (norm, labels, raw[2])))
    return PromPage(
        samples=MappingProxyType({k: tuple(v) for k, v in grouped.items() if v}),
        declared=declared,
        types=MappingProxyType(types),
        duplicates=duplicates,
        conflicts=tuple(series for series, _ in conflicts.values()),
        conflict_keys=MappingProxyType({k: values for k, (_, values) in conflicts.items()}),
        parser=parser,
    )


def _differs(first: float, other: float) -> bool:
    return first != other and not (math.isnan(first) and math.isnan(other))


def _conflict(name: str, labels: Mapping[str, str], first: float, other: float) -> tuple[str, str]:
    """(``vllm:num_requests_running{engine="0"}: 3 then 300``, ``3 then 300``), label values
    printable."""
    shown = ",".join(f'{k}="{printable(v)[:40]}"' for k, v in sorted(labels.items()))
    values = f"{first:g} then {other:g}"
    return (f"{name}{{{shown}}}: {values}" if shown else f"{name}: {values}"), values


def promql_table_to_text(table: str) -> str:
    """A Prometheus query-result table (``name{labels} | value`` rows) → exposition text.

    This is the shape of the Prometheus UI's table view as pasted into issues; the
    ``-- | --`` separator row is dropped. Used to read fixtures captured that way.
    """
    out = []
    for row in table.splitlines():
        series, sep, value = row.rpartition(" | ")
        if not sep or not series.strip() or series.strip().startswith("--"):
            continue
        out.append(f"{series.strip()} {value.strip()}")
    return "\n".join(out) + "\n"
