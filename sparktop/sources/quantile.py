"""Latency quantiles from cumulative histogram buckets, the way ``histogram_quantile`` does.

Linear interpolation inside the bucket that holds the rank. The two open ends are said, not
invented: a quantile in the first bucket is ``< first edge`` (its lower bound is unknown) and
one in ``+Inf`` is ``> last finite edge``.
"""

from __future__ import annotations

import math

from sparktop.model import NA, Quantile
from sparktop.sources.vllm import Hist


def histogram_quantile(q: float, hist: Hist, empty_reason: str) -> Quantile | NA:
    """The ``q`` quantile (0 < q < 1) of ``hist`` (cumulative counts; deltas or lifetime).

    Returns ``NA(empty_reason)`` when the histogram holds no observations and NA with a reason
    when it has no buckets or no finite edge.
    """
    if not hist.edges or hist.edges[-1] != math.inf:
        return NA("histogram has no +Inf bucket")
    # Cumulative counts can dip by float noise or a partial scrape; keep them monotone.
    cum: list[float] = []
    running = 0.0
    for value in hist.cum:
        running = max(running, value)
        cum.append(running)
    total = cum[-1]
    if total <= 0:
        return NA(empty_reason)
    finite = [e for e in hist.edges if e != math.inf]
    if not finite:
        return NA("histogram has only the +Inf bucket")
    rank = q * total
    index = next(i for i, c in enumerate(cum) if c >= rank)
    edge = hist.edges[index]
    if edge == math.inf:
        return Quantile(finite[-1], ">")
    if index == 0:
        return Quantile(edge, "<")
    lower, below = hist.edges[index - 1], cum[index - 1]
    inside = cum[index] - below
    if inside <= 0:
        return Quantile(edge)
    return Quantile(lower + (edge - lower) * (rank - below) / inside)
