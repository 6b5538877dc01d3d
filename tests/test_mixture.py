"""span_median's sweep agrees with the median read straight from its definition (every span's
weight summed at every end) on overlapping spans, points, shared ends and reversed spans."""

from __future__ import annotations

import random

import pytest

from sparktop.sweep.expected.mixture import Span, point_median, span_median


def _by_definition(spans: list[Span]) -> float:
    """The median as the cumulative weight defines it: at each end, the weight below it
    summed over every span (linear inside a span, a step at a point)."""
    spans = [(min(a, b), max(a, b), w) for a, b, w in spans if w > 0]
    if all(a == b for a, b, _ in spans):
        return point_median([(a, w) for a, _, w in spans])
    half = sum(w for _, _, w in spans) / 2.0

    def below(x: float, inclusive: bool) -> float:
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
        if left >= half:
            return prev_x + (x - prev_x) * (half - prev_q) / (left - prev_q)
        right = below(x, inclusive=True)
        if right >= half:
            return x
        prev_x, prev_q = x, right
    return edges[-1]


def _mixture(rng: random.Random) -> list[Span]:
    spans: list[Span] = []
    for _ in range(rng.randint(1, 40)):
        a = float(rng.choice((rng.randint(1, 30), rng.uniform(0.1, 30.0))))
        kind = rng.random()
        if kind < 0.25:
            b = a  # a point
        elif kind < 0.4:
            b = float(rng.randint(1, 30))  # often a shared end, sometimes reversed
        else:
            b = a * rng.uniform(0.5, 2.0)
        weight = rng.choice((0.0, 0.5, 1.0, rng.uniform(0.01, 10.0)))
        spans.append((a, b, weight))
    if all(w <= 0 for _, _, w in spans):
        spans.append((1.0, 2.0, 1.0))
    return spans


def test_the_sweep_agrees_with_the_definition_on_random_mixtures() -> None:
    rng = random.Random(18)
    for _ in range(3000):
        spans = _mixture(rng)
        assert span_median(spans) == pytest.approx(_by_definition(spans), rel=1e-9, abs=1e-12)


def test_the_cases_the_sweep_steps_at() -> None:
    cases: list[list[Span]] = [
        [(1.0, 1.0, 1.0), (2.0, 2.0, 1.0)],  # points only
        [(1.0, 3.0, 1.0), (2.0, 2.0, 1.0)],  # a point inside a span holds the median
        [(1.0, 2.0, 1.0), (2.0, 3.0, 1.0)],  # the median at a shared end
        [(3.0, 1.0, 2.0), (5.0, 5.0, 1.0)],  # a reversed span
        [(1.0, 1.0, 5.0), (2.0, 9.0, 1.0)],  # the lowest point holds half
        [(1.0, 4.0, 0.0), (2.0, 6.0, 3.0)],  # a weightless span is ignored
    ]
    for spans in cases:
        assert span_median(spans) == pytest.approx(_by_definition(spans), rel=1e-12)
