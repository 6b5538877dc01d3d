"""Prometheus ``/metrics`` text → normalised samples (pure, Textual-free, no I/O).

Sample lines are parsed by ``prometheus_client.parser`` (text format 0.0.4; OpenMetrics bodies
parse too: ``# EOF`` is a comment and ``vllm_``-prefixed sample names are normalised). Names
are normalised ``vllm_`` → ``vllm:`` and ``sglang_`` → ``sglang:``; ``*_created`` samples are
dropped. Samples are flattened by *sample* name (``…_bucket``, ``…_sum``, ``…_total``), so a
family whose ``# TYPE`` line does not match its sample names (OpenMetrics counters) still reads.

A page of several thousand lines is mostly families sparktop never shows; callers pass the
sample names they want, and only those lines reach the (pure-Python) parser.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Set
from dataclasses import dataclass, field
from types import MappingProxyType

from prometheus_client.parser import text_string_to_metric_families

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


@dataclass(frozen=True, slots=True)
class PromSample:
    """One sample line: normalised sample name, labels, value (may be NaN or ±Inf)."""

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
    their declared type. ``bad_lines`` counts sample lines the parser rejected (they are
    skipped, the rest of the page still reads); ``first_error`` describes the first one.
    ``duplicates`` counts samples that repeat a series already read (same name and labels):
    they are left out, never summed (data-parallel ranks differ by their ``engine`` label).
    """

    samples: Mapping[str, tuple[PromSample, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    declared: frozenset[str] = frozenset()
    types: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    bad_lines: int = 0
    first_error: str = ""
    duplicates: int = 0

    def get(self, name: str) -> tuple[PromSample, ...]:
        """Every sample with this normalised sample name (empty when absent)."""
        return self.samples.get(name, ())

    @property
    def sample_count(self) -> int:
        return sum(len(v) for v in self.samples.values())


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=[ \t{])")
_QUOTED_NAME = re.compile(r'\{[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*[,}]')
_DECL = re.compile(r'#[ \t]+(HELP|TYPE)[ \t]+("(?:[^"\\]|\\.)*"|\S+)(?:[ \t]+(.*))?')
_UNESCAPE = re.compile(r'\\[\\n"]')


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda m: {"\\\\": "\\", "\\n": "\n", '\\"': '"'}[m.group(0)], text)


def _sample_name(line: str) -> str | None:
    """The sample name a line starts with (also a Prometheus 3 quoted ``{"name",…}``), or
    None when it cannot be told cheaply (the line then goes to the parser, which decides)."""
    match = _NAME.match(line)
    if match:
        return match.group(0)
    quoted = _QUOTED_NAME.match(line)
    return _unescape(quoted.group(1)) if quoted else None


def _declared_name(line: str) -> tuple[str, str] | None:
    """``# TYPE name type`` / ``# HELP name text`` → (normalised name, type or "")."""
    match = _DECL.match(line)
    if match is None:
        return None
    kind, name, rest = match.groups()
    if name.startswith('"'):
        name = _unescape(name[1:-1])
    return normalise(name), (rest or "").strip() if kind == "TYPE" else ""


def _parse_lines(lines: list[str]) -> Iterable[tuple[str, dict[str, str], float]]:
    for family in text_string_to_metric_families("\n".join(lines) + "\n"):
        for s in family.samples:
            yield s.name, s.labels, float(s.value)


def parse_page(
    text: str,
    wanted: Collection[str] | None = None,
    drop: Callable[[Set[str]], Set[str]] | None = None,
) -> PromPage:
    """Parse an exposition page into a :class:`PromPage`.

    ``wanted``: normalised sample names to keep (e.g. ``vllm:prompt_tokens_total``,
    ``vllm:time_to_first_token_seconds_bucket``); None keeps every sample. ``drop`` is given
    the wanted names present on the page and returns those not worth parsing (an old alias
    when its new name is there). A line the parser rejects is skipped and counted; NaN/Inf
    values are kept (the reader decides what they mean). Never raises on page content.
    """
    by_name: dict[str, list[str]] = {}
    declared: set[str] = set()
    types: dict[str, str] = {}
    # Both spellings of every wanted name, so most lines are rejected before normalising.
    accept = None if wanted is None else frozenset(spellings(wanted))
    unknown: list[str] = []  # lines whose name is not plain: the parser decides
    # Lines end at LF only: CR, VT, FF, U+0085, U+2028… are ordinary characters inside a
    # label value (only backslash, quote and LF are escaped), as the parser reads them.
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line[0] == "#":
            decl = _declared_name(line)
            if decl is not None:
                declared.add(decl[0])
                if decl[1]:
                    types[decl[0]] = decl[1]
            continue
        name = _sample_name(line)
        if name is None:
            unknown.append(line)
            continue
        if accept is not None and name not in accept:
            continue
        name = normalise(name)
        if not name.endswith("_created"):
            by_name.setdefault(name, []).append(line)
    dropped = drop(by_name.keys()) if drop else frozenset()
    for name in dropped:
        by_name.pop(name, None)
    keep = [line for lines in by_name.values() for line in lines] + unknown

    bad = 0
    first_error = ""
    try:
        parsed = list(_parse_lines(keep))
    except Exception:  # one bad line: parse line by line and skip what fails
        parsed = []
        for line in keep:
            try:
                parsed.extend(_parse_lines([line]))
            except Exception as exc:
                bad += 1
                if not first_error:
                    first_error = f"unreadable line {line[:80]!r}: {exc}"

    grouped: dict[str, list[PromSample]] = {}
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    duplicates = 0
    for name, labels, value in parsed:
        norm = normalise(name)
        if norm.endswith("_created") or norm in dropped:
            continue
        if wanted is not None and norm not in wanted:
            continue
        key = (norm, frozenset(labels.items()))
        if key in seen:  # the same series again: Prometheus keeps the first, so do we
            duplicates += 1
            continue
        seen.add(key)
        grouped.setdefault(norm, []).append(PromSample(norm, labels, value))
    if drop and unknown:  # an old alias seen only on a line the parser had to read
        for name in drop(grouped.keys()):
            grouped.pop(name, None)
    return PromPage(
        samples=MappingProxyType({k: tuple(v) for k, v in grouped.items()}),
        declared=frozenset(declared),
        types=MappingProxyType(types),
        bad_lines=bad,
        first_error=first_error,
        duplicates=duplicates,
    )


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
