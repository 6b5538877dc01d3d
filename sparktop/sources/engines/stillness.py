"""Per data-parallel rank: seconds since its token counters and its KV in use last moved.

``engine.stalled`` reads the whole server's clocks (:meth:`MetricsDeriver._stillness`); a
data-parallel server whose one rank deadlocks while the others generate keeps its totals
moving, so each rank gets its own clocks here, read from that rank's
``generation_tokens_total`` and ``prompt_tokens_total`` and its KV tokens in use (else its
usage fraction). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sparktop.model import RankStats, is_num
from sparktop.sources.engines.window import Snap

MAX_RANKS = 1024
"""Ranks whose clocks are kept (names come from the server's ``engine`` label: bounded)."""


class RankClocks:
    """The clocks of every rank seen; :meth:`apply` stamps a scrape's rank rows."""

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[tuple[float | None, float | None], float]] = {}
        self._kv: dict[str, tuple[float, float]] = {}

    def reset(self) -> None:
        self._tokens.clear()
        self._kv.clear()

    def apply(self, cur: Snap, stats: Sequence[RankStats], restarted: bool) -> list[RankStats]:
        """``stats`` with ``no_tokens_s`` / ``kv_still_s`` set per rank (None where the rank
        has no generation counter or KV reading); a restart starts every clock."""
        if restarted or len(self._tokens) > MAX_RANKS:
            self.reset()
        out = []
        for s in stats:
            tokens = (
                cur.counters.get((s.rank, "generation_tokens")),
                cur.counters.get((s.rank, "prompt_tokens")),
            )
            held = self._tokens.get(s.rank)
            if held is None or held[0] != tokens:
                held = self._tokens[s.rank] = (tokens, cur.t)
            in_use = s.kv_used_tokens if is_num(s.kv_used_tokens) else s.kv_usage
            kv = float(in_use) if is_num(in_use) else None
            still: float | None = None
            if kv is not None:
                kv_held = self._kv.get(s.rank)
                if kv_held is None or kv_held[0] != kv:
                    kv_held = self._kv[s.rank] = (kv, cur.t)
                still = cur.t - kv_held[1]
            no_tokens = cur.t - held[1] if tokens[0] is not None else None
            out.append(replace(s, no_tokens_s=no_tokens, kv_still_s=still))
        return out
