"""SGLang (``--enable-metrics``): its ``/metrics`` families (``sglang/srt/metrics/collector.py``),
ranks by ``dp_rank``; its limits are gauges (``context_len``, ``max_running_requests``,
``max_prefill_tokens``) and so is its KV pool (``max_total_num_tokens``, else
``num_used_tokens`` ÷ ``token_usage``); the prefix-cache hit rate and speculative acceptance
are gauges over its own recent steps. ``/tokenize`` as vLLM's."""

from __future__ import annotations

from sparktop.sources.engines.kinds.spec import KindSpec, PromQL

SPEC = KindSpec(
    kind="sglang",
    label="SGLang",
    metric_prefix="sglang:",
    gauges={
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_usage": ("sglang:token_usage",),
        "pool_tokens": ("sglang:max_total_num_tokens",),
        "used_tokens": ("sglang:num_used_tokens",),
        "hit_rate": ("sglang:cache_hit_rate",),
        "max_model_len": ("sglang:context_len",),
        "max_num_seqs": ("sglang:max_running_requests",),
        # SGLang's --max-prefill-tokens: the token budget of one prefill batch
        "max_num_batched_tokens": ("sglang:max_prefill_tokens",),
        "free_tokens": ("sglang:kv_available_tokens",),
        # requests retracted (SGLang's preemption) in the most recent batch
        "retracted": ("sglang:num_retracted_reqs",),
        # SGLang exports acceptance as gauges over its own recent steps, not counters
        "spec_accept_rate": ("sglang:spec_accept_rate",),
        "spec_accept_length": ("sglang:spec_accept_length",),
    },
    counters={
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
        "preemptions": ("sglang:num_retracted_requests_total",),
    },
    histograms={
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "queue": ("sglang:queue_time_seconds",),
        "e2e": ("sglang:e2e_request_latency_seconds",),
    },
    recent_gauges=True,
    promql=PromQL(
        rates={
            "prefill_tps": "sglang:prompt_tokens_total",
            "decode_tps": "sglang:generation_tokens_total",
            "preemptions_per_s": "sglang:num_retracted_requests_total",
            "itl_sum": "sglang:(inter_token_latency|time_per_output_token)_seconds_sum",
            "itl_count": "sglang:(inter_token_latency|time_per_output_token)_seconds_count",
        },
        quantiles={
            "ttft_p50": (0.5, "sglang:time_to_first_token_seconds"),
            "ttft_p95": (0.95, "sglang:time_to_first_token_seconds"),
            "itl_p50": (0.5, "sglang:(inter_token_latency|time_per_output_token)_seconds"),
        },
        rank_label="dp_rank",
    ),
    limits={
        "max_model_len": "sglang:context_len",
        "max_num_seqs": "sglang:max_running_requests",
        "max_num_batched_tokens": "sglang:max_prefill_tokens",
    },
    pool_from=("pool_gauge", "used_over_usage"),
    metrics_404="metrics disabled: {hint}",
    metrics_hint="start SGLang with --enable-metrics",
    pool_unknown=(
        "KV pool unknown: no sglang:max_total_num_tokens, and nothing in use to derive it "
        "from (num_used_tokens ÷ token_usage); set kv_pool_tokens in the inventory"
    ),
)
