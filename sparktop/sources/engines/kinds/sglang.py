"""SGLang: its limits are gauges on ``/metrics`` (``context_len``, ``max_running_requests``,
``max_prefill_tokens``); ``/tokenize`` as vLLM's. Metric tables: still
:data:`sparktop.sources.engines.reading.SGLANG`."""

from __future__ import annotations

from sparktop.sources.engines.kinds.spec import KindSpec

SPEC = KindSpec(
    kind="sglang",
    label="SGLang",
    metric_prefix="sglang:",
    limits={
        "max_model_len": "sglang:context_len",
        "max_num_seqs": "sglang:max_running_requests",
        "max_num_batched_tokens": "sglang:max_prefill_tokens",
    },
    tables_in="sparktop.sources.engines.reading.SGLANG",
    metrics_hint="start SGLang with --enable-metrics",
)
