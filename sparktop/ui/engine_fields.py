"""Every :class:`~sparktop.model.EngineSample` field as people read it on the engine detail
screen: a label in the field's standard terms and its value in its unit (``KV cache usage
0.16 %``, ``ITL mean 31.7 ms``); the field's key stays beside it, dimmed."""

from __future__ import annotations

from sparktop.model import NA, Quantile, is_num

PERCENT, SECONDS, TOKENS, TOK_S, PER_S, COUNT = "%", "s", "tok", "tok/s", "/s", "n"

FIELD_LABELS: dict[str, tuple[str, str]] = {
    "time_s": ("sampled at", ""),
    "state": ("state", ""),
    "message": ("message", ""),
    "since_s": ("failing since", ""),
    "kind": ("server kind", ""),
    "model": ("model", ""),
    "running": ("running requests", COUNT),
    "waiting": ("waiting requests", COUNT),
    "kv_usage": ("KV cache usage", PERCENT),
    "kv_pool_tokens": ("KV pool", TOKENS),
    "kv_pool_source": ("KV pool read from", ""),
    "kv_used_tokens": ("KV used", TOKENS),
    "kv_free_tokens": ("KV free", TOKENS),
    "kv_fill_tps": ("KV fill rate", TOK_S),
    "kv_hit_tps": ("KV prefix hits", TOK_S),
    "kv_freed_tps": ("KV freed", TOK_S),
    "preemptions_per_s": ("preemptions", PER_S),
    "prefill_tps": ("prefill", TOK_S),
    "decode_tps": ("decode", TOK_S),
    "ttft_p50": ("TTFT p50", SECONDS),
    "ttft_p95": ("TTFT p95", SECONDS),
    "itl_p50": ("ITL p50", SECONDS),
    "mean_prompt_tokens": ("prompt mean", TOKENS),
    "prefix_hit_rate": ("prefix-cache hit rate", PERCENT),
    "spec_acceptance_rate": ("speculative acceptance", PERCENT),
    "spec_mean_accept_len": ("speculative mean acceptance length", ""),
    "max_model_len": ("max_model_len", TOKENS),
    "max_num_seqs": ("max_num_seqs", COUNT),
    "max_num_batched_tokens": ("max_num_batched_tokens", TOKENS),
    "restarted": ("restarted since the last scrape", ""),
    "latency_s": ("scrape took", SECONDS),
    "window_s": ("rate window", SECONDS),
    "since_start": ("since start", ""),
    "limit_sources": ("limits read from", ""),
    "itl_mean_s": ("ITL mean", SECONDS),
    "queue_time_p50": ("queue time p50", SECONDS),
    "queue_time_mean_s": ("queue time mean", SECONDS),
    "prefill_time_p50": ("prefill time p50", SECONDS),
    "prefill_time_mean_s": ("prefill time mean", SECONDS),
    "decode_time_p50": ("decode time p50", SECONDS),
    "decode_time_mean_s": ("decode time mean", SECONDS),
    "e2e_latency_p50": ("end-to-end latency p50", SECONDS),
    "e2e_latency_mean_s": ("end-to-end latency mean", SECONDS),
    "tpot_p50": ("TPOT p50", SECONDS),
    "tpot_mean_s": ("TPOT mean", SECONDS),
    "prefill_computed_tps": ("prefill computed", TOK_S),
    "prompt_tps_by_source": ("prompt tokens by source", ""),
    "waiting_capacity": ("waiting for capacity", COUNT),
    "waiting_deferred": ("waiting deferred", COUNT),
    "requests_finished_per_s": ("requests finished", PER_S),
    "requests_aborted_per_s": ("requests aborted", PER_S),
    "requests_errored_per_s": ("requests errored", PER_S),
    "admission_rejections_per_s": ("admission rejections", PER_S),
    "spec_accept_by_position": ("acceptance by draft position", ""),
    "retracted_reqs": ("retracted requests", COUNT),
    "load_dist": ("load in the window", ""),
    "prompt_tokens_dist": ("prompt tokens in the window", ""),
    "first_token_prompt_tokens": ("prompt of the first tokens", TOKENS),
    "window_start_s": ("window started at", ""),
    "prefill_tps_now": ("prefill now", TOK_S),
    "decode_tps_now": ("decode now", TOK_S),
    "now_window_s": ("'now' window", SECONDS),
    "server_version": ("server version", ""),
    "first_tokens": ("first tokens in the window", ""),
    "no_tokens_s": ("no tokens for", SECONDS),
    "kv_still_s": ("KV unchanged for", SECONDS),
    "model_root": ("model root", ""),
}
"""Field → (label, unit). A field not listed shows its key with underscores as spaces."""

NO_LIFETIME = "n/a (every figure is over the rate window, none over the server's lifetime)"


def field_label(name: str) -> str:
    """The field's label (``kv_usage`` → ``KV cache usage``)."""
    return FIELD_LABELS.get(name, (name.replace("_", " "), ""))[0]


def unit_value(name: str, value: object) -> str | None:
    """``value`` in the field's unit (``0.16 %``, ``31.7 ms``, ``3,534 tok/s``), or None when
    the field has no unit or the value is not a number (the caller formats it plainly)."""
    unit = FIELD_LABELS.get(name, ("", ""))[1]
    if not unit or isinstance(value, NA | bool):
        return None
    if isinstance(value, Quantile):
        return str(value)  # with its bound (``< 10 ms``)
    if not isinstance(value, int | float) or not is_num(value):
        return None
    v = float(value)
    if unit == SECONDS:
        return f"{_sig(v * 1000)} ms" if abs(v) < 1 else f"{v:,.2f} s"
    if unit == PERCENT:
        return f"{_sig(v * 100)} %"
    if unit == TOKENS:
        return f"{v:,.0f} tok"
    if unit == COUNT:
        return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"
    return f"{_sig(v)} {unit}"


def _sig(v: float) -> str:
    """``3,534``, ``89.7``, ``0.16``: whole from 100, one decimal from 10, else two."""
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
