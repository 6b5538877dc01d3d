"""What one engine's scrape amounts to: its state, per-rank rows and the engine sample that
the sources, the cluster state, alerts and the UI share (frozen and Textual-free, as
:mod:`sparktop.model`, which names them too). A value the server does not provide is an
:class:`~sparktop.values.NA` with the reason, never 0.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from types import MappingProxyType

from sparktop.values import HUGE, NA, FloatMap, Num, TextMap, bounded, is_num


class EngineState(enum.StrEnum):
    """What an engine's last scrape amounted to."""

    OK = "ok"
    STALE = "stale"
    DEGRADED = "degraded"
    """The page answered but a load gauge on it was refused (NaN, negative, a share past 1,
    a fractional or impossible request count, a series repeated with another value), or it
    declared its families without samples; ``message`` names them. With a load gauge still
    usable the sample is :attr:`EngineSample.judged` (rules read what is left)."""
    UNAVAILABLE = "unavailable"
    METRICS_DISABLED = "metrics disabled"
    UNREACHABLE = "unreachable"
    NOT_ANSWERING = "not answering"
    """The server accepted the connection and the request but sent no HTTP response in time
    (a hung server), as against UNREACHABLE: refused, or no connection at all."""


@dataclass(frozen=True, slots=True)
class Quantile:
    """A latency quantile from histogram bucket deltas, seconds.

    ``bound`` is ``"<"`` when the quantile fell in the first bucket (value = its upper edge:
    the lower end is unknown), ``">"`` when it fell in ``+Inf`` (value = the last finite edge),
    else ``""`` (linear interpolation inside a bucket). Formats as ``< 10 ms``, ``> 2560 s``.
    """

    value_s: float
    bound: str = ""
    low_s: float | None = field(default=None, compare=False, repr=False)
    high_s: float | None = field(default=None, compare=False, repr=False)
    """The bucket the quantile fell in, ``(low_s, high_s]``, when it fell between two edges;
    None when only the value is known (a Prometheus query's answer, or an open end: the
    ``bound`` says it). A
    quantile read from buckets is that interval: the interpolated ``value_s`` is one point of
    it, and every comparison reads the interval (:mod:`sparktop.alerts.comparisons`)."""

    @property
    def interval(self) -> tuple[float, float]:
        """``(low, high)`` seconds the quantile is known to lie in: its bucket, ``(0, value)``
        for ``<``, ``(value, inf)`` for ``>``, a point when only the value is known."""
        if self.bound == "<":
            return (0.0, self.value_s)
        if self.bound == ">":
            return (self.value_s, math.inf)
        if self.low_s is None or self.high_s is None:
            return (self.value_s, self.value_s)
        return (self.low_s, self.high_s)

    def __str__(self) -> str:
        v = self.value_s
        if abs(v) >= HUGE:  # no latency is this long: a broken or hostile page
            text = f"{bounded(v, '.3g')} s"
        elif v < 1:
            text = f"{v * 1000:.0f} ms"
        else:
            # A bucket edge ("> 30 s") is exact; a value keeps two decimals, so p50 and p95
            # side by side read alike ("24.00 s", not "24 s" beside "38.40 s").
            text = f"{v:.0f} s" if self.bound and float(v).is_integer() else f"{v:.2f} s"
        return f"{self.bound} {text}" if self.bound else text


@dataclass(frozen=True, slots=True)
class RankStats:
    """One data-parallel rank (vLLM ``engine`` label) of an inference server.

    Sources: ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
    ``vllm:kv_cache_usage_perc`` (fraction 0–1, shown as %), counter rates and histogram
    bucket deltas over the window (same meaning as the :class:`EngineSample` fields).
    """

    rank: str
    running: Num = NA()
    waiting: Num = NA()
    kv_usage: Num = NA()
    kv_pool_tokens: Num = NA()
    preemptions_per_s: Num = NA()
    prefill_tps: Num = NA()
    decode_tps: Num = NA()
    kv_used_tokens: Num = NA()
    kv_free_tokens: Num = NA()
    ttft_p50: Quantile | NA = NA()
    ttft_p95: Quantile | NA = NA()
    itl_p50: Quantile | NA = NA()
    mean_prompt_tokens: Num = NA()
    prefix_hit_rate: Num = NA()
    no_tokens_s: float | None = None
    """Seconds since this rank's generation or prompt token counter last grew (None: no
    counter), as :attr:`EngineSample.no_tokens_s` for the whole server."""
    kv_still_s: float | None = None
    """Seconds since this rank's KV in use last changed (None: no KV reading)."""


@dataclass(frozen=True, slots=True)
class EngineSample:
    """The result of scraping one inference server once (all DP ranks merged, ranks kept).

    Totals: running/waiting and token rates summed over ranks, ``kv_usage`` the max. Rates are
    per second over the scrape window; quantiles from histogram bucket deltas over the window.
    ``kv_pool_source`` says where the pool size came from (``cache_config_info``,
    ``num_gpu_blocks×block_size``, ``inventory``, ``profile``, ``unknown``).
    ``window_s`` is the span the rates and quantiles cover (None before a second scrape);
    ``since_start`` names the fields computed over the server's lifetime instead (first
    scrape, or right after a restart); ``limit_sources`` says where ``max_model_len``,
    ``max_num_seqs`` and ``max_num_batched_tokens`` came from (``/v1/models``, ``server``,
    ``inventory``, ``profile``). ``itl_mean_s`` is Δ``_sum`` / Δ``_count`` of the ITL histogram
    over the window: exact, where ``itl_p50`` is only as fine as the buckets (every decode
    rate from 40 to 100 tok/s reads ~18 ms with vLLM's default 10 / 25 ms edges).

    The request breakdown (``sources/engines/breakdown.py``, same window): ``queue_time_*``,
    ``prefill_time_*``, ``decode_time_*``, ``e2e_latency_*`` and ``tpot_*`` (per-request time
    per output token) are p50 and mean seconds of the requests that *finished* in the window
    (``vllm:request_queue_time_seconds`` …; TTFT ≈ queue + prefill);
    ``prefill_computed_tps`` is the prompt tokens actually computed per second
    (``prompt_tokens_by_source{source="local_compute"}``, cache hits excluded) and
    ``prompt_tps_by_source`` every source's rate; ``waiting_capacity``/``waiting_deferred``
    split ``waiting`` by reason; ``requests_{finished,aborted,errored}_per_s`` come from
    ``request_success_total{finished_reason}``; ``admission_rejections_per_s`` from
    ``admission_rejections_total``; ``spec_accept_by_position[k]`` is the share of drafts
    whose token k was accepted (empty when not exported); ``retracted_reqs`` is SGLang's
    ``num_retracted_reqs``. Each is NA naming the metric when the server does not export it.
    The load the window's figures were measured under (what the expected row is computed
    for, :mod:`sparktop.sweep.expected.matched`): ``load_dist`` is ``(running, waiting, seconds)``,
    the time each pair of ``num_requests_running`` / ``num_requests_waiting`` readings held
    over the window (each interval between two scrapes split half to each end; empty before
    a second scrape); ``prompt_tokens_dist`` is ``(low, high, requests)`` per non-empty
    ``vllm:request_prompt_tokens`` bucket ``(low, high]`` over the window (requests that
    finished); ``first_token_prompt_tokens`` the mean prompt of the requests whose first
    token came in the window (Δ``prompt_tokens_total`` / Δ TTFT ``_count``: the population of
    the TTFT quantiles). ``window_start_s`` is the wall-clock time (``time_s``'s clock) of
    the window's first scrape: what node histories are matched against.
    """

    engine: str
    time_s: float
    state: EngineState = EngineState.OK
    message: str = ""
    since_s: float | None = None
    kind: str = "vllm"
    model: str = ""
    running: Num = NA()
    waiting: Num = NA()
    kv_usage: Num = NA()
    kv_pool_tokens: Num = NA()
    kv_pool_source: str = "unknown"
    kv_used_tokens: Num = NA()
    kv_free_tokens: Num = NA()
    kv_fill_tps: Num = NA()
    """KV tokens in use gained per second over the window (``kv_cache_usage_perc`` × pool,
    or SGLang's ``num_used_tokens``, at both ends); never negative: NA while the KV shrinks.
    A prompt being prefilled fills the KV chunk by chunk while vLLM counts its tokens
    (``prompt_tokens_total``, ``prefill_tps``) only once its first token is out, so a long
    prefill in progress shows here first."""
    kv_hit_tps: Num = NA()
    """Prompt tokens per second found in the prefix cache when requests were scheduled
    (Δ``vllm:prefix_cache_hits_total``): they enter the KV at once without prefill work."""
    kv_freed_tps: Num = NA()
    """Tokens per second the requests that finished in the window held in the KV: their
    prompts and outputs (Δ``_sum`` of ``vllm:request_prompt_tokens`` and
    ``request_generation_tokens``, observed when a request ends)."""
    preemptions_per_s: Num = NA()
    prefill_tps: Num = NA()
    decode_tps: Num = NA()
    ttft_p50: Quantile | NA = NA()
    ttft_p95: Quantile | NA = NA()
    itl_p50: Quantile | NA = NA()
    mean_prompt_tokens: Num = NA()
    prefix_hit_rate: Num = NA()
    spec_acceptance_rate: Num = NA()
    spec_mean_accept_len: Num = NA()
    max_model_len: Num = NA()
    max_num_seqs: Num = NA()
    max_num_batched_tokens: Num = NA()
    restarted: bool = False
    ranks: tuple[RankStats, ...] = ()
    latency_s: float | None = None
    extra: FloatMap = field(default_factory=lambda: MappingProxyType({}))
    window_s: float | None = None
    since_start: tuple[str, ...] = ()
    limit_sources: TextMap = field(default_factory=lambda: MappingProxyType({}))
    itl_mean_s: Num = NA()
    queue_time_p50: Quantile | NA = NA()
    queue_time_mean_s: Num = NA()
    prefill_time_p50: Quantile | NA = NA()
    prefill_time_mean_s: Num = NA()
    decode_time_p50: Quantile | NA = NA()
    decode_time_mean_s: Num = NA()
    e2e_latency_p50: Quantile | NA = NA()
    e2e_latency_mean_s: Num = NA()
    tpot_p50: Quantile | NA = NA()
    tpot_mean_s: Num = NA()
    prefill_computed_tps: Num = NA()
    prompt_tps_by_source: FloatMap = field(default_factory=lambda: MappingProxyType({}))
    waiting_capacity: Num = NA()
    waiting_deferred: Num = NA()
    requests_finished_per_s: Num = NA()
    requests_aborted_per_s: Num = NA()
    requests_errored_per_s: Num = NA()
    admission_rejections_per_s: Num = NA()
    spec_accept_by_position: tuple[float, ...] = ()
    retracted_reqs: Num = NA()
    load_dist: tuple[tuple[float, float, float], ...] = ()
    prompt_tokens_dist: tuple[tuple[float, float, float], ...] = ()
    first_token_prompt_tokens: Num = NA()
    window_start_s: float | None = None
    prefill_tps_now: Num = NA()
    decode_tps_now: Num = NA()
    """Prompt / generated tokens per second over the last :attr:`now_window_s` (about 3 s)
    where ``prefill_tps``/``decode_tps`` cover ``window_s`` (30 s in the monitor, kept for a
    stable figure): an engine that stops generating reads 0 here within seconds."""
    now_window_s: float | None = None
    """The span the ``*_now`` rates cover (None before a second scrape)."""
    server_version: str = ""
    """The server's own version (vLLM's ``GET /version``: ``0.32.0``); "" when it does not
    say. How it treats prompt + ``max_tokens`` over ``max_model_len`` depends on it
    (:mod:`sparktop.sweep.budget.ceiling`)."""
    first_tokens: tuple[tuple[float, float, float], ...] = ()
    """``(mean prompt tokens, requests, peak running)`` per scrape interval of the window in
    which requests got their first token (Δ``prompt_tokens_total`` / Δ TTFT ``_count``; the
    most requests running at a scrape of the window up to then): the TTFT quantiles'
    population, finer than ``first_token_prompt_tokens``
    (:func:`sparktop.sources.engines.window.first_tokens`)."""
    no_tokens_s: float | None = None
    """Seconds since ``vllm:generation_tokens_total`` or ``prompt_tokens_total`` last grew
    (the scrape clock; None when the page has no generation counter)."""
    kv_still_s: float | None = None
    """Seconds since the KV tokens in use last changed (None: no KV reading). A prefill in
    progress fills the KV chunk by chunk before vLLM counts any of its tokens."""
    model_root: str = ""
    """The checkpoint the server loaded (``/v1/models`` ``root`` of the base model, "" when
    not given or the same as ``model``): a ``--served-model-name`` alias hides it."""

    @property
    def ok(self) -> bool:
        return self.state is EngineState.OK

    @property
    def judged(self) -> bool:
        """True when the alert rules and the expected row read this sample: OK, or DEGRADED
        with a load gauge still usable (one refused gauge does not hide a full KV cache)."""
        if self.state is EngineState.OK:
            return True
        return self.state is EngineState.DEGRADED and any(
            is_num(v) for v in (self.running, self.waiting, self.kv_usage)
        )

    @property
    def answered(self) -> bool:
        """True when the page was read (OK, STALE or DEGRADED): its values are shown,
        flagged by the state, where the other states have nothing to show."""
        return self.state in ANSWERED

    @property
    def prefill_in_progress_tps(self) -> Num:
        """Tokens per second going into the KV cache that vLLM has not counted yet: a prompt
        still being prefilled. ``kv_fill_tps − (prefill_tps + decode_tps − kv_freed_tps)``.

        The KV gains what is prefilled and decoded and loses what finished requests held;
        vLLM counts a prompt (``prompt_tokens_total``) only once its first token is out, so
        KV growth beyond the counted prompts and decoded tokens less the freed ones is a
        prefill in progress (a long prompt, chunk by chunk). Prefix-cache hits fill the KV at
        scheduling with no prefill work (``kv_hit_tps``) and are taken off; as the prompt
        count holds them again later, the figure reads low, never high. NA when a figure is
        missing, while preemptions free KV that no counter shows, or nothing is left over;
        never more than the KV filled and freed together."""
        if is_num(self.preemptions_per_s) and self.preemptions_per_s > 0:
            return NA("preemptions free and refill the KV unseen by the counters")
        figures = (self.kv_fill_tps, self.prefill_tps, self.decode_tps, self.kv_freed_tps)
        for value in figures:
            if isinstance(value, NA):
                return value
        fill, prefill, decode, freed = (float(v) for v in figures)  # type: ignore[arg-type]
        hits = self.kv_hit_tps if is_num(self.kv_hit_tps) else 0.0
        left = min(fill - hits - (prefill + decode - freed), fill + freed - hits)
        return left if left > 0 else NA("the KV grew no faster than the counted tokens explain")


ANSWERED = frozenset({EngineState.OK, EngineState.STALE, EngineState.DEGRADED})
"""Engine states whose sample holds what the page said (see :attr:`EngineSample.answered`)."""
