"""A vLLM-shaped ``/metrics`` page whose load the test controls, built with prometheus_client.

Metric names, labels (``model_name``, ``engine``) and default buckets are vLLM's
(``vllm/v1/metrics/loggers.py``: TTFT 22 edges up to 2560 s, inter-token latency 19 edges up
to 80 s, request latency 21 edges, KV-block residency 21 edges, 1-2-5 token buckets up to
``max_model_len``): the TTFT, inter-token and request-latency edges and the 1-2-5 token
buckets are the simulator's own table (:mod:`sparktop.sim.stats`), so tests and simulator
cannot drift apart; the families only tests export keep their edges here.
``full=True`` adds the families sparktop ignores, so a page is as long as a real one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    Summary,
    generate_latest,
)
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from sparktop.sim.stats import ITL_BUCKETS_S as ITL_BUCKETS
from sparktop.sim.stats import REQUEST_LATENCY_BUCKETS_S as LATENCY_BUCKETS
from sparktop.sim.stats import TTFT_BUCKETS_S as TTFT_BUCKETS
from sparktop.sim.stats import buckets_1_2_5

ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
RESIDENCY_BUCKETS = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300,
    600, 1200, 1800,
)  # fmt: skip
HTTP_HIGHR_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    7.5, 10.0, 30.0, 60.0,
)  # fmt: skip
PREFILL_PER_TOKEN_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
NIXL_TIME_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)
NIXL_DESCRIPTOR_BUCKETS = (10, 20, 30, 50, 75, 100, 200, 400, 1000, 2000, 4000, 10000, 20000, 50000)
SPEC_POSITIONS = 5
LABELS = ("model_name", "engine")


def spread(low: float, high: float, n: int) -> list[float]:
    """``n`` values evenly spread over (low, high]: uniform inside every bucket they cross."""
    return [low + (high - low) * (i + 0.5) / n for i in range(n)]


@dataclass
class Load:
    """What one engine does per second while the page advances."""

    prefill_tps: float = 0.0
    decode_tps: float = 0.0
    preemptions_per_s: float = 0.0
    requests_per_s: float = 0.0
    ttft_range_s: tuple[float, float] = (0.1, 1.0)
    itl_range_s: tuple[float, float] = (0.05, 0.1)
    prompt_tokens: int = 1000


class FakeVllm:
    """The metrics of a vLLM server with ``engines`` data-parallel engines."""

    def __init__(
        self,
        *,
        engines: int = 1,
        model: str = "dsv4-flash",
        max_model_len: int = 1_048_576,
        num_gpu_blocks: int | str = 9740,
        block_size: int = 256,
        kv_cache_size_tokens: int | None = None,
        full: bool = False,
        spec_decode: bool = False,
    ) -> None:
        self.registry = CollectorRegistry()
        self.model = model
        self.engines = [str(i) for i in range(engines)]
        self.load = {e: Load() for e in self.engines}
        r = self.registry
        self.running = Gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            LABELS,
            registry=r,
        )
        self.waiting = Gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            LABELS,
            registry=r,
        )
        self.kv = Gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            LABELS,
            registry=r,
        )
        self.prompt = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", LABELS, registry=r
        )
        self.gen = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", LABELS, registry=r
        )
        self.preempt = Counter(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            LABELS,
            registry=r,
        )
        self.pq = Counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            LABELS,
            registry=r,
        )
        self.ph = Counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            LABELS,
            registry=r,
        )
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            LABELS,
            buckets=TTFT_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            LABELS,
            buckets=ITL_BUCKETS,
            registry=r,
        )
        tokens = buckets_1_2_5(max_model_len)
        self.prompt_len = Histogram(
            "vllm:request_prompt_tokens",
            "Number of prefill tokens processed.",
            LABELS,
            buckets=tokens,
            registry=r,
        )
        self.spec: tuple[Counter, Counter, Counter] | None = None
        if spec_decode:
            self.spec = (
                Counter(
                    "vllm:spec_decode_num_drafts",
                    "Number of spec decoding drafts.",
                    LABELS,
                    registry=r,
                ),
                Counter(
                    "vllm:spec_decode_num_draft_tokens",
                    "Number of draft tokens.",
                    LABELS,
                    registry=r,
                ),
                Counter(
                    "vllm:spec_decode_num_accepted_tokens",
                    "Number of accepted tokens.",
                    LABELS,
                    registry=r,
                ),
            )
        info = {
            "block_size": str(block_size),
            "num_gpu_blocks": str(num_gpu_blocks),
            "cache_dtype": "auto",
        }
        if kv_cache_size_tokens is not None:
            info["kv_cache_size_tokens"] = str(kv_cache_size_tokens)
        cache = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            [*info, "engine"],
            registry=r,
        )
        for e in self.engines:
            cache.labels(**info, engine=e).set(1)
            for metric in (
                self.running,
                self.waiting,
                self.kv,
                self.prompt,
                self.gen,
                self.preempt,
                self.pq,
                self.ph,
            ):
                metric.labels(model, e)
            for hist in (self.ttft, self.itl, self.prompt_len):
                hist.labels(model, e)
        self._others: list[tuple[Histogram | Counter, float]] = []
        if full:
            self._add_full_page(tokens)

    def _add_full_page(self, tokens: Sequence[float]) -> None:
        """The rest of a recent vLLM page (loggers.py with ``--kv-cache-metrics``)."""
        r = self.registry
        hist_specs = [
            ("vllm:request_time_per_output_token_seconds", ITL_BUCKETS),
            ("vllm:e2e_request_latency_seconds", LATENCY_BUCKETS),
            ("vllm:request_queue_time_seconds", LATENCY_BUCKETS),
            ("vllm:request_inference_time_seconds", LATENCY_BUCKETS),
            ("vllm:request_prefill_time_seconds", LATENCY_BUCKETS),
            ("vllm:request_decode_time_seconds", LATENCY_BUCKETS),
            ("vllm:request_generation_tokens", tokens),
            ("vllm:request_params_max_tokens", tokens),
            ("vllm:request_max_num_generation_tokens", tokens),
            ("vllm:iteration_tokens_total", ITERATION_BUCKETS),
            ("vllm:request_params_n", (1, 2, 5, 10, 20)),
            ("vllm:kv_block_lifetime_seconds", RESIDENCY_BUCKETS),
            ("vllm:kv_block_idle_before_evict_seconds", RESIDENCY_BUCKETS),
            ("vllm:kv_block_reuse_gap_seconds", RESIDENCY_BUCKETS),
            ("vllm:request_prefill_kv_computed_tokens", tokens),
            ("vllm:time_per_prefill_token_request_seconds", PREFILL_PER_TOKEN_BUCKETS),
            # NIXL KV-connector transfers (disaggregated prefill), NixlPromMetrics
            ("vllm:nixl_xfer_time_seconds", NIXL_TIME_BUCKETS[1:]),
            ("vllm:nixl_post_time_seconds", NIXL_TIME_BUCKETS),
            ("vllm:nixl_bytes_transferred", tuple(2 ** (10 + i) for i in range(1, 25, 2))),
            ("vllm:nixl_num_descriptors", NIXL_DESCRIPTOR_BUCKETS),
        ]
        for name, buckets in hist_specs:
            hist = Histogram(name, name, LABELS, buckets=buckets, registry=r)
            for e in self.engines:
                hist.labels(self.model, e).observe(float(buckets[len(buckets) // 2]))
        for name in (
            "vllm:external_prefix_cache_queries",
            "vllm:external_prefix_cache_hits",
            "vllm:mm_cache_queries",
            "vllm:mm_cache_hits",
            "vllm:prompt_tokens_cached",
            "vllm:prompt_tokens_recomputed",
            "vllm:nixl_num_failed_transfers",
            "vllm:nixl_num_failed_notifications",
            "vllm:nixl_num_kv_expired_reqs",
            "vllm:corrupted_requests",
        ):
            counter = Counter(name, name, LABELS, registry=r)
            for e in self.engines:
                counter.labels(self.model, e).inc(7)
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*LABELS, "finished_reason"],
            registry=r,
        )
        # Deprecated names vLLM still serves with --show-hidden-metrics-for-version.
        hidden_tpot = Histogram(
            "vllm:time_per_output_token_seconds",
            "TPOT (hidden)",
            LABELS,
            buckets=ITL_BUCKETS,
            registry=r,
        )
        hidden: list[Gauge | Counter] = [
            Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage (hidden)", LABELS, registry=r)
        ]
        hidden += [
            Counter(f"vllm:gpu_prefix_cache_{kind}", "hidden", LABELS, registry=r)
            for kind in ("queries", "hits")
        ]
        per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [*LABELS, "position"],
            registry=r,
        )
        for e in self.engines:
            hidden_tpot.labels(self.model, e).observe(0.02)
            for metric in hidden:
                metric.labels(self.model, e)
            for pos in range(SPEC_POSITIONS):
                per_pos.labels(self.model, e, str(pos)).inc(10 - pos)
        self._add_http_families()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=r)
        sleep = Gauge(
            "vllm:engine_sleep_state", "Engine sleep state", [*LABELS, "sleep_state"], registry=r
        )
        for e in self.engines:
            for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
                sleep.labels(self.model, e, state).set(value)
            for reason in ("stop", "length", "abort", "error"):
                success.labels(self.model, e, reason).inc(3)

    def _add_http_families(self) -> None:
        """The API server's request metrics (prometheus-fastapi-instrumentator, on vLLM's page)."""
        r = self.registry
        handlers = (
            "/v1/completions",
            "/v1/chat/completions",
            "/metrics",
            "/health",
            "/v1/models",
            "/tokenize",
            "/detokenize",
            "/version",
            "/ping",
            "/v1/responses",
            "/load",
        )
        total = Counter(
            "http_requests", "Total number of requests", ["handler", "method", "status"], registry=r
        )
        size = Summary("http_request_size_bytes", "Request size", ["handler"], registry=r)
        rsize = Summary("http_response_size_bytes", "Response size", ["handler"], registry=r)
        highr = Histogram(
            "http_request_duration_highr_seconds",
            "Latency (high resolution)",
            buckets=HTTP_HIGHR_BUCKETS,
            registry=r,
        )
        latency = Histogram(
            "http_request_duration_seconds",
            "Latency",
            ["handler", "method"],
            buckets=(0.1, 0.5, 1.0),
            registry=r,
        )
        for h in handlers:
            method = "POST" if h.startswith(("/v1/c", "/v1/r", "/tok", "/detok")) else "GET"
            total.labels(h, method, "2xx").inc(5)
            size.labels(h).observe(100)
            rsize.labels(h).observe(1000)
            latency.labels(h, method).observe(0.05)
        highr.observe(0.05)

    def set_gauges(
        self, engine: str = "0", *, running: float, waiting: float, kv_usage: float
    ) -> None:
        self.running.labels(self.model, engine).set(running)
        self.waiting.labels(self.model, engine).set(waiting)
        self.kv.labels(self.model, engine).set(kv_usage)

    def advance(self, seconds: float, engines: Iterable[str] | None = None) -> None:
        """Let ``seconds`` of each engine's :class:`Load` happen (counters and observations)."""
        for e in engines or self.engines:
            load = self.load[e]
            self.prompt.labels(self.model, e).inc(load.prefill_tps * seconds)
            self.gen.labels(self.model, e).inc(load.decode_tps * seconds)
            self.preempt.labels(self.model, e).inc(load.preemptions_per_s * seconds)
            self.pq.labels(self.model, e).inc(load.prefill_tps * seconds)
            self.ph.labels(self.model, e).inc(load.prefill_tps * seconds / 4)
            n = round(load.requests_per_s * seconds)
            for value in spread(*load.ttft_range_s, n):
                self.ttft.labels(self.model, e).observe(value)
            for value in spread(*load.itl_range_s, n * 10):
                self.itl.labels(self.model, e).observe(value)
            for _ in range(n):
                self.prompt_len.labels(self.model, e).observe(load.prompt_tokens)
            if self.spec is not None:
                drafts, draft_tokens, accepted = self.spec
                drafts.labels(self.model, e).inc(100 * seconds)
                draft_tokens.labels(self.model, e).inc(300 * seconds)
                accepted.labels(self.model, e).inc(180 * seconds)

    def page(self, *, openmetrics: bool = False) -> bytes:
        if openmetrics:
            body: bytes = generate_openmetrics(self.registry)  # type: ignore[no-untyped-call]
            return body
        return generate_latest(self.registry)
