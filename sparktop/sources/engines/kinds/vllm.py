"""vLLM: ``/tokenize`` takes ``{"prompt": …}`` and answers ``{"count", "tokens",
"max_model_len"}``; ``/version`` says the release; ``/v1/models`` gives ``max_model_len``.

Its metric tables are still :data:`sparktop.sources.engines.reading.VLLM` (moved here by issue 29's
``sources/`` split)."""

from __future__ import annotations

from sparktop.sources.engines.kinds.spec import KindSpec

SPEC = KindSpec(
    kind="vllm",
    label="vLLM",
    metric_prefix="vllm:",
    version_path="/version",
    probe_path="/version",
    limits={
        "max_model_len": "/v1/models",
        "max_num_seqs": "cache_config_info",
        "max_num_batched_tokens": "cache_config_info",
    },
    tables_in="sparktop.sources.engines.reading.VLLM",
    metrics_hint="vLLM always serves it: is the URL the server's base URL?",
)
