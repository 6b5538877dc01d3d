"""An inference server read from Prometheus (its scraped ``vllm:*`` or ``sglang:*`` series)
→ :class:`EngineSample`, through its kind's :class:`~sparktop.sources.engines.kinds.PromQL`.

Gauges (running, waiting, KV usage, vLLM's ``cache_config_info``, SGLang's pool and limits)
are read as on a ``/metrics`` page (:func:`sparktop.sources.engines.reading.read_page`: same
aliases, ranks by vLLM's ``engine`` or SGLang's ``dp_rank`` label); rates and latency
quantiles are computed by Prometheus over the same window the HTTP source uses
(``rate(…[30s])``, ``histogram_quantile`` over bucket rates): prefill/decode tok/s,
preemptions/s, TTFT p50/p95, ITL p50 and mean, mean prompt tokens, prefix-cache hit rate,
spec-decode acceptance (SGLang's hit rate and acceptance are its own gauges, averaged over
the ranks). The pool size and limits resolve as for the HTTP source (server, inventory,
profile). A quantile over a window without finished requests is NaN in Prometheus and
``NA`` here; a rate Prometheus cannot compute yet (fewer than two samples in the window) is
``NA`` naming the series.

States: Prometheus down or erroring → UNREACHABLE / UNAVAILABLE with the reason; the
server's target down (``up == 0``) → UNREACHABLE; none of the kind's series → UNAVAILABLE
naming the query; ``instance`` matching several servers → UNAVAILABLE asking for a narrower
``match``. A ``process_start_time_seconds`` that changed means the server restarted.
``time_s`` is the sample time of the running gauge (``vllm:num_requests_running``) in
Prometheus (an old one reads as stale).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from sparktop.model import NA, EngineSample, EngineState, Num, Quantile, RankStats, is_num
from sparktop.sources.engines.kinds import spec_for
from sparktop.sources.engines.pool import Limits, resolve_limit, resolve_pool
from sparktop.sources.engines.reading import PageReading, read_page
from sparktop.sources.engines.window import combine
from sparktop.sources.exposition.page import PromPage, PromSample, normalise
from sparktop.sources.prometheus.api import PromFailure, Series
from sparktop.sources.prometheus.hub import PromHub
from sparktop.sources.prometheus.promql import ENGINE_TS, Target

NO_PREFIX = "no prefix-cache queries"

_NOT_QUERIED = NA("not read through Prometheus yet (the engine's own /metrics source reads it)")
BREAKDOWN_NA = {
    name: _NOT_QUERIED
    for name in (
        "queue_time_mean_s", "prefill_time_mean_s", "decode_time_mean_s", "e2e_latency_mean_s",
        "tpot_mean_s", "queue_time_p50", "prefill_time_p50", "decode_time_p50",
        "e2e_latency_p50", "tpot_p50", "prefill_computed_tps", "waiting_capacity",
        "waiting_deferred", "requests_finished_per_s", "requests_aborted_per_s",
        "requests_errored_per_s", "admission_rejections_per_s", "retracted_reqs",
    )
}  # fmt: skip
"""The request breakdown (:mod:`sparktop.sources.engines.breakdown`) has no PromQL here: each
figure says so instead of a bare n/a."""


class PromEngineSource:
    """One inventory engine with ``source: prometheus``; ``sample()`` never raises."""

    kind = "engine"

    def __init__(
        self, hub: PromHub, target: Target, config: object,
        profile_limits: Mapping[str, int] | None = None,
    ) -> None:  # fmt: skip
        self.name = target.name
        self.hub = hub
        self.target = target
        self.spec = spec_for(target.kind)
        prefix = self.spec.metric_prefix
        self._names = (prefix, prefix[:-1] + "_")
        """The kind's sample names, in either spelling (``vllm:``, ``vllm_``)."""
        self.inventory = Limits.from_config(config)
        self.profile = Limits.from_mapping(profile_limits)
        hub.attach()
        self._since: float | None = None
        self._started: float | None = None
        window = f"{self.hub.window_s:.0f} s"
        self.empty = f"no requests finished in the last {window}"
        self.no_rate = f"Prometheus has fewer than two samples in the last {window}"

    async def sample(self) -> EngineSample:
        wall = time.time()
        try:
            result = await self.hub.fetch("engines")
        except PromFailure as failure:
            state = EngineState.UNREACHABLE if failure.unreachable else EngineState.UNAVAILABLE
            return self._failed(wall, state, failure.message(self.hub.url))
        series = self.hub.select("engines", result, self.target)
        sample = self._build(wall, series, result.latency_s)
        if result.warnings and sample.ok:
            notes = [sample.message, *(f"partial answer: {w}" for w in result.warnings)]
            sample = replace(sample, message="; ".join(n for n in notes if n))
        return sample

    def _failed(self, wall: float, state: EngineState, message: str) -> EngineSample:
        self._since = self._since or wall
        return EngineSample(
            engine=self.name, time_s=wall, state=state, message=message, since_s=self._since,
            kind=self.spec.kind,
        )  # fmt: skip

    def _build(self, wall: float, series: Sequence[Series], latency: float) -> EngineSample:
        servers = {_server(s) for s in series if s.name.startswith((*self._names, "sparktop:"))}
        if len(servers) > 1:
            names = ", ".join(sorted(i for i, _ in servers))
            message = f"{self.target.selector_text()} matches {len(servers)} servers ({names}): " \
                      "name one with match: {instance: HOST:PORT}"  # fmt: skip
            return self._failed(wall, EngineState.UNAVAILABLE, message)
        if not servers:
            down = sorted(
                s.labels.get("instance", "?") for s in series if s.name == "up" and s.value != 1
            )
            if down:
                message = f"Prometheus cannot scrape {', '.join(down)} (up=0)"
                return self._failed(wall, EngineState.UNREACHABLE, message)
            sel = self.target.selector_text()
            prefix = self.spec.metric_prefix
            message = f'no {self.spec.label} series: {{__name__=~"{prefix}.*",{sel}}} found nothing'
            return self._failed(wall, EngineState.UNAVAILABLE, message)
        server = servers.pop()
        mine = [s for s in series if _server(s) == server]
        return self._sample(wall, mine, latency)

    def _sample(self, wall: float, series: list[Series], latency: float) -> EngineSample:
        raw: dict[str, list[PromSample]] = {}
        derived: dict[tuple[str, str], float] = {}
        time_s, started = wall, None
        rank_label = self.spec.promql.rank_label if self.spec.promql else "engine"
        for s in series:
            if s.name == ENGINE_TS:
                time_s = min(time_s, s.value)
            elif s.name == "process_start_time_seconds":
                started = s.value
            elif s.name.startswith("sparktop:"):
                derived[(s.name.removeprefix("sparktop:"), s.labels.get(rank_label, ""))] = s.value
            elif s.name.startswith(self._names):
                name = normalise(s.name)
                raw.setdefault(name, []).append(PromSample(name, s.labels, s.value))
        page = PromPage(samples=MappingProxyType({k: tuple(v) for k, v in raw.items()}))
        reading = read_page(page, self.spec.kind)
        ranks = sorted(reading.ranks, key=lambda r: (len(r), r))
        pools, pool_source = resolve_pool(reading, ranks, self.inventory, self.profile)
        restarted = self._started is not None and started is not None and started != self._started
        self._started = started if started is not None else self._started

        def rate(name: str, rank: str | None) -> Num:
            if rank is None:
                value = derived.get((name + ":all", ""))
            else:
                value = derived.get((name, rank))
                if value is None and rank == "0":  # a server without the engine label
                    value = derived.get((name, ""))
            if value is None:
                return NA(self.no_rate)
            return value if math.isfinite(value) else NA(self.empty)

        def ratio(num: str, den: str, rank: str | None, empty: str) -> Num:
            a, b = rate(num, rank), rate(den, rank)
            if isinstance(a, NA) or isinstance(b, NA):
                return a if isinstance(a, NA) else b
            return a / b if b > 0 else NA(empty)

        def quantile(name: str, rank: str | None) -> Quantile | NA:
            value = rate(name, rank)
            return Quantile(value) if is_num(value) else NA(getattr(value, "reason", self.empty))

        tables = self.spec.gauges
        recent = self.spec.recent_gauges

        def missing(key: str) -> NA:
            return NA(f"no {tables[key][0]} series")

        def hit_rate(rank: str | None) -> Num:
            if not recent:
                return ratio("prefix_hits", "prefix_queries", rank, NO_PREFIX)
            keys = ranks if rank is None else [rank]
            gauges = {r: reading.ranks[r].gauges.get("hit_rate") for r in keys}
            return _mean(gauges, missing("hit_rate"))

        stats = []
        for r in ranks:
            gauges = reading.ranks[r].gauges
            kv = gauges.get("kv_usage", missing("kv_usage"))
            pool = pools[r]
            used = (
                pool * kv if is_num(pool) and is_num(kv) else (pool if isinstance(pool, NA) else kv)
            )
            stats.append(RankStats(
                rank=r,
                running=gauges.get("running", missing("running")),
                waiting=gauges.get("waiting", missing("waiting")),
                kv_usage=kv, kv_pool_tokens=pool, kv_used_tokens=used,
                kv_free_tokens=max(0.0, pool - used) if is_num(pool) and is_num(used) else used,
                preemptions_per_s=rate("preemptions_per_s", r),
                prefill_tps=rate("prefill_tps", r), decode_tps=rate("decode_tps", r),
                ttft_p50=quantile("ttft_p50", r), ttft_p95=quantile("ttft_p95", r),
                itl_p50=quantile("itl_p50", r),
                mean_prompt_tokens=ratio("prompt_len_sum", "prompt_len_count", r, self.empty),
                prefix_hit_rate=hit_rate(r),
            ))  # fmt: skip

        def total(name: str, how: str = "sum") -> Num:
            return combine({s.rank: getattr(s, name) for s in stats}, max if how == "max" else sum)

        limits = self._limits(reading, ranks)
        accepted = rate("spec_accepted", None)
        spec = isinstance(accepted, NA) and accepted.reason == self.no_rate

        def acceptance(key: str, from_counters: Callable[[], Num]) -> Num:
            if recent:  # the kind's own gauge over its recent steps
                return _mean({r: reading.ranks[r].gauges.get(key) for r in ranks}, missing(key))
            return NA("no speculative decoding") if spec else from_counters()

        self._since = None
        return EngineSample(
            engine=self.name, kind=self.spec.kind, time_s=time_s, model=reading.model,
            latency_s=latency,
            message="counters went down: server restarted" if restarted else "",
            running=total("running"), waiting=total("waiting"), kv_usage=total("kv_usage", "max"),
            kv_pool_tokens=total("kv_pool_tokens"), kv_pool_source=pool_source,
            kv_used_tokens=total("kv_used_tokens"), kv_free_tokens=total("kv_free_tokens"),
            preemptions_per_s=total("preemptions_per_s"), prefill_tps=total("prefill_tps"),
            decode_tps=total("decode_tps"),
            ttft_p50=quantile("ttft_p50", None), ttft_p95=quantile("ttft_p95", None),
            itl_p50=quantile("itl_p50", None),
            itl_mean_s=ratio("itl_sum", "itl_count", None, self.empty),
            mean_prompt_tokens=ratio("prompt_len_sum", "prompt_len_count", None, self.empty),
            prefix_hit_rate=hit_rate(None),
            spec_acceptance_rate=acceptance("spec_accept_rate", lambda: ratio(
                "spec_accepted", "spec_draft_tokens", None, "no drafts in the window")),
            spec_mean_accept_len=acceptance("spec_accept_length", lambda: _plus_one(ratio(
                "spec_accepted", "spec_drafts", None, "no drafts in the window"))),
            max_model_len=limits["max_model_len"][0], max_num_seqs=limits["max_num_seqs"][0],
            max_num_batched_tokens=limits["max_num_batched_tokens"][0],
            limit_sources=MappingProxyType({k: v[1] for k, v in limits.items()}),
            restarted=restarted, ranks=tuple(stats), window_s=self.hub.window_s,
            **BREAKDOWN_NA,  # type: ignore[arg-type]
        )  # fmt: skip

    def _limits(self, reading: PageReading, ranks: list[str]) -> dict[str, tuple[Num, str]]:
        gauges = reading.ranks[ranks[0]].gauges if ranks else {}
        missing = NA("not exported")
        server: dict[str, list[tuple[Num, str]]] = {
            "max_model_len": [(gauges.get("max_model_len", missing), "server")],
            "max_num_seqs": [(gauges.get("max_num_seqs", missing), "server")],
            "max_num_batched_tokens": [(gauges.get("max_num_batched_tokens", missing), "server")],
        }
        return {k: resolve_limit(k, v, self.inventory, self.profile) for k, v in server.items()}

    async def aclose(self) -> None:
        await self.hub.aclose()


def _server(s: Series) -> tuple[str, str]:
    return s.labels.get("instance", ""), s.labels.get("job", "")


def _mean(values: Mapping[str, Num | None], absent: NA) -> Num:
    """The mean over the ranks of one gauge; the first rank's NA (a refused sample), else
    ``absent``, when no rank has a number."""
    nums = [v for v in values.values() if is_num(v)]
    if nums:
        return sum(nums) / len(nums)
    bad = next((v for v in values.values() if isinstance(v, NA)), None)
    return bad if bad is not None else absent


def _plus_one(value: Num) -> Num:
    return value + 1.0 if is_num(value) else value
