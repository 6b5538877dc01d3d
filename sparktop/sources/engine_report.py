"""Engine samples for people and scripts: the JSON object and the rich table of a snapshot.

JSON (one object per engine, ``ranks`` holding the same keys per data-parallel rank)::

    {"engine": "dsv41", "kind": "vllm", "model": "dsv41-flash", "state": "ok", "ok": true,
     "message": "", "since": null, "since_s": null, "time_s": 1795961531.2, "latency_s": 0.004,
     "running": 7, "waiting": 1, "max_num_seqs": 8,
     "kv_usage": 0.81,                      # fraction 0–1, as vLLM exports it
     "kv_usage_pct": 81.0,
     "kv_pool_tokens": 22868992, "kv_pool_source": "num_gpu_blocks×block_size",
     "kv_used_tokens": …, "kv_free_tokens": …,
     "preemptions_per_s": 0.0, "prefill_tok_per_s": 5574.8, "decode_tok_per_s": 99.9,
     "ttft_p50_s": 0.55, "ttft_p95_s": 0.955, "itl_p50_s": 0.01,
     "bounds": {"itl_p50_s": "<"},         # "<" first bucket, ">" beyond the last edge
     "mean_prompt_tokens": 6656.0, "prefix_hit_rate": 0.25,
     "spec_acceptance_rate": null, "spec_mean_accept_len_tokens": null,
     "max_model_len_tokens": 1048576, "max_num_batched_tokens": 8192,
     "limit_sources": {"max_model_len_tokens": "/v1/models", …},
     "restarted": false, "window_s": 1.0, "since_start": [],
     "ranks": [{"rank": "0", …}],
     "missing": {"spec_acceptance_rate": "no speculative decoding", …}}

A missing value is ``null`` and its key is in ``missing`` with the reason. ``since_start``
lists the keys that cover the server's lifetime instead of the window.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from rich.table import Table
from rich.text import Text

from sparktop.model import NA, EngineSample, EngineState, Num, Quantile, RankStats, fmt_num, is_num

# JSON key → sample attribute, for the values shared by an engine and its ranks.
COMMON = (
    ("running", "running"),
    ("waiting", "waiting"),
    ("kv_usage", "kv_usage"),
    ("kv_pool_tokens", "kv_pool_tokens"),
    ("kv_used_tokens", "kv_used_tokens"),
    ("kv_free_tokens", "kv_free_tokens"),
    ("preemptions_per_s", "preemptions_per_s"),
    ("prefill_tok_per_s", "prefill_tps"),
    ("decode_tok_per_s", "decode_tps"),
    ("ttft_p50_s", "ttft_p50"),
    ("ttft_p95_s", "ttft_p95"),
    ("itl_p50_s", "itl_p50"),
    ("mean_prompt_tokens", "mean_prompt_tokens"),
    ("prefix_hit_rate", "prefix_hit_rate"),
)
ENGINE_ONLY = (
    ("max_num_seqs", "max_num_seqs"),
    ("max_num_batched_tokens", "max_num_batched_tokens"),
    ("max_model_len_tokens", "max_model_len"),
    ("spec_acceptance_rate", "spec_acceptance_rate"),
    ("spec_mean_accept_len_tokens", "spec_mean_accept_len"),
)
KEY_OF = {attr: key for key, attr in COMMON + ENGINE_ONLY}

STATE_STYLE = {
    EngineState.OK: "green",
    EngineState.STALE: "yellow",
    EngineState.UNAVAILABLE: "red",
    EngineState.METRICS_DISABLED: "yellow",
    EngineState.UNREACHABLE: "bold red",
}


def _iso(time_s: float | None) -> str | None:
    return (
        None
        if time_s is None
        else datetime.fromtimestamp(time_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def _values(obj: EngineSample | RankStats, pairs: Iterable[tuple[str, str]]) -> dict[str, object]:
    out: dict[str, object] = {}
    missing: dict[str, str] = {}
    bounds: dict[str, str] = {}
    for key, attr in pairs:
        value = getattr(obj, attr)
        if isinstance(value, NA):
            out[key] = None
            missing[key] = value.reason
        elif isinstance(value, Quantile):
            out[key] = value.value_s
            if value.bound:
                bounds[key] = value.bound
        else:
            out[key] = value if is_num(value) else None
    usage = out.get("kv_usage")
    out["kv_usage_pct"] = round(usage * 100, 3) if isinstance(usage, float | int) else None
    if "kv_usage" in missing:
        missing["kv_usage_pct"] = missing["kv_usage"]
    out["bounds"] = bounds
    out["missing"] = missing
    return out


def rank_json(rank: RankStats) -> dict[str, object]:
    """One DP rank: the shared keys (see the module docstring)."""
    return {"rank": rank.rank, **_values(rank, COMMON)}


def engine_json(sample: EngineSample) -> dict[str, object]:
    """One engine as a JSON-ready dict: units in key names, NA → null plus ``missing``."""
    values = _values(sample, COMMON + ENGINE_ONLY)
    return {
        "engine": sample.engine,
        "kind": sample.kind,
        "model": sample.model,
        "state": sample.state.value,
        "ok": sample.ok,
        "message": sample.message,
        "since": _iso(sample.since_s),
        "since_s": sample.since_s,
        "time_s": sample.time_s,
        "latency_s": sample.latency_s,
        **values,
        "kv_pool_source": sample.kv_pool_source,
        "limit_sources": {KEY_OF.get(k, k): v for k, v in sample.limit_sources.items()},
        "restarted": sample.restarted,
        "window_s": sample.window_s,
        "since_start": [KEY_OF.get(k, k) for k in sample.since_start],
        "ranks": [rank_json(r) for r in sample.ranks],
    }


# -- table -------------------------------------------------------------------------------------

COLUMNS = (
    "engine", "running", "waiting", "KV %", "pool", "free", "preempt/s", "prefill tok/s",
    "decode tok/s", "TTFT p50", "TTFT p95", "ITL p50", "mean prompt", "hit %", "state",
)  # fmt: skip


def _tokens(value: Num) -> str:
    if not is_num(value):
        return "n/a"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.1f}k" if value >= 1e4 else f"{value:,.0f}"


def _pct(value: Num) -> str:
    return fmt_num(value * 100 if is_num(value) else value, ".1f")


def _latency(value: Quantile | NA, lifetime: bool) -> str:
    return "n/a" if isinstance(value, NA) else f"{value}{'*' if lifetime else ''}"


def _cells(
    row: EngineSample | RankStats, name: str, since_start: tuple[str, ...], seqs: Num
) -> list[str]:
    running = fmt_num(row.running)
    if is_num(row.running) and is_num(seqs):
        running = f"{row.running:.0f}/{seqs:.0f}"
    return [
        name,
        running,
        fmt_num(row.waiting),
        _pct(row.kv_usage),
        _tokens(row.kv_pool_tokens),
        _tokens(row.kv_free_tokens),
        fmt_num(row.preemptions_per_s, ".2f"),
        fmt_num(row.prefill_tps, ",.0f"),
        fmt_num(row.decode_tps, ",.1f"),
        _latency(row.ttft_p50, "ttft_p50" in since_start),
        _latency(row.ttft_p95, "ttft_p95" in since_start),
        _latency(row.itl_p50, "itl_p50" in since_start),
        fmt_num(row.mean_prompt_tokens, ",.0f")
        + ("*" if "mean_prompt_tokens" in since_start else ""),
        _pct(row.prefix_hit_rate),
    ]


def _state(sample: EngineSample) -> Text:
    text = sample.state.value
    if sample.message:
        text += f": {sample.message}"
    return Text(text, style=STATE_STYLE.get(sample.state, ""))


def _notes(sample: EngineSample) -> str:
    notes = [f"pool from {sample.kv_pool_source}"]
    notes.append(
        f"rates over {sample.window_s:.1f} s" if sample.window_s else "rates need two scrapes"
    )
    if sample.since_start:
        notes.append("* = since server start (no window yet or no requests in it)")
    if sample.restarted:
        notes.append("server restarted")
    return f"{sample.engine}: " + "; ".join(notes)


def engine_table(samples: Iterable[EngineSample]) -> Table:
    """Engines, one row each, and one indented row per DP rank when there are several.

    ``running`` reads ``running/max_num_seqs`` (the engine row: ``max_num_seqs`` × ranks);
    ``*`` marks latencies and mean prompt computed since server start; the caption says
    where each pool came from and the window the rates cover.
    """
    samples = tuple(samples)
    table = Table(title="engines", title_justify="left", caption_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="left" if name in ("engine", "state") else "right")
    for s in samples:
        ranks = len(s.ranks)
        # max_num_seqs bounds each DP rank's scheduler; the engine's ceiling is their sum.
        total = s.max_num_seqs * ranks if is_num(s.max_num_seqs) and ranks > 1 else s.max_num_seqs
        table.add_row(*_cells(s, s.engine, s.since_start, total), _state(s))
        if ranks > 1:
            for r in s.ranks:
                cells = _cells(r, f"  └ rank {r.rank}", s.since_start, s.max_num_seqs)
                table.add_row(*cells, Text(""))
    table.caption = "\n".join(
        _notes(s) for s in samples if s.state in (EngineState.OK, EngineState.STALE)
    )
    return table
