"""The figures an engine sample falls back to over the server's lifetime: which fields
(:data:`LIFETIME_FIELDS`), and :func:`from_lifetime`, which reads them from the page's
cumulative histograms when the window has no earlier scrape or no request finished in it
(listed in ``EngineSample.since_start``; see :mod:`sparktop.sources.engines.metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sparktop.model import NA, Num, RankStats
from sparktop.sources.engines.breakdown import PHASE_VALUES, phases
from sparktop.sources.engines.window import EngineValues, Window

LIFETIME_FIELDS = (
    "ttft_p50",
    "ttft_p95",
    "itl_p50",
    "itl_mean_s",
    "mean_prompt_tokens",
    "prefix_hit_rate",
    "spec_acceptance_rate",
    "spec_mean_accept_len",
    "queue_time_p50",
    "queue_time_mean_s",
    "prefill_time_p50",
    "prefill_time_mean_s",
    "decode_time_p50",
    "decode_time_mean_s",
    "e2e_latency_p50",
    "e2e_latency_mean_s",
    "tpot_p50",
    "tpot_mean_s",
)
"""Fields that cover the server's lifetime when there is no earlier scrape to diff against."""

_LATENCY_PREFIXES = ("ttft", "itl", "queue_time", "prefill_time", "decode_time", "e2e", "tpot")
LATENCY_FIELDS = tuple(k for k in LIFETIME_FIELDS if k.startswith(_LATENCY_PREFIXES))
"""Fields read from latency histograms: n/a with the kind's reason when it exports none."""


ROW_LIFETIME_FIELDS = tuple(k for k in LIFETIME_FIELDS if k in RankStats.__dataclass_fields__)
"""The lifetime fields a rank's row has."""
ENGINE_VALUES = frozenset(EngineValues.__annotations__)
"""The fields :meth:`Window.engine_values` computes."""


def from_lifetime(
    whole: Window,
    ranks: list[str],
    pools: dict[str, Num],
    stats: list[RankStats],
    found: Mapping[str, object],
) -> tuple[list[RankStats], dict[str, object]]:
    """The rank rows with their empty-window fields taken from the server's lifetime (the
    page's cumulative histograms, read by ``whole``: a window without a base), and the
    lifetime values that exist of the engine fields ``found`` has NA. Only what is missing
    is derived again: the rows only when one has an empty field, the phases (the requests
    that finished) apart from the rest."""
    missing = {k for k in LIFETIME_FIELDS if isinstance(found.get(k), NA)}
    empty_row = any(isinstance(getattr(row, k), NA) for row in stats for k in ROW_LIFETIME_FIELDS)
    life: dict[str, object] = {}
    if empty_row or missing & ENGINE_VALUES:
        lifetime = [whole.rank_stats(r, pools[r]) for r in ranks]
        rows = []
        for row, past in zip(stats, lifetime, strict=True):
            fields = {
                k: getattr(past, k)
                for k in ROW_LIFETIME_FIELDS
                if isinstance(getattr(row, k), NA) and not isinstance(getattr(past, k), NA)
            }
            rows.append(replace(row, **fields))
        stats = rows
        if missing & ENGINE_VALUES:
            life.update(whole.engine_values(ranks, lifetime))
    if missing & PHASE_VALUES:
        life.update(phases(whole, ranks))
    return stats, {k: life[k] for k in LIFETIME_FIELDS if not isinstance(life.get(k, NA()), NA)}
