"""Counters and histograms of a simulated vLLM engine, with vLLM's default buckets.

Bucket edges are vLLM's (``vllm/v1/metrics/loggers.py``): TTFT, inter-token latency,
request latency, and the 1-2-5 token-count buckets up to ``max_model_len``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip


def buckets_1_2_5(max_value: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, … up to ``max_value`` (vLLM's ``build_1_2_5_buckets``)."""
    out: list[float] = []
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale > max_value:
                return tuple(out)
            out.append(float(m * scale))
        scale *= 10


@dataclass(slots=True)
class Hist:
    """A cumulative histogram: per-bucket counts (last = +Inf), sum and count."""

    edges: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    sum: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.edges) + 1)

    def observe(self, value: float, n: int = 1) -> None:
        """Record ``n`` observations of ``value``."""
        if n <= 0:
            return
        self.counts[bisect.bisect_left(self.edges, value)] += n
        self.sum += value * n
        self.count += n

    def cumulative(self) -> list[tuple[str, float]]:
        """``[(le, cumulative count), …, ("+Inf", count)]`` as Prometheus exposes it."""
        out: list[tuple[str, float]] = []
        total = 0
        for edge, c in zip(self.edges, self.counts, strict=False):
            total += c
            out.append((repr(float(edge)), float(total)))
        out.append(("+Inf", float(self.count)))
        return out


FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
"""vLLM's ``FinishReason`` values: every one is a ``finished_reason`` series from the start."""

PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
"""``vllm:prompt_tokens_by_source_total`` sources (the simulator has no KV transfer)."""

ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
"""``vllm:admission_rejections_total`` reasons (the simulator never refuses a request)."""

SPEC_TOKENS = 5
"""Speculative tokens per draft: both seed clusters run MTP with 5."""


@dataclass(slots=True)
class EngineStats:
    """Everything a vLLM engine counts since it started (reset on restart)."""

    max_model_len: int
    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    success: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FINISH_REASONS, 0))
    ttft: Hist = field(default_factory=lambda: Hist(TTFT_BUCKETS_S))
    itl: Hist = field(default_factory=lambda: Hist(ITL_BUCKETS_S))
    e2e: Hist = field(default_factory=lambda: Hist(REQUEST_LATENCY_BUCKETS_S))
    queue: Hist = field(default_factory=lambda: Hist(REQUEST_LATENCY_BUCKETS_S))
    prefill: Hist = field(default_factory=lambda: Hist(REQUEST_LATENCY_BUCKETS_S))
    decode: Hist = field(default_factory=lambda: Hist(REQUEST_LATENCY_BUCKETS_S))
    inference: Hist = field(default_factory=lambda: Hist(REQUEST_LATENCY_BUCKETS_S))
    tpot: Hist = field(default_factory=lambda: Hist(ITL_BUCKETS_S))
    prompt_by_source: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(PROMPT_SOURCES, 0)
    )
    admission_rejections: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(ADMISSION_REASONS, 0)
    )
    spec_drafts: float = 0.0
    spec_accepted_pos: list[float] = field(default_factory=lambda: [0.0] * SPEC_TOKENS)
    # What llama.cpp counts (its page, :mod:`sparktop.sim.llamacpp`): seconds each request
    # spent in prefill and in decode summed over requests, steps with a request running
    # (its llama_decode() calls), the requests running summed over those steps, and the
    # longest sequence (prompt + generated) finished.
    slot_prefill_s: float = 0.0
    slot_decode_s: float = 0.0
    decode_calls: int = 0
    busy_slot_steps: int = 0
    tokens_max: int = 0
    prompt_len: Hist = field(init=False)
    generation_len: Hist = field(init=False)
    max_tokens: Hist = field(init=False)

    @property
    def spec_accepted(self) -> float:
        return sum(self.spec_accepted_pos)

    def draft(self, tokens: int, accept: float) -> None:
        """Account ``tokens`` generated by MTP drafts of :data:`SPEC_TOKENS` tokens whose
        position k is accepted with probability ``accept ** (k + 1)`` (each accepted token
        needs the ones before it). A draft yields 1 + its accepted tokens."""
        shares = [accept ** (k + 1) for k in range(SPEC_TOKENS)]
        drafts = tokens / (1.0 + sum(shares))
        self.spec_drafts += drafts
        for k, share in enumerate(shares):
            self.spec_accepted_pos[k] += drafts * share

    def __post_init__(self) -> None:
        token_buckets = buckets_1_2_5(self.max_model_len)
        self.prompt_len = Hist(token_buckets)
        self.generation_len = Hist(token_buckets)
        self.max_tokens = Hist(token_buckets)
