"""Medians of weighted cells: point masses, or uniform spans as a histogram's buckets are read.

The live TTFT p50 is ``histogram_quantile`` over the window's bucket deltas: linear inside
the bucket that holds the median, so it moves smoothly as observations come and go. The
expected p50 is the median of the window's (running count, prompt bucket) cells; each cell
stands for the requests of one prompt bucket, whose TTFTs spread between the estimates at
the bucket's two ends. Read as point masses, one request leaving the window can move the
median from one cell to the next (a 6.0 s ↔ 8.6 s swing on the simulator at a steady 5.4
running, with 20 requests in the window); read as spans, it moves by about that request's
share of the density at the median. Pure; no Textual.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

Span = tuple[float, float, float]
"""``(low, high, weight)``: ``weight`` spread evenly over ``[low, high]`` (a point when equal)."""


def point_median(pairs: Sequence[tuple[float, float]]) -> float:
    """The weighted median of ``(value, weight)`` points, interpolated between the points'
    weight midpoints (a point-mass median would jump from one point to the next as the
    weights shift). ``pairs`` must hold a positive total weight."""
    items = sorted(pairs)
    total = sum(w for _, w in items)
    at, below = [], 0.0
    for v, w in items:
        at.append(((below + w / 2.0) / total, v))
        below += w
    if at[0][0] >= 0.5:
        return at[0][1]
    for (q0, v0), (q1, v1) in itertools.pairwise(at):
        if q0 <= 0.5 <= q1:
            return v0 + (v1 - v0) * (0.5 - q0) / (q1 - q0) if q1 > q0 else v1
    return at[-1][1]


def span_median(spans: Sequence[Span]) -> float:
    """The median of the mixture: the value where the spans' cumulative weight reaches half
    the total, linear inside a span (as ``histogram_quantile`` reads a bucket) and a step at
    a point. All points (no span wider than zero): :func:`point_median`. Spans must hold a
    positive total weight."""
    spans = [(min(a, b), max(a, b), w) for a, b, w in spans if w > 0]
    if all(a == b for a, b, _ in spans):
        return point_median([(a, w) for a, _, w in spans])
    half = sum(w for _, _, w in spans) / 2.0

    def below(x: float, inclusive: bool) -> float:
        """Weight at values < x (``inclusive``: ≤ x)."""
        total = 0.0
        for a, b, w in spans:
            if a == b:
                total += w if (a < x or (inclusive and a == x)) else 0.0
            elif x >= b:
                total += w
            elif x > a:
                total += w * (x - a) / (b - a)
        return total

    edges = sorted({x for a, b, _ in spans for x in (a, b)})
    prev_x, prev_q = edges[0], below(edges[0], inclusive=True)
    if prev_q >= half:
        return prev_x
    for x in edges[1:]:
        left = below(x, inclusive=False)
        if left >= half:  # crossed inside (prev_x, x), where the weight grows linearly
            return prev_x + (x - prev_x) * (half - prev_q) / (left - prev_q)
        right = below(x, inclusive=True)
        if right >= half:  # a point at x holds the median
            return x
        prev_x, prev_q = x, right
    return edges[-1]


def spans_at(spans: Sequence[Span], x: float) -> list[int]:
    """Indices of the spans that hold ``x`` (``low <= x <= high``)."""
    return [i for i, (a, b, _) in enumerate(spans) if min(a, b) <= x <= max(a, b)]
