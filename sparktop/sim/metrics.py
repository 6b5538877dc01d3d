"""The ``/metrics`` page of a simulated engine, produced with ``prometheus_client``.

A custom collector yields vLLM's families from the engine's current state (names, HELP
texts, labels ``model_name``/``engine`` and default buckets as in vLLM's
``vllm/v1/metrics/loggers.py`` and ``vllm/v1/spec_decode/metrics.py``; MTP with 5 speculative
tokens), so a restart that replaces the state resets every counter. Held to a real vLLM
0.32.0 page by ``tests/test_sim_vs_real_page.py``: every family and label emitted here
exists there with the same type and label names (spec decoding excepted, which the real
server was not run with); like the real page, counters and histograms carry ``_created``
series, ``admission_rejections`` has no ``engine`` label, and ``cache_config_info`` has
0.32's 37 labels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from sparktop.sim.engine import EngineModel
from sparktop.sim.stats import SPEC_TOKENS, Hist

LABELS = ["engine", "model_name"]


class EngineCollector(Collector):
    """Yields the vLLM families of one engine; ``epoch`` maps simulated time to Unix time."""

    def __init__(self, engine: EngineModel, epoch: Callable[[float], float]) -> None:
        self.engine = engine
        self.epoch = epoch

    def collect(self) -> Iterator[Metric]:
        e = self.engine
        s = e.stats
        lim = e.limits
        values = ["0", e.model_name]

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=LABELS)
            g.add_metric(values, value)
            return g

        created = self.epoch(e.started_s)

        def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
            c = CounterMetricFamily(name, doc, labels=LABELS)
            c.add_metric(values, value, created=created)
            return c

        def hist(name: str, doc: str, h: Hist) -> HistogramMetricFamily:
            f = HistogramMetricFamily(name, doc, labels=LABELS)
            f.add_metric(values, h.cumulative(), h.sum)
            # prometheus_client's histogram family takes no created time; vLLM's has one.
            f.samples.append(
                Sample(f"{name}_created", dict(zip(LABELS, values, strict=True)), created)
            )
            return f

        start = GaugeMetricFamily(
            "process_start_time_seconds", "Start time of the process since unix epoch in seconds."
        )
        start.add_metric([], created)
        yield start
        yield gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            len(e.running),
        )
        yield gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            len(e.waiting),
        )
        by_reason = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
            "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
            "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
            labels=[*LABELS, "reason"],
        )
        # The simulated scheduler holds requests back only for room (sequence slots or KV
        # blocks); it has none of the reasons vLLM defers for (grammar, remote KV, LoRA).
        by_reason.add_metric([*values, "capacity"], len(e.waiting))
        by_reason.add_metric([*values, "deferred"], 0)
        yield by_reason
        yield gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", e.kv_usage
        )
        yield counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            s.prefix_queries,
        )
        yield counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            s.prefix_hits,
        )
        yield counter(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            s.preemptions,
        )
        yield counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.prompt_tokens)
        yield counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", s.generation_tokens
        )

        def labelled(
            name: str, doc: str, label: str, counts: Mapping[str, float], per_engine: bool = True
        ) -> Metric:
            names, base = (LABELS, values) if per_engine else (LABELS[1:], values[1:])
            c = CounterMetricFamily(name, doc, labels=[*names, label])
            for value, count in counts.items():
                c.add_metric([*base, value], float(int(count)), created=created)
            return c

        yield labelled(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            "source",
            s.prompt_by_source,
        )
        yield labelled(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            "reason",
            s.admission_rejections,
            per_engine=False,  # vLLM 0.32 counts admission in the API server, not per engine
        )
        yield counter(
            "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", int(s.spec_drafts)
        )
        yield counter(
            "vllm:spec_decode_num_draft_tokens",
            "Number of draft tokens.",
            int(s.spec_drafts) * SPEC_TOKENS,
        )
        yield counter(
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            sum(int(a) for a in s.spec_accepted_pos),
        )
        yield labelled(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            "position",
            {str(k): a for k, a in enumerate(s.spec_accepted_pos)},
        )
        success = CounterMetricFamily(
            "vllm:request_success",
            "Count of successfully processed requests.",
            labels=[*LABELS, "finished_reason"],
        )
        for reason, count in s.success.items():
            success.add_metric([*values, reason], count, created=created)
        yield success
        yield hist(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", s.prompt_len
        )
        yield hist(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            s.generation_len,
        )
        yield hist(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            s.max_tokens,
        )
        yield hist(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            s.ttft,
        )
        yield hist(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            s.itl,
        )
        yield hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            s.tpot,
        )
        yield hist(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            s.e2e,
        )
        yield hist(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            s.queue,
        )
        yield hist(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            s.inference,
        )
        yield hist(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            s.prefill,
        )
        yield hist(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            s.decode,
        )
        info = cache_config_labels(
            block_size=lim.block_size,
            num_gpu_blocks=lim.num_gpu_blocks,
            kv_pool_tokens=lim.kv_pool_tokens,
            max_model_len=lim.max_model_len,
        )
        cache = GaugeMetricFamily(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labels=list(info),
        )
        cache.add_metric(list(info.values()), 1.0)
        yield cache


def cache_config_labels(
    *, block_size: int, num_gpu_blocks: int, kv_pool_tokens: int, max_model_len: int
) -> dict[str, str]:
    """``vllm:cache_config_info``'s labels as vLLM 0.32.0 exports them (all 37), with the
    simulated engine's sizes; the others are 0.32's defaults for an fp8 attention model."""
    return {
        "_block_size_resolved": "True",
        "block_size": str(block_size),
        "cache_dtype": "fp8",
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": str(block_size),
        "enable_mamba_shared_prefix_checkpoint": "False",
        "enable_prefix_caching": "True",
        "engine": "0",
        "gpu_memory_utilization": "0.83",
        "hash_block_size": "None",
        "is_attention_free": "False",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": f"{kv_pool_tokens / max_model_len:.4f}",
        "kv_cache_memory_bytes": "None",
        "kv_cache_size_tokens": str(kv_pool_tokens),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "auto",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_cache_retention_interval": "0",
        "prefix_caching_hash_algo": "sha256",
        "prefix_match_unit": "None",
        "replayssm_buffer_len": "16",
        "skip_page_size_padded": "None",
        "sliding_window": "None",
        "swa_bounded_replay": "True",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "False",
    }


def engine_registry(collector: EngineCollector) -> CollectorRegistry:
    """A registry holding only this engine's families (one registry per engine)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
