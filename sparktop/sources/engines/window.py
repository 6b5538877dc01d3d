"""Windowed arithmetic over two scrapes of one engine: counter rates, histogram bucket deltas,
quantiles, mean prompt length, prefix-cache and spec-decode ratios, per rank and merged.

``Window(reading, history, now_s, restarted, seen)``: ``reading`` is this scrape, ``history``
the kept scrapes inside the window, oldest first (empty on the first scrape or right after a
restart, when ratios and quantiles cover the server's lifetime and rates are NA). Each counter
and histogram is diffed against the oldest kept scrape that *read* it: one scrape where it was
NaN or missing never becomes a base of 0 (a lifetime total divided by the window would read as
a spike). A series never seen before starts from 0 (Prometheus counters appear on their first
increment); one seen before but unreadable on every kept scrape is NA until the next scrape.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from operator import add
from typing import TypedDict

from sparktop.model import NA, Num, Quantile, RankStats, is_num
from sparktop.sources.engines.histread import WHOLE_SERVER, Hist
from sparktop.sources.engines.kinds import spec_for
from sparktop.sources.engines.quantile import histogram_quantile
from sparktop.sources.engines.reading import PageReading

RATES = {
    "prefill_tps": "prompt_tokens",
    "decode_tps": "generation_tokens",
    "preemptions_per_s": "preemptions",
}
NOT_EXPORTED = "not exported"


class EngineValues(TypedDict):
    """Engine-level values computed over all ranks' merged histograms and counter deltas."""

    ttft_p50: Quantile | NA
    ttft_p95: Quantile | NA
    itl_p50: Quantile | NA
    itl_mean_s: Num
    mean_prompt_tokens: Num
    prefix_hit_rate: Num
    spec_acceptance_rate: Num
    spec_mean_accept_len: Num
    prompt_tokens_dist: tuple[tuple[float, float, float], ...]
    first_token_prompt_tokens: Num


@dataclass(slots=True)
class Snap:
    """The finite counters and histograms of one scrape, keyed by (rank, key); monotonic ``t``."""

    t: float
    wall_s: float = 0.0
    """Wall-clock time of the scrape (``time.time()``; ``t`` may run on another clock)."""
    counters: dict[tuple[str, str], float] = field(default_factory=dict)
    hists: dict[tuple[str, str], Hist] = field(default_factory=dict)
    present: frozenset[tuple[str, str]] = frozenset()
    """Every counter and histogram on the page, readable or not (NaN, invalid)."""
    running: float | None = None
    waiting: float | None = None
    """The running / waiting gauges summed over ranks (None when a rank lacks one)."""
    kv_used: float | None = None
    """KV tokens in use, all ranks (set by the deriver once the pool is resolved)."""

    @classmethod
    def of(cls, t: float, reading: PageReading, wall_s: float = 0.0) -> Snap:
        snap = cls(t, wall_s)
        present: set[tuple[str, str]] = set()
        ranks = dict(reading.ranks)
        if reading.server is not None:  # whole-server counters are diffed like a rank's
            ranks[WHOLE_SERVER] = reading.server
        for rank, r in ranks.items():
            snap.counters.update({(rank, k): v for k, v in r.counters.items() if is_num(v)})
            snap.hists.update({(rank, k): h for k, h in r.hists.items() if isinstance(h, Hist)})
            present.update((rank, k) for k in (*r.counters, *r.hists))
        snap.present = frozenset(present)
        snap.running, snap.waiting = (_gauge_sum(reading, g) for g in ("running", "waiting"))
        return snap

    def fell_below(self, prev: Snap) -> bool:
        """True when any counter or histogram count is lower than in ``prev`` (a restart)."""
        if any(v < prev.counters[k] for k, v in self.counters.items() if k in prev.counters):
            return True
        return any(h.count < prev.hists[k].count for k, h in self.hists.items() if k in prev.hists)

    def moved_since(self, prev: Snap) -> bool:
        """True when any counter or histogram count differs from ``prev``."""
        if self.counters != prev.counters:
            return True
        return any(
            k not in prev.hists or h.count != prev.hists[k].count for k, h in self.hists.items()
        )


def _gauge_sum(reading: PageReading, name: str) -> float | None:
    values = [r.gauges.get(name) for r in reading.ranks.values()]
    nums = [float(v) for v in values if is_num(v)]
    return sum(nums) if nums and len(nums) == len(values) else None


def combine(values: Mapping[str, Num], how: Callable[[Iterable[float]], float] = sum) -> Num:
    """Sum (or max) over ranks; NA if any rank is NA, naming the rank when there are several."""
    reasons = {v.reason for v in values.values() if isinstance(v, NA)}
    if len(reasons) == 1 and len(values) > 1 and all(isinstance(v, NA) for v in values.values()):
        return NA(reasons.pop())  # same for every rank: no need to name one
    nums: list[float] = []
    for rank, value in values.items():
        if isinstance(value, NA):
            return NA(f"engine {rank}: {value.reason}") if len(values) > 1 else value
        nums.append(value)
    return how(nums) if nums else NA(NOT_EXPORTED)


def _mean_of(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items)


def ratio(num: Num, den: Num, empty: str) -> Num:
    """``num / den``; NA(empty) when the denominator is 0, the operand's NA when missing."""
    if isinstance(num, NA):
        return num
    if isinstance(den, NA):
        return den
    return num / den if den > 0 else NA(empty)


def quantile(q: float, hist: Hist | NA | None, empty: str) -> Quantile | NA:
    """Quantile of a (delta) histogram; NA(empty) without observations."""
    if hist is None:
        return NA(NOT_EXPORTED)
    if isinstance(hist, NA):
        return hist
    return histogram_quantile(q, hist, empty)


def mean(hist: Hist | NA | None, empty: str) -> Num:
    """Δ``_sum`` / Δ``_count`` of a histogram (e.g. mean prompt tokens per finished request)."""
    if hist is None:
        return NA(NOT_EXPORTED)
    if isinstance(hist, NA):
        return hist
    if not (math.isfinite(hist.sum) and math.isfinite(hist.count)):
        return NA("histogram _sum or _count missing")
    return hist.sum / hist.count if hist.count > 0 else NA(empty)


def merge(hists: Iterable[Hist | NA | None]) -> Hist | NA | None:
    """Bucket-wise sum over ranks (same edges required)."""
    merged: Hist | NA | None = None
    for h in hists:
        if h is None:
            continue
        if isinstance(h, NA) or merged is None or isinstance(merged, NA):
            merged = h if merged is None or isinstance(h, NA) else merged
            continue
        if h.edges != merged.edges:
            return NA("ranks use different bucket edges")
        cum = tuple(map(add, merged.cum, h.cum))  # as long: the edges are the same
        merged = Hist(merged.edges, cum, merged.sum + h.sum, merged.count + h.count)
    return merged


class Window:
    """Per-rank and engine-level values of ``reading`` relative to ``base``."""

    def __init__(
        self,
        reading: PageReading,
        history: Sequence[Snap],
        now_s: float,
        restarted: bool,
        seen: Set[tuple[str, str]] = frozenset(),
    ) -> None:
        self.reading = reading
        self.history = [snap for snap in history if snap.t < now_s]
        self.base = self.history[0] if self.history else None
        self.now_s = now_s
        self.seen = seen
        self.dt = now_s - self.base.t if self.base else 0.0
        self.first = (
            "counters went down (restart); rates resume at the next scrape"
            if restarted
            else "rates need a second scrape"
        )
        self.empty = (
            f"no requests finished in the last {self.dt:.0f} s" if self.base else "no requests yet"
        )

    def _base(self, rank: str, key: str, table: str) -> Snap | NA | None:
        """The oldest kept scrape that read this series; None for a series never seen."""
        for snap in self.history:
            if (rank, key) in getattr(snap, table):
                return snap
        if (rank, key) in self.seen:
            return NA(f"{key} unreadable on the earlier scrapes in the window; back next scrape")
        return None

    def _delta_dt(self, rank: str, key: str) -> tuple[Num, float]:
        value = self.reading.rank(rank).counters.get(key)
        if value is None or isinstance(value, NA):
            return (value if isinstance(value, NA) else NA(NOT_EXPORTED)), 0.0
        if self.base is None:
            return value, 0.0
        base = self._base(rank, key, "counters")
        if isinstance(base, NA):
            return base, 0.0
        if base is None:  # a new series: it counted from 0 within the window
            return value, self.dt
        return value - base.counters[(rank, key)], self.now_s - base.t

    def delta(self, rank: str, key: str) -> Num:
        """Counter increase over the window (the lifetime value without a base)."""
        return self._delta_dt(rank, key)[0]

    def hist(self, rank: str, key: str) -> Hist | NA | None:
        """Bucket deltas over the window (lifetime buckets without a base)."""
        h = self.reading.rank(rank).hists.get(key)
        if h is None or isinstance(h, NA) or self.base is None:
            return h
        base = self._base(rank, key, "hists")
        if base is None:
            return h
        if isinstance(base, NA):
            return base
        return h.minus(base.hists[(rank, key)]) or NA("bucket edges changed between scrapes")

    def rate(self, rank: str, key: str) -> Num:
        d, dt = self._delta_dt(rank, key)
        if isinstance(d, NA):
            return d
        return d / dt if dt > 0 else NA(self.first)

    def rank_stats(self, rank: str, pool: Num) -> RankStats:
        """One DP rank's row. ``pool`` is its KV pool in tokens (or NA with the reason)."""
        r = self.reading.ranks[rank]
        kv = r.gauges.get("kv_usage", NA(NOT_EXPORTED))
        used = r.gauges.get("used_tokens", NA(NOT_EXPORTED))
        if isinstance(used, NA):
            # vLLM states usage as a fraction of the pool: whole tokens, not 522,751.62
            used = (
                float(round(pool * kv))
                if is_num(pool) and is_num(kv)
                else (pool if isinstance(pool, NA) else kv)
            )
        # Without a pool the free part is unknown for the pool's reason, never the used count.
        free = (
            max(0.0, pool - used)
            if is_num(pool) and is_num(used)
            else (pool if isinstance(pool, NA) else used)
        )
        available = r.gauges.get("free_tokens")  # SGLang says it itself
        if is_num(available):
            free = available
        if "prefix_queries" in r.counters or "hit_rate" not in r.gauges:
            hit = ratio(
                self.delta(rank, "prefix_hits"),
                self.delta(rank, "prefix_queries"),
                "no prefix-cache queries",
            )
        else:
            hit = r.gauges["hit_rate"]
        ttft, itl = self.hist(rank, "ttft"), self.hist(rank, "itl")
        return RankStats(
            rank=rank,
            running=r.gauges.get("running", NA(NOT_EXPORTED)),
            waiting=r.gauges.get("waiting", NA(NOT_EXPORTED)),
            kv_usage=kv,
            kv_pool_tokens=pool,
            kv_used_tokens=used,
            kv_free_tokens=free,
            preemptions_per_s=self.rate(rank, "preemptions"),
            prefill_tps=self.rate(rank, "prompt_tokens"),
            decode_tps=self.rate(rank, "generation_tokens"),
            ttft_p50=quantile(0.5, ttft, self.empty),
            ttft_p95=quantile(0.95, ttft, self.empty),
            itl_p50=quantile(0.5, itl, self.empty),
            mean_prompt_tokens=mean(self.hist(rank, "prompt_len"), self.empty),
            prefix_hit_rate=hit,
        )

    def _gauge_mean(self, ranks: list[str], key: str, default: Num) -> Num:
        """The mean over ranks of a per-rank gauge; ``default`` when no rank exports it."""
        gauges = {r: self.reading.ranks[r].gauges for r in ranks}
        if not any(key in g for g in gauges.values()):
            return default
        return combine({r: g.get(key, NA(NOT_EXPORTED)) for r, g in gauges.items()}, _mean_of)

    def engine_values(self, ranks: list[str], stats: list[RankStats]) -> EngineValues:
        """Latency quantiles, mean prompt and ratios over all ranks together."""
        # The whole server's histograms (no rank label on a data-parallel page) count once.
        holders = self.reading.holders(ranks)
        merged = {k: merge(self.hist(r, k) for r in holders) for k in ("ttft", "itl", "prompt_len")}
        keys = (
            "prefix_queries",
            "prefix_hits",
            "spec_drafts",
            "spec_draft_tokens",
            "spec_accepted",
            "prompt_tokens",
        )
        d = {k: combine({r: self.delta(r, k) for r in ranks}) for k in keys}
        ttft = merged["ttft"]
        if spec_for(self.reading.kind).recent_gauges or not any(
            "prefix_queries" in self.reading.ranks[r].counters for r in ranks
        ):
            hit = combine({s.rank: s.prefix_hit_rate for s in stats}, _mean_of)
        else:
            hit = ratio(d["prefix_hits"], d["prefix_queries"], "no prefix-cache queries")
        rate = _spec(d["spec_accepted"], d["spec_draft_tokens"], 0.0, d["spec_drafts"])
        length = _spec(d["spec_accepted"], d["spec_drafts"], 1.0, d["spec_drafts"])
        if spec_for(self.reading.kind).recent_gauges:  # gauges over the server's recent steps
            rate = self._gauge_mean(ranks, "spec_accept_rate", rate)
            length = self._gauge_mean(ranks, "spec_accept_length", length)
        return EngineValues(
            ttft_p50=quantile(0.5, merged["ttft"], self.empty),
            ttft_p95=quantile(0.95, merged["ttft"], self.empty),
            itl_p50=quantile(0.5, merged["itl"], self.empty),
            itl_mean_s=mean(merged["itl"], self.empty),
            mean_prompt_tokens=mean(merged["prompt_len"], self.empty),
            prefix_hit_rate=hit,
            spec_acceptance_rate=rate,
            spec_mean_accept_len=length,
            prompt_tokens_dist=bucket_counts(merged["prompt_len"]),
            first_token_prompt_tokens=ratio(
                d["prompt_tokens"],
                ttft.count if isinstance(ttft, Hist) else (ttft or NA(NOT_EXPORTED)),
                self.empty,
            ),
        )

    def load_dist(self, running: float | None, waiting: float | None) -> LoadDist:
        """``(running, waiting, seconds)`` over the window: each interval between two kept
        scrapes (and the last one to now) counts half for the readings at either end."""
        points = [(s.t, s.running, s.waiting) for s in self.history]
        points.append((self.now_s, running, waiting))
        held: dict[tuple[float, float], float] = {}
        for (t0, r0, w0), (t1, r1, w1) in itertools.pairwise(points):
            half = (t1 - t0) / 2.0
            for r, w in ((r0, w0), (r1, w1)):
                if r is not None and half > 0:
                    key = (r, w if w is not None else 0.0)
                    held[key] = held.get(key, 0.0) + half
        return tuple((r, w, t) for (r, w), t in sorted(held.items()))


LoadDist = tuple[tuple[float, float, float], ...]


def bucket_counts(hist: Hist | NA | None) -> tuple[tuple[float, float, float], ...]:
    """``(low, high, count)`` of every non-empty bucket ``(low, high]`` (low 0 for the first)."""
    if not isinstance(hist, Hist):
        return ()
    out: list[tuple[float, float, float]] = []
    low, below = 0.0, 0.0
    for edge, cum in zip(hist.edges, hist.cum, strict=True):
        if cum - below > 0:
            out.append((low, edge, cum - below))
        low, below = edge, max(below, cum)
    return tuple(out)


def _spec(accepted: Num, den: Num, offset: float, drafts: Num) -> Num:
    if isinstance(accepted, NA) and accepted.reason == NOT_EXPORTED:
        if isinstance(drafts, NA) and drafts.reason == NOT_EXPORTED:
            return NA("no speculative decoding")
        return NA("vllm:spec_decode_num_accepted_tokens_total not exported by this server")
    value = ratio(accepted, den, "no drafts in the window")
    return value + offset if is_num(value) else value


FirstTokens = tuple[tuple[float, float, float], ...]
"""``(mean prompt tokens, requests, peak running)`` per scrape interval (see
:func:`first_tokens`)."""


def _summed(snap: Snap, table: str, key: str) -> float | None:
    """``key`` summed over ranks (a counter, or a histogram's count); None when absent."""
    if table == "counters":
        values = [v for (_, k), v in snap.counters.items() if k == key]
    else:
        values = [h.count for (_, k), h in snap.hists.items() if k == key]
    return sum(values) if values else None


def first_tokens(history: Sequence[Snap], cur: Snap) -> FirstTokens:
    """The requests whose first token came in the window, one entry per scrape interval in
    which some did: their mean prompt (Δ``prompt_tokens_total`` / Δ TTFT ``_count``, both
    counted at the first token by vLLM V1), how many, and the mean running count over the
    the most requests running at any scrape of the window up to it. Finer than the window's
    one mean: after a change from 4K to 200K prompts the window holds both populations. The
    running count is the peak so far because a request's TTFT was set by the company it
    prefilled in, which may have finished (short outputs) before its own first token: the
    count at that moment reads too low (8 × 120K prefilling together, the last first token
    with 2 running). Empty without a base, or when either counter is missing."""
    snaps = [*history, cur]
    out: list[tuple[float, float, float]] = []
    peak = 0.0
    for a, b in itertools.pairwise(snaps):
        peak = max([peak, *(r for r in (a.running, b.running) if r is not None)])
        pa, pb = _summed(a, "counters", "prompt_tokens"), _summed(b, "counters", "prompt_tokens")
        na, nb = _summed(a, "hists", "ttft"), _summed(b, "hists", "ttft")
        if pa is None or pb is None or na is None or nb is None:
            continue
        n, tokens = nb - na, pb - pa
        if n <= 0 or tokens <= 0:
            continue
        out.append((tokens / n, n, peak))
    return tuple(out)


def counter_total(snap: Snap, key: str) -> float | None:
    """Counter ``key`` summed over ranks; None when it is not on the page."""
    return _summed(snap, "counters", key)
