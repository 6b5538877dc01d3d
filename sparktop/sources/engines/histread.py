"""One histogram family of a page → a cumulative histogram per rank (pure, Textual-free).

A rank's histogram sums the buckets of every series it has (label sets without ``le``).
Each series must be a cumulative histogram in page order, as Prometheus requires (edges
ascending, counts not falling, a ``+Inf`` bucket); a broken one makes the rank's value NA
saying why, never a re-sorted figure.

A family's buckets are laid out the same way scrape after scrape, and the fast reader shares
their label mappings between pages. So where the labels are the last page's and each rank is
one series of ascending edges (vLLM's and SGLang's layout), a rank's counts are a slice of
the page's values: no Python work per bucket. Any other page, or a value that breaks a rule
(NaN, a count that falls), is read bucket by bucket, which says what is wrong.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import repeat
from operator import add, itemgetter, le, sub
from types import MappingProxyType

from sparktop.model import NA
from sparktop.sources.exposition.page import PromPage, PromSample

RANK_LABELS = ("engine", "dp_rank")
WHOLE_SERVER = "*"
"""Where a gauge or counter without a rank label goes on a page of several data-parallel
ranks: it is the whole server's (vLLM 0.32's ``admission_rejections_total`` has only
``model_name`` and ``reason``), not rank 0's. On a page of one rank (or none labelled) it
is that rank's. See :func:`sparktop.sources.engines.reading.read_page`."""


def rank_of(labels: Mapping[str, str]) -> str:
    """The first non-empty of :data:`RANK_LABELS`, else :data:`WHOLE_SERVER` (called per
    sample; :func:`~sparktop.sources.engines.reading.read_page` settles it: the one rank's on
    a page of at most one rank)."""
    return labels.get("engine") or labels.get("dp_rank") or WHOLE_SERVER


@dataclass(frozen=True, slots=True)
class Hist:
    """A cumulative histogram: ``edges`` ascending (last is +Inf), ``cum`` counts per edge."""

    edges: tuple[float, ...]
    cum: tuple[float, ...]
    sum: float
    count: float

    def minus(self, base: Hist) -> Hist | None:
        """Bucket deltas since ``base``; None when the edges differ."""
        if base.edges != self.edges:
            return None
        cum = tuple(map(sub, self.cum, base.cum))  # as long: the edges are the same
        return Hist(self.edges, cum, self.sum - base.sum, self.count - base.count)


def _bucket_order_fault(base: str, series: list[tuple[float, float]]) -> str:
    """Why one series' buckets (in page order) are not a cumulative histogram, or ""."""
    for (edge_a, cum_a), (edge_b, cum_b) in itertools.pairwise(series):
        if edge_b <= edge_a:
            return (
                f"histogram invalid: {base} buckets out of order (le={edge_b:g} after {edge_a:g})"
            )
        if cum_b < cum_a:
            return (
                f"histogram invalid: {base} not cumulative "
                f"(le={edge_b:g} has {cum_b:g} < {cum_a:g} at le={edge_a:g})"
            )
    if series and series[-1][0] != math.inf:
        return f"histogram invalid: {base} has no le=+Inf bucket"
    return ""


Bucket = tuple[Mapping[str, str], str, float, frozenset[tuple[str, str]]]
"""A bucket sample's labels → (those labels, rank, ``le`` as a number (NaN when it is not
one), the labels without ``le``: its series)."""
_BUCKETS: dict[int, Bucket] = {}
"""Buckets by the identity of their labels, for the read-only mappings the fast reader shares
between samples and pages (so a bucket is worked out once, not every scrape); a hit is checked
to be that very mapping, which the entry keeps alive. Bounded by :data:`MAX_BUCKETS`."""
MAX_BUCKETS = 16_384


def _bucket(labels: Mapping[str, str]) -> Bucket:
    known = _BUCKETS.get(id(labels))
    if known is not None and known[0] is labels:
        return known
    le_text = labels.get("le", "nan")
    try:
        edge = float(le_text)
    except ValueError:
        edge = math.nan
    known = (labels, rank_of(labels), edge, frozenset(labels.items()) - {("le", le_text)})
    if isinstance(labels, MappingProxyType):  # a library dict is one sample's, never shared
        if len(_BUCKETS) >= MAX_BUCKETS:
            _BUCKETS.clear()
        _BUCKETS[id(labels)] = known
    return known


Span = tuple[str, int, int, tuple[float, ...]]
"""One rank's buckets in a family's samples: rank, first index, index past the last, edges."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where a family's buckets go, from their labels alone: each rank one series of
    consecutive samples with ascending edges ending at +Inf (``spans`` in page order)."""

    labels: tuple[Mapping[str, str], ...]
    spans: tuple[Span, ...]


_LAYOUTS: dict[tuple[int, ...], _Layout | None] = {}
"""Layouts by the identities of the label mappings (shared by the fast reader's pages); a hit
is checked to be those very mappings, which the entry keeps. None: not one series a rank.
Bounded by :data:`MAX_LAYOUTS`."""
MAX_LAYOUTS = 256


def _layout(labels: tuple[Mapping[str, str], ...]) -> _Layout | None:
    """The layout of these bucket labels, None when a rank has several series (or one
    series is not consecutive, or its edges are not ascending to +Inf)."""
    key = tuple(map(id, labels))
    if key in _LAYOUTS:
        known = _LAYOUTS[key]
        if known is None or known.labels == labels:  # a stale None costs the slow read only
            return known
    spans: list[Span] = []
    ranks: set[str] = set()
    series: frozenset[tuple[str, str]] | None = None
    spans_rank, start = "", 0
    edges: list[float] = []
    layout: _Layout | None = None
    for i, item in enumerate(labels):
        _labels, rank, edge, ident = _bucket(item)
        if ident != series:
            if series is not None:
                spans.append((spans_rank, start, i, tuple(edges)))
            if rank in ranks:
                break  # a second series for this rank (or a series cut in two)
            ranks.add(rank)
            series, spans_rank, start, edges = ident, rank, i, []
        if not edge > (edges[-1] if edges else -math.inf):  # NaN fails too
            break
        edges.append(edge)
    else:
        if series is not None:
            spans.append((spans_rank, start, len(labels), tuple(edges)))
        if all(span[3][-1] == math.inf for span in spans):
            layout = _Layout(labels, tuple(spans))
    if all(isinstance(item, MappingProxyType) for item in labels):
        if len(_LAYOUTS) >= MAX_LAYOUTS:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    return layout


def _fast_buckets(samples: tuple[PromSample, ...]) -> dict[str, dict[float, float]] | None:
    """Rank → edge → count, when the buckets follow their layout and every count is finite
    and cumulative; None to read them bucket by bucket."""
    layout = _layout(tuple(map(itemgetter(1), samples)))
    if layout is None:
        return None
    values = tuple(map(itemgetter(2), samples))
    if not math.isfinite(sum(values)):  # one NaN or ±Inf, or an overflow: looked at slowly
        return None
    acc: dict[str, dict[float, float]] = {}
    for rank, start, end, edges in layout.spans:
        cum = values[start:end]
        if not all(map(le, cum, cum[1:])):
            return None
        # 0.0 + count, as the sum over a rank's series starts (a "-0.0" count reads 0.0)
        acc[rank] = dict(zip(edges, map(add, repeat(0.0), cum), strict=True))
    return acc


def read_hist(page: PromPage, base: str, sum_count_only: bool) -> dict[str, Hist | NA]:
    """Rank → the histogram family ``base`` (``_bucket``, ``_sum``, ``_count`` samples) summed
    over the rank's series, or NA saying why it cannot be read; buckets are left out with
    ``sum_count_only``."""
    acc: dict[str, dict[float, float]] = {}
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    bad: dict[str, str] = {}
    if not sum_count_only:
        buckets = page.get(base + "_bucket")
        fast = _fast_buckets(buckets) if buckets else None
        if fast is not None:
            acc = fast
        else:
            _slow_buckets(base, buckets, acc, bad)
    for suffix, store in (("_sum", sums), ("_count", counts)):
        for s in page.get(base + suffix):
            rank = rank_of(s.labels)
            if not s.finite:
                bad.setdefault(rank, f"{base} has a NaN or Inf sample")
            store[rank] = store.get(rank, 0.0) + s.value
    out: dict[str, Hist | NA] = {}
    for rank in set(acc) | set(sums) | set(counts):
        if rank in bad:
            out[rank] = NA(bad[rank])
            continue
        found = acc.get(rank, {})
        edges = tuple(sorted(found))
        count = counts.get(rank, found.get(math.inf, math.nan))
        cum = tuple(map(found.__getitem__, edges))
        out[rank] = Hist(edges, cum, sums.get(rank, math.nan), count)
    return out


def _slow_buckets(
    base: str,
    samples: tuple[PromSample, ...],
    acc: dict[str, dict[float, float]],
    bad: dict[str, str],
) -> None:
    """Bucket by bucket into ``acc`` (rank → edge → count), with why a rank is unreadable in
    ``bad``."""
    # One series = one label set without ``le``: its buckets must ascend and accumulate in
    # page order, as Prometheus requires; a broken one is said, never re-sorted into a figure.
    series: dict[frozenset[tuple[str, str]], list[tuple[float, float]]] = {}
    for s in samples:
        value = s.value
        _labels, rank, edge, ident = _bucket(s.labels)
        if not math.isfinite(value) or math.isnan(edge):
            bad.setdefault(rank, f"{base} has a NaN or Inf sample or a bad le")
            continue
        series.setdefault(ident, []).append((edge, value))
        buckets = acc.setdefault(rank, {})
        buckets[edge] = buckets.get(edge, 0.0) + value
    for ident, points in series.items():
        fault = _bucket_order_fault(base, points)
        if fault:
            bad.setdefault(rank_of(dict(ident)), fault)
