"""vLLM: its ``/metrics`` families (DESIGN.md §5 and vLLM's ``vllm/v1/metrics/loggers.py``),
aliases new name first (``kv_cache_usage_perc`` | ``gpu_cache_usage_perc``,
``inter_token_latency_seconds`` | ``time_per_output_token_seconds``, ``prefix_cache_*`` |
``gpu_prefix_cache_*``), ranks by the ``engine`` label; ``cache_config_info`` carries the KV
pool (``kv_cache_size_tokens``, else ``num_gpu_blocks`` × ``block_size``).
``/tokenize`` takes ``{"prompt": …}`` and answers ``{"count", "tokens", "max_model_len"}``;
``/version`` says the release; ``/v1/models`` gives ``max_model_len``. From 0.32 a request
over ``max_model_len`` has its output shortened instead of being refused."""

from __future__ import annotations

from sparktop.sources.engines.kinds.spec import KindSpec, PromQL

SPEC = KindSpec(
    kind="vllm",
    label="vLLM",
    metric_prefix="vllm:",
    version_path="/version",
    probe_path="/version",
    gauges={
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    counters={
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "preemptions": ("vllm:num_preemptions_total",),
        "prefix_queries": (
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ),
        "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
        "spec_accepted": ("vllm:spec_decode_num_accepted_tokens_total",),
    },
    histograms={
        "ttft": ("vllm:time_to_first_token_seconds",),
        "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "prompt_len": ("vllm:request_prompt_tokens",),
        "generation_len": ("vllm:request_generation_tokens",),
        # one observation per engine step: proof of life for stale-gauge detection
        "iteration_tokens": ("vllm:iteration_tokens_total",),
        # per finished request (vLLM observes them when the request ends)
        "queue": ("vllm:request_queue_time_seconds",),
        "prefill_time": ("vllm:request_prefill_time_seconds",),
        "decode_time": ("vllm:request_decode_time_seconds",),
        "e2e": ("vllm:e2e_request_latency_seconds",),
        "tpot": ("vllm:request_time_per_output_token_seconds",),
    },
    labelled={
        "waiting_by_reason": ("gauges", "vllm:num_requests_waiting_by_reason", "reason"),
        "prompt_by_source": ("counters", "vllm:prompt_tokens_by_source_total", "source"),
        "finished": ("counters", "vllm:request_success_total", "finished_reason"),
        "admission_rejections": ("counters", "vllm:admission_rejections_total", "reason"),
        "spec_accepted_pos": (
            "counters",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "position",
        ),
    },
    info="vllm:cache_config_info",
    promql=PromQL(
        rates={
            "prefill_tps": "vllm:prompt_tokens_total",
            "decode_tps": "vllm:generation_tokens_total",
            "preemptions_per_s": "vllm:num_preemptions_total",
            "prefix_queries": "vllm:(gpu_)?prefix_cache_queries_total",
            "prefix_hits": "vllm:(gpu_)?prefix_cache_hits_total",
            "spec_drafts": "vllm:spec_decode_num_drafts_total",
            "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
            "spec_accepted": "vllm:spec_decode_num_accepted_tokens_total",
            "prompt_len_sum": "vllm:request_prompt_tokens_sum",
            "prompt_len_count": "vllm:request_prompt_tokens_count",
            "itl_sum": "vllm:(inter_token_latency|time_per_output_token)_seconds_sum",
            "itl_count": "vllm:(inter_token_latency|time_per_output_token)_seconds_count",
        },
        quantiles={
            "ttft_p50": (0.5, "vllm:time_to_first_token_seconds"),
            "ttft_p95": (0.95, "vllm:time_to_first_token_seconds"),
            "itl_p50": (0.5, "vllm:(inter_token_latency|time_per_output_token)_seconds"),
        },
        rank_label="engine",
    ),
    limits={
        "max_model_len": "/v1/models",
        "max_num_seqs": "cache_config_info",
        "max_num_batched_tokens": "cache_config_info",
    },
    pool_from=("cache_config_info", "blocks"),
    shortens_from=(0, 32),
    metrics_hint="vLLM always serves it: is the URL the server's base URL?",
)
