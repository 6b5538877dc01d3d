"""Turns successive ``/metrics`` pages of one engine into :class:`EngineSample` values.

:class:`MetricsDeriver` keeps a bounded deque of past scrapes (counters and histogram buckets
per rank) so that rates and latency quantiles cover a window (default 30 s) rather than the
server's lifetime. A counter that falls is a restart: the history is dropped, the sample says
``restarted=True`` and rates resume from the new baseline (never a negative rate). Before a
second scrape exists, and whenever no request finished in the window, quantiles, mean prompt
length and ratios are computed over the server's lifetime and listed in
``EngineSample.since_start`` (one derivation for the monitor, ``snapshot`` and recordings;
the alert rules and the expected row read only windowed figures); rates are NA until then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from sparktop.model import NA, EngineSample, EngineState, Num, is_num
from sparktop.sources.engines.breakdown import breakdown
from sparktop.sources.engines.kinds import DEFAULT, spec_for
from sparktop.sources.engines.lifetime import LATENCY_FIELDS, LIFETIME_FIELDS, from_lifetime
from sparktop.sources.engines.page_reasons import (
    LOAD_GAUGES,
    all_load_gauges_refused,
    empty_reason,
    info_limit,
    some_load_gauges_refused,
)
from sparktop.sources.engines.pool import Limits, resolve_limit, resolve_pool
from sparktop.sources.engines.reading import (
    PageReading,
    detect_kind,
    kind_mismatch,
    read_page,
    refused_token_counters,
)
from sparktop.sources.engines.stillness import RankClocks
from sparktop.sources.engines.window import (
    Snap,
    Window,
    combine,
    counter_total,
    first_tokens,
)
from sparktop.sources.exposition.page import PromPage

NOW_WINDOW_S = 3.0
"""Span of the ``*_now`` rates: short enough that an engine that stopped generating reads 0
within a few seconds, long enough to span several scrapes (bursty streaming adds tokens in
chunks)."""


class MetricsDeriver:
    """Stateful: feed it every page of one engine, in order, with a monotonic time.

    ``window_s``: span for rates and quantiles (the oldest kept scrape at least that old is the
    base). ``stale_after_s``: running/waiting/KV gauges that stay identical while no counter
    moves for this long, with requests running or waiting, make the engine STALE (vLLM can
    freeze them after mass aborts). ``inventory`` and ``profile`` supply the limits
    ``/metrics`` does not export. ``history`` bounds the deque of past scrapes.
    """

    def __init__(
        self,
        engine: str,
        *,
        kind: str = DEFAULT.kind,
        declared: bool = False,
        inventory: Limits | None = None,
        profile: Limits | None = None,
        window_s: float = 30.0,
        stale_after_s: float = 60.0,
        history: int = 256,
    ) -> None:
        self.engine = engine
        self.kind = kind
        self.declared = declared
        self.inventory = inventory or Limits()
        self.profile = profile or Limits()
        self.window_s = window_s
        self.stale_after_s = stale_after_s
        self._history: deque[Snap] = deque(maxlen=history)
        self._seen: set[tuple[str, str]] = set()
        self._gauges: tuple[Num, ...] | None = None
        self._gauges_since = 0.0
        self._moved_at = 0.0
        self._tokens: tuple[float | None, float | None] | None = None
        self._tokens_at = 0.0
        self._kv: float | None = None
        self._kv_at = 0.0
        self._rank_clocks = RankClocks()

    @property
    def has_history(self) -> bool:
        """True once a scrape has been kept (the next one has a window to diff against)."""
        return bool(self._history)

    def kind_of(self, page: PromPage) -> str:
        """The kind ``page`` is read as: the declared one (``kind:``, ``--kind``), else the
        one whose samples it has (:func:`detect_kind`, ``kind`` breaking ties)."""
        return self.kind if self.declared else detect_kind(page, self.kind)

    def reset(self) -> None:
        """Forget every past scrape (a new connection or a new server)."""
        self._history.clear()
        self._gauges = None
        self._tokens = self._kv = None
        self._rank_clocks.reset()

    def derive(
        self,
        page: PromPage,
        *,
        now_s: float,
        wall_s: float,
        max_model_len: Num | None = None,
        model: str = "",
        latency_s: float | None = None,
        server_version: str = "",
        model_root: str = "",
        props: Mapping[str, Num] | None = None,
    ) -> EngineSample:
        """One sample from one page. ``now_s`` is monotonic (rates); ``wall_s`` is time.time().

        ``max_model_len``, ``model`` and ``model_root`` come from ``GET /v1/models`` when the
        caller has them, ``server_version`` from the server's version path; ``props``
        (``max_model_len``, ``max_num_seqs``) from a kind's props path (llama.cpp ``/props``).
        A page refused whole (``page.error``: invalid, or over a parse bound) or without any
        engine sample gives an UNAVAILABLE sample saying why.
        """
        kind = self.kind_of(page)
        # A series repeated with another value is ambiguous: n/a, not the first value.
        reading = read_page(page.ambiguous_as_nan(), kind)
        head = EngineSample(
            engine=self.engine,
            time_s=wall_s,
            kind=kind,
            latency_s=latency_s,
            server_version=server_version,
        )
        if page.error:
            return replace(head, state=EngineState.UNAVAILABLE, message=page.error)
        notes = []
        if page.conflicts:
            shown = "; ".join(page.conflicts[:3]) + ("; …" if len(page.conflicts) > 3 else "")
            notes.append(
                f"{len(page.conflicts)} series repeated with different values, shown n/a "
                f"(ambiguous): {shown}"
            )
        if page.duplicates > len(page.conflicts):
            same = page.duplicates - len(page.conflicts)
            notes.append(f"{same} repeated series ignored (the first is read)")
        if reading.samples == 0:
            mismatch = kind_mismatch(page, kind) if self.declared else ""
            why = f"{mismatch} (fix or drop the kind)" if mismatch else empty_reason(page, reading)
            if reading.declared_empty:
                # The server answered with its engine's families, just no values yet: the
                # engine is up but unreadable (DEGRADED), not down.
                na = NA("declared but no samples")
                return replace(
                    head,
                    state=EngineState.DEGRADED,
                    message="; ".join([why, *notes]),
                    running=na,
                    waiting=na,
                    kv_usage=na,
                )
            return replace(head, state=EngineState.UNAVAILABLE, message="; ".join([why, *notes]))

        cur = Snap.of(now_s, reading, wall_s)
        prev = self._history[-1] if self._history else None
        restarted = prev is not None and cur.fell_below(prev)
        if restarted:
            self._history.clear()
            notes.append("counters went down: server restarted, rates restart from here")
        while len(self._history) >= 2 and self._history[1].t <= now_s - self.window_s:
            self._history.popleft()
        win = Window(reading, self._history, now_s, restarted, frozenset(self._seen))
        base = win.base
        recent = _recent(self._history, now_s)
        moved = prev is None or restarted or cur.moved_since(prev)
        self._history.append(cur)
        self._seen.update(cur.present)

        ranks = sorted(reading.ranks, key=lambda r: (len(r), r))
        pools, pool_source = resolve_pool(reading, ranks, self.inventory, self.profile)
        stats = [win.rank_stats(r, pools[r]) for r in ranks]

        def total(name: str, how: Callable[[Iterable[float]], float] = sum) -> Num:
            return combine({s.rank: getattr(s, name) for s in stats}, how)

        running, waiting, kv = total("running"), total("waiting"), total("kv_usage", max)
        used = total("kv_used_tokens")
        cur.kv_used = float(used) if is_num(used) else None
        values = win.engine_values(ranks, stats)
        more = breakdown(win, ranks)
        since_start: tuple[str, ...] = ()
        found: dict[str, object] = {**values, **more}
        if base is None:
            since_start = tuple(k for k in LIFETIME_FIELDS if not isinstance(found[k], NA))
        fill: dict[str, object] = {}
        if base is not None and any(isinstance(found.get(k), NA) for k in LIFETIME_FIELDS):
            # Nothing finished in the window: the server's lifetime figures, marked so, as on
            # a first scrape (one derivation for the monitor, snapshot and recordings).
            whole = Window(reading, deque(), now_s, restarted, frozenset(self._seen))
            stats, life = from_lifetime(whole, ranks, pools, stats, found)
            fill = {k: v for k, v in life.items() if isinstance(found.get(k), NA)}
            since_start = tuple(k for k in LIFETIME_FIELDS if k in fill)
        state, stale = self._staleness(now_s, (running, waiting, kv), moved)
        no_tokens_s, kv_still_s = self._stillness(cur, restarted, kv)
        if len(stats) > 1:  # data-parallel: one rank can stall while the others generate
            stats = self._rank_clocks.apply(cur, stats, restarted)
        if refused := all_load_gauges_refused(reading):
            state, stale = EngineState.DEGRADED, refused
        elif any(k in reading.refused for k in LOAD_GAUGES):
            # One refused gauge is an incomplete page, as one implausible GPU reading is
            # "implausible data": degraded (the usable gauges are still judged), and why.
            if some := some_load_gauges_refused(reading):
                notes.insert(0, some)
            if state is EngineState.OK:
                state = EngineState.DEGRADED
        if refused_rates := refused_token_counters(reading):
            notes.insert(0, refused_rates)
        limits = self._limits(reading, ranks, max_model_len, props or {})
        sample = replace(
            head,
            state=state,
            message="; ".join([stale, *notes] if stale else notes),
            model=model or reading.model,
            model_root=model_root,
            running=running,
            waiting=waiting,
            kv_usage=kv,
            kv_pool_tokens=total("kv_pool_tokens"),
            kv_pool_source=pool_source,
            kv_used_tokens=used,
            kv_fill_tps=_kv_fill(cur, base),
            kv_freed_tps=_kv_freed(win, ranks),
            kv_hit_tps=_rate_since(cur, base, "prefix_hits"),
            kv_free_tokens=total("kv_free_tokens"),
            preemptions_per_s=total("preemptions_per_s"),
            prefill_tps=total("prefill_tps"),
            decode_tps=total("decode_tps"),
            prefill_tps_now=_rate_since(cur, recent, "prompt_tokens"),
            decode_tps_now=_rate_since(cur, recent, "generation_tokens"),
            now_window_s=cur.t - recent.t if recent is not None else None,
            max_model_len=limits["max_model_len"][0],
            max_num_seqs=limits["max_num_seqs"][0],
            max_num_batched_tokens=limits["max_num_batched_tokens"][0],
            limit_sources=MappingProxyType({k: v[1] for k, v in limits.items()}),
            restarted=restarted,
            ranks=tuple(stats),
            window_s=win.dt if base else None,
            window_start_s=base.wall_s if base else None,
            since_start=since_start,
            ttft_p50=values["ttft_p50"],
            ttft_p95=values["ttft_p95"],
            itl_p50=values["itl_p50"],
            itl_mean_s=values["itl_mean_s"],
            mean_prompt_tokens=values["mean_prompt_tokens"],
            prefix_hit_rate=values["prefix_hit_rate"],
            spec_acceptance_rate=values["spec_acceptance_rate"],
            spec_mean_accept_len=values["spec_mean_accept_len"],
            **more,
            load_dist=win.load_dist(cur.running, cur.waiting) if base else (),
            prompt_tokens_dist=values["prompt_tokens_dist"],
            first_token_prompt_tokens=values["first_token_prompt_tokens"],
            first_tokens=first_tokens(win.history, cur) if base else (),
            no_tokens_s=no_tokens_s,
            kv_still_s=kv_still_s,
        )
        if no_latency := spec_for(kind).no_latency:
            fill.update({k: NA(no_latency) for k in LATENCY_FIELDS})
        return replace(sample, **fill) if fill else sample  # type: ignore[arg-type]

    def _limits(
        self,
        reading: PageReading,
        ranks: list[str],
        max_model_len: Num | None,
        props: Mapping[str, Num],
    ) -> dict[str, tuple[Num, str]]:
        gauges = reading.ranks[ranks[0]].gauges if ranks else {}
        missing = NA("not exported")
        from_models = NA("not asked") if max_model_len is None else max_model_len
        server: dict[str, list[tuple[Num, str]]] = {
            "max_model_len": [
                (from_models, "/v1/models"),
                (props.get("max_model_len", missing), "/props"),
                (gauges.get("max_model_len", missing), "server"),
            ],
            "max_num_seqs": [
                (props.get("max_num_seqs", missing), "/props"),
                (gauges.get("max_num_seqs", missing), "server"),
                (info_limit(reading, ranks, "max_num_seqs"), "cache_config_info"),
            ],
            "max_num_batched_tokens": [
                (gauges.get("max_num_batched_tokens", missing), "server"),
                (info_limit(reading, ranks, "max_num_batched_tokens"), "cache_config_info"),
            ],
        }
        return {k: resolve_limit(k, v, self.inventory, self.profile) for k, v in server.items()}

    def _stillness(
        self, cur: Snap, restarted: bool, kv_usage: Num
    ) -> tuple[float | None, float | None]:
        """Seconds since the token counters (``generation_tokens_total``,
        ``prompt_tokens_total``) last grew, and since the KV in use last changed (tokens, or
        the usage fraction when the pool is unknown), on the scrape clock; None when the
        page lacks them. A restart, or a first scrape, starts both clocks."""
        tokens = (counter_total(cur, "generation_tokens"), counter_total(cur, "prompt_tokens"))
        if restarted or self._tokens is None or tokens != self._tokens:
            self._tokens, self._tokens_at = tokens, cur.t
        in_use = cur.kv_used if cur.kv_used is not None else None
        if in_use is None and is_num(kv_usage):
            in_use = float(kv_usage)
        if restarted or self._kv is None or in_use != self._kv:
            self._kv, self._kv_at = in_use, cur.t
        no_tokens = cur.t - self._tokens_at if tokens[0] is not None else None
        kv_still = cur.t - self._kv_at if in_use is not None else None
        return no_tokens, kv_still

    def _staleness(
        self, now_s: float, gauges: tuple[Num, Num, Num], moved: bool
    ) -> tuple[EngineState, str]:
        if moved or self._gauges is None:
            self._moved_at = now_s
        if gauges != self._gauges:
            self._gauges, self._gauges_since = gauges, now_s
        busy = sum(g for g in gauges[:2] if is_num(g))
        quiet = now_s - max(self._moved_at, self._gauges_since)
        if busy > 0 and quiet >= self.stale_after_s:
            return EngineState.STALE, (
                f"running/waiting/KV unchanged for {quiet:.0f} s while no counter moved "
                f"(running {_count(gauges[0])}, waiting {_count(gauges[1])}): gauges may be frozen"
            )
        return EngineState.OK, ""


def _recent(history: Iterable[Snap], now_s: float) -> Snap | None:
    """The newest kept scrape at least :data:`NOW_WINDOW_S` old, else the oldest one."""
    found = None
    for snap in history:
        if snap.t >= now_s:
            break
        if found is None or snap.t <= now_s - NOW_WINDOW_S:
            found = snap
    return found


def _rate_since(cur: Snap, base: Snap | None, key: str) -> Num:
    """A counter's increase per second since ``base``, summed over ranks (every rank that
    has it at both ends)."""
    if base is None or cur.t <= base.t:
        return NA("rates need a second scrape")
    both = [k for k in cur.counters if k[1] == key and k in base.counters]
    if not both:
        return NA("not exported")
    return sum(cur.counters[k] - base.counters[k] for k in both) / (cur.t - base.t)


def _kv_fill(cur: Snap, base: Snap | None) -> Num:
    """KV tokens in use gained per second since the window's first scrape; NA (not a negative
    fill) while finished or preempted requests free more than prompts and decode add."""
    if base is None:
        return NA("no earlier scrape in the window")
    if cur.kv_used is None or base.kv_used is None or cur.t <= base.t:
        return NA("KV tokens in use unknown at one end of the window")
    gained = (cur.kv_used - base.kv_used) / (cur.t - base.t)
    return gained if gained >= 0 else NA("the KV is shrinking: requests freed more than filled")


def _kv_freed(win: Window, ranks: list[str]) -> Num:
    """Prompt and output tokens of the requests that finished in the window, per second."""
    if win.base is None or win.dt <= 0:
        return NA("no earlier scrape in the window")
    total = 0.0
    for rank in ranks:
        for key in ("prompt_len", "generation_len"):
            h = win.hist(rank, key)
            if h is None:
                return NA(f"{'prompt' if key == 'prompt_len' else 'output'} lengths not exported")
            if isinstance(h, NA):
                return h
            total += h.sum
    return total / win.dt


def _count(value: Num) -> str:
    """A request count as the panel shows it (``2,826``), or the gauge's own n/a."""
    return f"{value:,.0f}" if is_num(value) else str(value)
