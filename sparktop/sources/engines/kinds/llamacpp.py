"""llama.cpp's ``llama-server``: 15 unlabelled ``llamacpp:*`` counters and gauges on
``/metrics`` (with ``--metrics``), no histograms and no KV-pool size (see
``fixtures/real/llama-server-tiny-*.prom``); ``GET /props`` gives the context of one slot
(``default_generation_settings.n_ctx``) and the slot count (``total_slots``, ``-np``);
``GET /slots`` each busy slot's prompt length (``n_prompt_tokens``);
``POST /tokenize`` takes ``{"content": …}`` and answers ``{"tokens": [ids]}`` (no count;
it answers ``{"tokens": []}`` to vLLM's ``{"prompt": …}``).

``requests_deferred`` (requests waiting for a free slot) is read as waiting;
``kv_cache_usage_ratio`` is read when a build exports it (older ones did; the captured
build does not).
"""

from __future__ import annotations

from sparktop.sources.engines.kinds.spec import KindSpec, Tokenize

SPEC = KindSpec(
    kind="llamacpp",
    label="llama.cpp",
    metric_prefix="llamacpp:",
    tokenize=Tokenize(text_field="content", count_field="", special_field="add_special"),
    props_path="/props",
    probe_path="/props",
    slots_path="/slots",
    gauges={
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_usage": ("llamacpp:kv_cache_usage_ratio",),
        "busy_slots_per_decode": ("llamacpp:n_busy_slots_per_decode",),
    },
    counters={
        "prompt_tokens": ("llamacpp:prompt_tokens_total",),
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
        "prompt_seconds": ("llamacpp:prompt_seconds_total",),
        "generation_seconds": ("llamacpp:tokens_predicted_seconds_total",),
        "prompt_cached_tokens": ("llamacpp:prompt_tokens_cached_total",),
        "decode_calls": ("llamacpp:n_decode_total",),
        "spec_drafts": ("llamacpp:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("llamacpp:spec_decode_num_draft_tokens_total",),
        "spec_accepted": ("llamacpp:spec_decode_num_accepted_tokens_total",),
    },
    no_latency="llama.cpp exports no latency histograms",
    limits={"max_model_len": "/props", "max_num_seqs": "/props"},
    metrics_hint="start llama-server with --metrics",
    pool_unknown=(
        "KV pool unknown: llama.cpp exports no KV-pool size (it is llama-server's -c, the "
        "context shared by all slots); set kv_pool_tokens in the inventory"
    ),
)
