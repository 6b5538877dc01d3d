"""Immutable samples shared by every source, the cluster state, alerts and the UI.

Everything here is Textual-free and frozen. A value a GPU or server does not provide is an
:class:`NA` that keeps the reason text (``[N/A]``, ``Not Supported``, ``metric absent``…);
it formats as ``n/a`` and is never silently turned into 0.
"""

from __future__ import annotations

import enum
import functools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeAlias, runtime_checkable

from sparktop.hostmodel import FabricReading, GpuProcess, PowerTelemetry
from sparktop.values import HUGE, bounded
from sparktop.values import NA as NA
from sparktop.values import FloatMap as FloatMap
from sparktop.values import Num as Num
from sparktop.values import TextMap as TextMap
from sparktop.values import fmt_num as fmt_num
from sparktop.values import is_num as is_num
from sparktop.values import num_or as num_or
from sparktop.values import sort_key as sort_key

# -- clock-event (throttle) reasons ------------------------------------------------------------

CLOCK_EVENT_BITS: Mapping[int, str] = MappingProxyType(
    {
        0x1: "gpu_idle",
        0x2: "applications_clocks_setting",
        0x4: "sw_power_cap",
        0x8: "hw_slowdown",
        0x10: "sync_boost",
        0x20: "sw_thermal_slowdown",
        0x40: "hw_thermal_slowdown",
        0x80: "hw_power_brake_slowdown",
        0x100: "display_clock_setting",
    }
)
"""NVML ``nvmlClocksEventReason*`` bit values (nvml.h; same as ``clocks_event_reasons.active``)."""

BENIGN_CLOCK_EVENTS: frozenset[str] = frozenset(
    {"gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"}
)
"""Reasons that explain a lower clock without being a slowdown worth an alarm."""


@functools.lru_cache(maxsize=256)
def decode_clock_events(mask: int) -> tuple[str, ...]:
    """Decode an NVML clock-event mask into reason names, lowest bit first.

    Bits NVML does not define are reported as one ``other(0x…)`` entry.
    """
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_BITS)
    if unknown:
        names.append(f"other({unknown:#x})")
    return tuple(names)


@functools.lru_cache(maxsize=256)
def slowdown_reasons(mask: int) -> tuple[str, ...]:
    """Only the reasons that mean a slowdown (thermal, power cap, HW slowdown, power brake)."""
    return tuple(r for r in decode_clock_events(mask) if r not in BENIGN_CLOCK_EVENTS)


# -- node / GPU samples ------------------------------------------------------------------------


class NodeState(enum.StrEnum):
    """What a node's last poll amounted to."""

    OK = "ok"
    NO_GPU = "no GPU visible"
    NO_DRIVER = "no NVIDIA driver"
    DRIVER_MISMATCH = "driver/library mismatch"
    UNREACHABLE = "unreachable"
    HOST_KEY = "host key not trusted"
    AUTH = "authentication failed"
    GARBLED = "unreadable output"
    GPU_UNAVAILABLE = "GPU data unavailable"
    """SSH answered (the node is up) but nvidia-smi failed: NVML could not initialise, or
    another non-zero exit; the message is nvidia-smi's reason (``NVML: Unknown Error``)."""
    NOT_ANSWERING = "nvidia-smi not answering"
    """The SSH connection works but nvidia-smi did not finish (a hung driver or GPU)."""
    SSH_NOT_ANSWERING = "SSH not answering"
    """The node accepted the TCP connection but SSH did not answer in time (a hung sshd or
    host), as against UNREACHABLE: refused, or no connection at all."""
    ERROR = "error"

    @property
    def is_failure(self) -> bool:
        return self is not NodeState.OK


IMPLAUSIBLE = "implausible: "
"""How a reading refused as outside its plausible range begins (the source's NA reason, e.g.
:func:`sparktop.sources.nvsmi.cells.plausible`); :attr:`GpuSample.implausible` finds them."""


@dataclass(frozen=True, slots=True)
class SlowdownCounters:
    """Cumulative time spent in each slowdown, µs (``clocks_event_reasons_counters.*``)."""

    sw_thermal_us: Num = NA("not queried")
    hw_thermal_us: Num = NA("not queried")
    sw_power_cap_us: Num = NA("not queried")
    hw_power_brake_us: Num = NA("not queried")


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU as seen by one poll.

    Source: ``nvidia-smi --query-gpu`` columns (mapped by header name) or NVML calls.
    ``memory_*_mib`` are NA on GB10 (unified memory, ``[N/A]``); use :class:`NodeMemory`.
    ``process_memory_mib`` is the sum of ``--query-compute-apps`` ``used_memory`` on this GPU.
    """

    index: int
    uuid: str
    name: str
    sm_clock_mhz: Num = NA()
    max_sm_clock_mhz: Num = NA()
    temperature_c: Num = NA()
    power_w: Num = NA()
    utilization_pct: Num = NA()
    memory_used_mib: Num = NA()
    memory_total_mib: Num = NA()
    pstate: str | NA = NA()
    clock_event_mask: int | NA = NA()
    counters: SlowdownCounters = SlowdownCounters()
    process_memory_mib: Num = NA()

    @property
    def key(self) -> str:
        """Stable key within a node: the UUID, else the index."""
        return self.uuid or f"gpu{self.index}"

    @property
    def implausible(self) -> tuple[str, ...]:
        """The reasons of the readings refused as implausible (``implausible: …``), in field
        order; empty when every reading is in its range or simply missing."""
        values = (
            self.sm_clock_mhz, self.max_sm_clock_mhz, self.temperature_c, self.power_w,
            self.utilization_pct, self.memory_used_mib, self.memory_total_mib,
            self.counters.sw_thermal_us, self.counters.hw_thermal_us,
            self.counters.sw_power_cap_us, self.counters.hw_power_brake_us,
        )  # fmt: skip
        return tuple(
            v.reason for v in values if isinstance(v, NA) and v.reason.startswith(IMPLAUSIBLE)
        )

    @property
    def clock_events(self) -> tuple[str, ...]:
        """Decoded active clock-event reasons (empty when unknown or none)."""
        mask = self.clock_event_mask
        return decode_clock_events(mask) if isinstance(mask, int) else ()

    @property
    def slowdowns(self) -> tuple[str, ...]:
        """Active reasons that are real slowdowns."""
        mask = self.clock_event_mask
        return slowdown_reasons(mask) if isinstance(mask, int) else ()


@dataclass(frozen=True, slots=True)
class NodeMemory:
    """Host memory of a node; on unified-memory machines (GB10) this is the GPU's memory too.

    Source: ``/proc/meminfo`` (``MemTotal − MemAvailable``) or psutil. ``gpu_held_mib`` is the
    sum of per-process GPU memory (``--query-compute-apps used_memory`` or NVML).
    Pressure (the slow tier): ``available_mib`` is ``MemAvailable``, ``swap_used_mib``
    ``SwapTotal − SwapFree`` (MiB); ``psi_some_pct`` / ``psi_full_pct`` the ``avg10`` share of
    the last 10 s in which some / all tasks stalled on memory, % (``/proc/pressure/memory``;
    NA with the reason on kernels without PSI).
    """

    total_mib: Num = NA()
    used_mib: Num = NA()
    gpu_held_mib: Num = NA()
    unified: bool = False
    read_s: float | None = None
    """When these values were read (wall clock) if that is before the sample they came with:
    the slow tier that refreshes them beside a GPU stream failed (``stale_reason`` says how).
    None: read for this sample."""
    stale_reason: str | None = None
    available_mib: Num = NA("not read")
    swap_total_mib: Num = NA("not read")
    swap_used_mib: Num = NA("not read")
    psi_some_pct: Num = NA("not read")
    psi_full_pct: Num = NA("not read")


@dataclass(frozen=True, slots=True)
class NodeSample:
    """The result of polling one node once: GPUs and memory, or a failure state.

    ``time_s`` is wall-clock (``time.time()``); ``since_s`` is when the current failure began
    (None when OK); ``latency_s`` is how long the probe took; ``raw`` the probe's output (for
    the detail screen, truncated). ``cpu_pct`` is host CPU use over all cores since the
    previous sample, % (psutil; only the local source reads it). ``probe`` says how an SSH
    node was read: ``stream (nvidia-smi -lms 1000)``, ``one-shot``, or ``one-shot: <why the
    stream is not used>`` (empty for other sources and for failures before any output).
    ``fabric`` is the RDMA ports (``/sys/class/infiniband``), ``power`` the ``spark_hwmon``
    (``spbm``) driver's channels, ``processes`` the GPU's compute processes, newest first
    (all from the slow tier; see :mod:`sparktop.hostmodel`).

    A source that backs off after a failure answers the polls in between with that failure
    again without re-checking: ``checked_s`` is then when it last really tried (wall clock;
    None when this poll tried), and ``retry_s`` when it will try next (wall clock; None when
    every poll tries). :func:`recheck_text` says both in words.
    """

    node: str
    time_s: float
    state: NodeState = NodeState.OK
    message: str = ""
    since_s: float | None = None
    gpus: tuple[GpuSample, ...] = ()
    memory: NodeMemory = NodeMemory()
    latency_s: float | None = None
    raw: str = ""
    driver_version: str = ""
    cpu_pct: Num = NA("not measured")
    probe: str = ""
    fabric: FabricReading = FabricReading()
    power: PowerTelemetry = field(default_factory=PowerTelemetry)
    processes: tuple[GpuProcess, ...] = ()
    checked_s: float | None = None
    retry_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.state is NodeState.OK


# -- engine samples ----------------------------------------------------------------------------


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

Sample: TypeAlias = NodeSample | EngineSample


@runtime_checkable
class Source(Protocol):
    """Anything that can be polled: an SSH node, the local machine, an engine, a fake.

    ``sample()`` never raises for remote failures: it returns a sample whose state says what
    went wrong. ``aclose()`` releases connections.
    """

    name: str
    kind: str
    """``"node"`` (its samples are :class:`NodeSample`) or ``"engine"`` (:class:`EngineSample`)."""

    async def sample(self) -> Sample: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class PacedSource(Source, Protocol):
    """A source that reads at the poller's period itself (an SSH node's GPU stream).

    ``follow_interval`` is called when polling starts and whenever the period changes;
    while ``self_paced`` is true, ``sample()`` waits for the next reading, so the poller
    polls again at once instead of waiting on top of it.
    """

    def follow_interval(self, interval_s: float) -> None: ...

    @property
    def self_paced(self) -> bool: ...


def failure_text(state: str, message: str, since_s: float | None = None) -> str:
    """One line for a source that did not answer: ``unreachable since 14:01:58: connection
    refused`` (``since_s``: Unix seconds, shown as local ``HH:MM:SS``), ``stale: …`` without
    it, the message alone when it already starts with the state, the state alone without a
    message. A sample's ``message`` holds the cause only; this is where "since" is added."""
    head = (
        state
        if since_s is None
        else f"{state} since {time.strftime('%H:%M:%S', time.localtime(since_s))}"
    )
    if not message or message == state:
        return head
    if message.lower().startswith(state.lower()):
        return message
    return f"{head}: {message}"


def recheck_text(sample: NodeSample, *, compact: bool = False) -> str:
    """When a failed node was last really tried and when it is tried next, relative to the
    poll (``sample.time_s``): ``checked 12 s ago, next try in 9 s``; ``next try in 4 s``
    when this poll tried; ``""`` for a source that tries every poll (no ``retry_s``).
    ``compact`` (a Nodes row, after the cause): ``12 s ago, retry in 9 s``."""
    if sample.retry_s is None:
        return ""
    wait_s = sample.retry_s - sample.time_s
    word = "retry" if compact else "next try"
    retry = f"{word} now" if wait_s < 0.5 else f"{word} in {wait_s:.0f} s"
    if sample.checked_s is None:
        return retry
    ago_s = max(0.0, sample.time_s - sample.checked_s)
    ago = "just now" if ago_s < 0.5 else f"{ago_s:.0f} s ago"
    return f"{ago}, {retry}" if compact else f"checked {ago}, {retry}"
