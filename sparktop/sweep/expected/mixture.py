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
    positive total weight.

    One sweep over the sorted span ends, O(n log n) (a window's TTFT cells are a few hundred
    halves every tick; summing every span at every end was most of a tick's cost): the
    weight below an end is that of the spans and points wholly below it, summed as they are
    passed (exact where the spans' weights are), plus the open spans' linear share."""
    spans = [(min(a, b), max(a, b), w) for a, b, w in spans if w > 0]
    if all(a == b for a, b, _ in spans):
        return point_median([(a, w) for a, _, w in spans])
    half = sum(w for _, _, w in spans) / 2.0
    points: dict[float, float] = {}
    opening: dict[float, list[Span]] = {}
    closing: dict[float, list[Span]] = {}
    for span in spans:
        a, b, w = span
        if a == b:
            points[a] = points.get(a, 0.0) + w
        else:
            opening.setdefault(a, []).append(span)
            closing.setdefault(b, []).append(span)
    done = 0.0  # the weight of the spans and points wholly below the current end
    slope = offset = 0.0  # the open spans' weight below x is slope * x - offset
    open_spans = 0
    prev_x = prev_q = None
    for x in sorted({*points, *opening, *closing}):
        for a, b, w in closing.get(x, ()):
            done += w
            open_spans -= 1
            slope -= w / (b - a)
            offset -= w / (b - a) * a
        if not open_spans:
            slope = offset = 0.0  # no residue of the closed spans' densities
        left = done + (slope * x - offset if open_spans else 0.0)  # weight at values < x
        if prev_x is not None and prev_q is not None and left >= half:
            # crossed inside (prev_x, x), where the weight grows linearly
            return prev_x + (x - prev_x) * (half - prev_q) / (left - prev_q)
        right = left + points.get(x, 0.0)
        if right >= half:  # a point at x holds the median (or the lowest end does)
            return x
        done += points.get(x, 0.0)
        for a, b, w in opening.get(x, ()):
            open_spans += 1
            slope += w / (b - a)
            offset += w / (b - a) * a
        prev_x, prev_q = x, right
    assert prev_x is not None
    return prev_x


def spans_at(spans: Sequence[Span], x: float) -> list[int]:
    """Indices of the spans that hold ``x`` (``low <= x <= high``)."""
    return [i for i, (a, b, _) in enumerate(spans) if min(a, b) <= x <= max(a, b)]
