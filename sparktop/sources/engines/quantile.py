"""Latency quantiles from cumulative histogram buckets, the way ``histogram_quantile`` does.

Linear interpolation inside the bucket that holds the rank; the bucket itself is kept on the
:class:`~sparktop.model.Quantile` (``low_s``, ``high_s``): the interpolated point is a guess
inside it, the bucket what the histogram knows. The two open ends are said, not
invented: a quantile in the first bucket is ``< first edge`` (its lower bound is unknown) and
one in ``+Inf`` is ``> last finite edge``.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import accumulate

from sparktop.model import NA, Quantile
from sparktop.sources.engines.histread import Hist


def histogram_quantile(q: float, hist: Hist, empty_reason: str) -> Quantile | NA:
    """The ``q`` quantile (0 < q < 1) of ``hist`` (cumulative counts; deltas or lifetime).

    Returns ``NA(empty_reason)`` when the histogram holds no observations and NA with a reason
    when it has no buckets or no finite edge.
    """
    if not hist.edges or hist.edges[-1] != math.inf:
        return NA("histogram has no +Inf bucket")
    # Cumulative counts can dip by float noise or a partial scrape; keep them monotone.
    cum = list(accumulate(hist.cum, max, initial=0.0))[1:]
    total = cum[-1]
    if total <= 0:
        return NA(empty_reason)
    finite = hist.edges[:-1]  # ascending, one +Inf, and that is the last
    if not finite:
        return NA("histogram has only the +Inf bucket")
    rank = q * total
    index = bisect_left(cum, rank)  # the first bucket holding the rank: cum never falls
    edge = hist.edges[index]
    if edge == math.inf:
        return Quantile(finite[-1], ">")
    if index == 0:
        return Quantile(edge, "<")
    lower, below = hist.edges[index - 1], cum[index - 1]
    inside = cum[index] - below
    if inside <= 0:
        return Quantile(edge, "", lower, edge)
    return Quantile(lower + (edge - lower) * (rank - below) / inside, "", lower, edge)
