"""Engine samples for people and scripts: the JSON object and the tables of a snapshot.

JSON (one object per engine, ``ranks`` holding the same keys per data-parallel rank)::

    {"engine": "dsv41", "kind": "vllm", "model": "dsv41-flash", "state": "ok", "ok": true,
     "message": null, "since": null, "since_s": null, "time_s": 1795961531.2, "latency_s": 0.004,
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
     "spec_accept_by_position": null,       # [share of drafts accepted at position k, …]
     "queue_time_p50_s": 0.3, "queue_time_mean_s": 0.02,   # requests finished in the window
     "prefill_time_p50_s": …, "prefill_time_mean_s": …, "decode_time_p50_s": …,
     "decode_time_mean_s": …, "e2e_latency_p50_s": …, "e2e_latency_mean_s": …,
     "tpot_p50_s": …, "tpot_mean_s": …,     # per-request time per output token
     "prefill_computed_tok_per_s": 4100.0,  # prompt tokens computed (cache hits excluded)
     "prompt_tok_per_s_by_source": {"local_compute": 4100.0, "local_cache_hit": 900.0},
     "waiting_capacity": 1, "waiting_deferred": 0,
     "requests_finished_per_s": 0.9, "requests_aborted_per_s": 0.0,
     "requests_errored_per_s": 0.0, "admission_rejections_per_s": null,
     "retracted_reqs": null,                # SGLang only
     "max_model_len_tokens": 1048576, "max_num_batched_tokens": 8192,
     "limit_sources": {"max_model_len_tokens": "/v1/models", …},
     "prefill_tok_per_s_now": 5600.0, "decode_tok_per_s_now": 0.0,  # over now_window_s
     "restarted": false,
     "window_s": 1.0,       # the span every rate and quantile covers (--window; 30 s live)
     "now_window_s": 1.0,   # the span of the *_now rates (the last ~3 s)
     "since_start": [],
     "ranks": [{"rank": "0", …}],
     "missing": {"spec_acceptance_rate": "no speculative decoding", …}}

A missing value is ``null`` and its key is in ``missing`` with the reason; so is a model the
server did not name (``"model": null``, reason ``not reported``); no message is ``null``.
``since_start`` lists the keys that cover the server's lifetime instead of the window.

Tables (:func:`engine_tables`): one row per engine and per DP rank, in one table of
:data:`WIDE` columns when the console is wide enough, else two narrower ones (requests and
KV cache; speed), each leaving out whole columns by priority rather than clipping values.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from rich.text import Text

from sparktop.model import NA, EngineSample, EngineState, Num, Quantile, RankStats, fmt_num, is_num
from sparktop.report.fit import Col, Fitted, fit_table
from sparktop.values import HUGE, bounded

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
    ("queue_time_p50_s", "queue_time_p50"),
    ("queue_time_mean_s", "queue_time_mean_s"),
    ("prefill_time_p50_s", "prefill_time_p50"),
    ("prefill_time_mean_s", "prefill_time_mean_s"),
    ("decode_time_p50_s", "decode_time_p50"),
    ("decode_time_mean_s", "decode_time_mean_s"),
    ("e2e_latency_p50_s", "e2e_latency_p50"),
    ("e2e_latency_mean_s", "e2e_latency_mean_s"),
    ("tpot_p50_s", "tpot_p50"),
    ("tpot_mean_s", "tpot_mean_s"),
    ("prefill_computed_tok_per_s", "prefill_computed_tps"),
    ("waiting_capacity", "waiting_capacity"),
    ("waiting_deferred", "waiting_deferred"),
    ("requests_finished_per_s", "requests_finished_per_s"),
    ("requests_aborted_per_s", "requests_aborted_per_s"),
    ("requests_errored_per_s", "requests_errored_per_s"),
    ("admission_rejections_per_s", "admission_rejections_per_s"),
    ("retracted_reqs", "retracted_reqs"),
    ("prefill_tok_per_s_now", "prefill_tps_now"),
    ("decode_tok_per_s_now", "decode_tps_now"),
)
KEY_OF = {attr: key for key, attr in COMMON + ENGINE_ONLY}

STATE_STYLE = {
    EngineState.OK: "green",
    EngineState.STALE: "yellow",
    EngineState.DEGRADED: "yellow",
    EngineState.UNAVAILABLE: "red",
    EngineState.METRICS_DISABLED: "yellow",
    EngineState.UNREACHABLE: "bold red",
    EngineState.NOT_ANSWERING: "bold red",
}


def _iso(time_s: float | None) -> str | None:
    return (
        None
        if time_s is None
        else datetime.fromtimestamp(time_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def _values(
    obj: EngineSample | RankStats, pairs: Iterable[tuple[str, str]], missing: dict[str, str]
) -> dict[str, object]:
    out: dict[str, object] = {}
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
    return {"rank": rank.rank, **_values(rank, COMMON, {})}


def engine_json(sample: EngineSample) -> dict[str, object]:
    """One engine as a JSON-ready dict: units in key names, NA → null plus ``missing``."""
    missing: dict[str, str] = {} if sample.model else {"model": "not reported"}
    values = _values(sample, COMMON + ENGINE_ONLY, missing)
    positions: list[float] | None = list(sample.spec_accept_by_position) or None
    if positions is None:
        spec = sample.spec_acceptance_rate
        missing["spec_accept_by_position"] = (
            spec.reason
            if isinstance(spec, NA)
            else "spec_decode_num_accepted_tokens_per_pos not exported by this server"
        )
    by_source: dict[str, float] | None = dict(sample.prompt_tps_by_source) or None
    if by_source is None:
        computed = sample.prefill_computed_tps
        missing["prompt_tok_per_s_by_source"] = (
            computed.reason if isinstance(computed, NA) else "no sources in the window"
        )
    return {
        "engine": sample.engine,
        "kind": sample.kind,
        "model": sample.model or None,
        "state": sample.state.value,
        "ok": sample.ok,
        "message": sample.message or None,
        "since": _iso(sample.since_s),
        "since_s": sample.since_s,
        "time_s": sample.time_s,
        "latency_s": sample.latency_s,
        **values,
        "kv_pool_source": sample.kv_pool_source,
        "limit_sources": {KEY_OF.get(k, k): v for k, v in sample.limit_sources.items()},
        "restarted": sample.restarted,
        "window_s": sample.window_s,
        "now_window_s": sample.now_window_s,
        "since_start": [KEY_OF.get(k, k) for k in sample.since_start],
        "ranks": [rank_json(r) for r in sample.ranks],
        "spec_accept_by_position": positions,
        "prompt_tok_per_s_by_source": by_source,
    }


# -- tables ------------------------------------------------------------------------------------

WIDE = (
    ("engine", Col("engine", 0, "left")),
    ("running", Col("running", 1)),
    ("waiting", Col("waiting", 2)),
    ("kv", Col("KV %", 3)),
    ("pool", Col("pool tok", 10)),
    ("free", Col("free tok", 4)),
    ("preempt", Col("preempt/s", 11)),
    ("prefill", Col("prefill tok/s", 7)),
    ("decode", Col("decode tok/s", 5)),
    ("ttft50", Col("TTFT p50", 6)),
    ("ttft95", Col("TTFT p95", 9)),
    ("itl50", Col("ITL p50", 8)),
    ("prompt", Col("mean prompt", 13)),
    ("hit", Col("hit %", 12)),
    ("state", Col("state", 0, "left", wrap=True)),
)
"""The one-table layout, in display order; the number is the priority (0 always shown)."""

_SPEED_HEADERS = {
    "prefill": "prefill\ntok/s",
    "decode": "decode\ntok/s",
    "ttft50": "TTFT\np50",
    "ttft95": "TTFT\np95",
    "itl50": "ITL\np50",
    "prompt": "mean\nprompt",
}
_LOAD_KEYS = ("engine", "running", "waiting", "kv", "pool", "free", "preempt", "state")
_SPEED_KEYS = ("engine", "prefill", "decode", "ttft50", "ttft95", "itl50", "prompt", "hit")

Row = dict[str, Text]
STARRED = frozenset({"ttft_p50", "ttft_p95", "itl_p50", "mean_prompt_tokens", "prefix_hit_rate"})
"""Fields the tables mark with ``*`` when they cover the server's lifetime."""


def _tokens(value: Num) -> str:
    if not is_num(value):
        return "n/a"
    if abs(value) >= HUGE:
        return bounded(value, ".3g")
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    return f"{value / 1e3:.1f}k" if value >= 1e4 else f"{value:,.0f}"


def _pct(value: Num) -> str:
    return fmt_num(value * 100 if is_num(value) else value, ".1f")


def _latency(value: Quantile | NA, lifetime: bool) -> str:
    return "n/a" if isinstance(value, NA) else f"{value}{'*' if lifetime else ''}"


def _row(row: EngineSample | RankStats, name: str, since_start: tuple[str, ...], seqs: Num) -> Row:
    running = fmt_num(row.running)
    if is_num(row.running):
        running = (
            fmt_num(row.running, ".0f") + "/" + (fmt_num(seqs, ".0f") if is_num(seqs) else "?")
        )
    prompt = fmt_num(row.mean_prompt_tokens, ",.0f")
    cells = {
        "engine": name,
        "running": running,
        "waiting": fmt_num(row.waiting),
        "kv": _pct(row.kv_usage),
        "pool": _tokens(row.kv_pool_tokens),
        "free": _tokens(row.kv_free_tokens),
        "preempt": fmt_num(row.preemptions_per_s, ".2f"),
        "prefill": fmt_num(row.prefill_tps, ",.0f"),
        "decode": fmt_num(row.decode_tps, ",.1f"),
        "ttft50": _latency(row.ttft_p50, "ttft_p50" in since_start),
        "ttft95": _latency(row.ttft_p95, "ttft_p95" in since_start),
        "itl50": _latency(row.itl_p50, "itl_p50" in since_start),
        "prompt": prompt + ("*" if "mean_prompt_tokens" in since_start else ""),
        "hit": _pct(row.prefix_hit_rate) + ("*" if "prefix_hit_rate" in since_start else ""),
        "state": "",
    }
    # Text(), not markup: engine names come from the inventory, messages from servers.
    return {key: Text(value) for key, value in cells.items()}


def engine_rows(samples: Iterable[EngineSample]) -> list[Row]:
    """One row per engine, then one indented row per DP rank when there are several.

    ``running`` reads ``running/max_num_seqs`` (the engine row: ``max_num_seqs`` × ranks);
    ``*`` marks latencies and mean prompt computed since server start.
    """
    rows = []
    for s in samples:
        ranks = len(s.ranks)
        # max_num_seqs bounds each DP rank's scheduler; the engine's ceiling is their sum.
        total = s.max_num_seqs * ranks if is_num(s.max_num_seqs) and ranks > 1 else s.max_num_seqs
        row = _row(s, s.engine, s.since_start, total)
        if not s.answered:
            row = {key: Text() for key in row} | {"engine": row["engine"]}  # nothing read
        row["state"] = Text(s.state.value, style=STATE_STYLE.get(s.state, ""))
        rows.append(row)
        if ranks > 1:
            rows += [_row(r, f"  └ rank {r.rank}", s.since_start, s.max_num_seqs) for r in s.ranks]
    return rows


def _fit(keys: Iterable[str], rows: list[Row], width: int, title: str, split: bool) -> Fitted:
    spec = dict(WIDE)
    cols = [
        Col(_SPEED_HEADERS.get(k, c.header), c.priority, c.justify, c.wrap) if split else c
        for k, c in ((k, spec[k]) for k in keys)
    ]
    cells = [[row[k] for k in keys] for row in rows]
    return fit_table(cols, cells, width, title)


def wide_width(samples: Iterable[EngineSample]) -> int:
    """Cells the one-table layout needs to show every column."""
    return _fit(dict(WIDE), engine_rows(samples), 0, "", split=False).needed


def engine_tables(samples: Iterable[EngineSample], width: int) -> list[Fitted]:
    """The engines within ``width`` cells: one table of :data:`WIDE` columns when all fit,
    else two narrower ones (load: requests and KV cache; speed: token rates, latencies), each
    leaving out columns by priority if even that is too wide."""
    samples = list(samples)
    rows = engine_rows(samples)
    over = rates_window(samples)
    wide = _fit(dict(WIDE), rows, width, f"engines{over}", split=False)
    if not wide.hidden:
        return [wide]
    return [
        _fit(_LOAD_KEYS, rows, width, f"engines: requests and KV cache{over}", split=True),
        _fit(_SPEED_KEYS, rows, width, f"engines: speed{over}", split=True),
    ]


def rates_window(samples: Iterable[EngineSample]) -> str:
    """`` (rates over 1 s)``: the window every answering engine's rates cover, for the
    table's title; "" when they differ (each engine's note says its own) or none has one."""
    spans = {round(s.window_s, 1) for s in samples if s.answered and s.window_s}
    return f" (rates over {spans.pop():g} s)" if len(spans) == 1 else ""


def pool_reason(pool: object) -> str:
    """``KV pool unknown: no cache_config_info on the page (…); set kv_pool_tokens …``: the
    source's reason for a pool it could not size (it names where the figure comes from)."""
    reason = pool.reason if isinstance(pool, NA) else ""
    return (
        reason
        if reason.startswith("KV pool unknown")
        else f"KV pool unknown ({reason or 'no reason given'})"
    )


def notes(samples: Iterable[EngineSample]) -> list[str]:
    """Per answering engine where its pool came from, the window its rates cover and its
    message; then what ``*`` means when any value is since server start."""
    lines = []
    lifetime = False
    for s in samples:
        if not s.answered:
            continue  # listed under "failures:" with the reason
        pool = s.kv_pool_tokens
        unknown = isinstance(pool, NA) or s.kv_pool_source == "unknown"
        # Where the pool would come from and why it is not there, not "pool from unknown".
        parts = [pool_reason(pool) if unknown else f"pool from {s.kv_pool_source}"]
        parts.append(f"rates over {s.window_s:.1f} s" if s.window_s else "rates need two scrapes")
        if s.restarted:
            parts.append("server restarted")
        if s.message:
            parts.append(s.message)
        lines.append(f"{s.engine}: " + "; ".join(parts))
        lifetime = lifetime or bool(STARRED.intersection(s.since_start))
    if lifetime:
        lines.append("* = since server start (no window yet, or no requests in it)")
    return lines


def split_line(sample: EngineSample) -> str | None:
    """``dsv41: means of finished: queue 420 ms + prefill 8.61 s · spec 54% ×3.69``: the
    monitor's engine block's TTFT split (mean queue and prefill times of the requests
    finished in the window, ``*`` over the lifetime, ``vllm:request_queue_time_seconds`` /
    ``request_prefill_time_seconds``) and speculative
    decoding (accepted ÷ draft tokens, mean tokens per step); None with neither exported."""
    if not sample.answered:
        return None
    parts = []
    queue, prefill = sample.queue_time_mean_s, sample.prefill_time_mean_s
    if is_num(queue) or is_num(prefill):
        life = {
            k: "*" if f"{k}_time_mean_s" in sample.since_start else "" for k in ("queue", "prefill")
        }
        parts.append(
            f"means of finished: queue {_secs(queue)}{life['queue']} + prefill "
            f"{_secs(prefill)}{life['prefill']}"
        )
    rate, length = sample.spec_acceptance_rate, sample.spec_mean_accept_len
    if is_num(rate):
        parts.append(f"spec {rate * 100:.0f}%" + (f" ×{length:.2f}" if is_num(length) else ""))
    return f"{sample.engine}: " + " · ".join(parts) if parts else None


def _secs(value: Num) -> str:
    return str(Quantile(float(value))) if is_num(value) else "n/a"
