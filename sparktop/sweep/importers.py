"""Build a sweep profile from ``vllm bench serve`` result files (``--save-result`` JSON).

One result file (or one line of an ``--append-result`` file) is one row: its
``max_concurrency`` is the concurrency, ``total_input_tokens / completed`` the prompt length,
``mean_ttft_ms`` the TTFT, ``1000 / mean_tpot_ms`` the per-request decode rate, prompt ÷ TTFT
the per-request prefill rate, ``output_throughput`` (output tokens ÷ benchmark duration) the
end-to-end aggregate and ``duration`` the wall time. The output is profile YAML text
(format 1), validated by parsing it back before it is returned.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparktop.errors import UserError
from sparktop.jsontext import JsonTooDeep, loads
from sparktop.sweep.profile_file import parse_profile

COLUMNS = (
    ("prompt_tokens", "mean prompt tokens per request (total_input_tokens / completed)"),
    ("concurrency", "vllm bench serve --max-concurrency"),
    ("ttft_s", "mean TTFT, s (mean_ttft_ms)"),
    ("prefill_tps", "prompt tokens / mean TTFT per request, tok/s"),
    ("decode_tps", "per-request decode rate, 1000 / mean_tpot_ms, tok/s"),
    ("aggregate_tps", "end-to-end output throughput, output tokens / duration, tok/s"),
    ("wall_s", "benchmark duration, s"),
)


@dataclass(frozen=True, slots=True)
class _Result:
    where: str
    prompt_tokens: int
    concurrency: int
    ttft_s: float
    prefill_tps: float
    decode_tps: float
    aggregate_tps: float
    wall_s: float
    output_tokens: int
    model: str


def _documents(path: Path) -> list[tuple[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return [(str(path), loads(text))]
    except JsonTooDeep as exc:
        raise UserError(f"{path}: not JSON ({exc.msg})") from None
    except json.JSONDecodeError:
        pass
    docs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            docs.append((f"{path}:{number}", loads(line)))
        except (json.JSONDecodeError, JsonTooDeep) as exc:
            raise UserError(f"{path}:{number}: not JSON ({exc.msg})") from None
    return docs


def _positive(doc: dict[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UserError(f"{where}: '{key}' missing or not a positive number (got {value!r})")
    return float(value)


def _result(where: str, doc: Any) -> _Result:
    if not isinstance(doc, dict):
        raise UserError(f"{where}: not a vllm bench serve result (expected a JSON object)")
    concurrency = doc.get("max_concurrency")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise UserError(
            f"{where}: no max_concurrency (run vllm bench serve with --max-concurrency)"
        )
    completed = _positive(doc, "completed", where)
    prompt = round(_positive(doc, "total_input_tokens", where) / completed)
    ttft_s = _positive(doc, "mean_ttft_ms", where) / 1000
    return _Result(
        where=where,
        prompt_tokens=prompt,
        concurrency=concurrency,
        ttft_s=round(ttft_s, 4),
        prefill_tps=round(prompt / ttft_s, 1),
        decode_tps=round(1000 / _positive(doc, "mean_tpot_ms", where), 2),
        aggregate_tps=round(_positive(doc, "output_throughput", where), 2),
        wall_s=round(_positive(doc, "duration", where), 2),
        output_tokens=round(_positive(doc, "total_output_tokens", where) / completed),
        model=str(doc.get("model_id") or ""),
    )


def import_vllm_bench(
    paths: Iterable[str | Path],
    name: str,
    *,
    kv_pool_tokens: int | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
) -> str:
    """Profile YAML (format 1) from ``vllm bench serve`` result files, one row per result.

    Raises :class:`UserError` naming the file (and line for JSON-lines files) on a result that
    lacks a field, or two results for the same (prompt tokens, concurrency).
    """
    results: list[_Result] = []
    for path in paths:
        docs = _documents(Path(path))
        if not docs:
            raise UserError(f"{path}: empty (no vllm bench serve result in it)")
        results += [_result(where, doc) for where, doc in docs]
    if not results:
        raise UserError("no vllm bench serve results given")
    seen: dict[tuple[int, int], str] = {}
    for r in results:
        key = (r.prompt_tokens, r.concurrency)
        if key in seen:
            raise UserError(
                f"{r.where}: a second result for {key[0]} prompt tokens at concurrency "
                f"{key[1]} (first: {seen[key]})"
            )
        seen[key] = r.where
    outputs = sorted({r.output_tokens for r in results})
    models = sorted({r.model for r in results if r.model})
    sources = sorted({r.where.split(":")[0] for r in results})
    limits = {
        "kv_pool_tokens": kv_pool_tokens,
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": max_num_batched_tokens,
    }
    lines = [
        "# sparktop sweep profile, format 1 (see sparktop/sweep/README.md).",
        "# Imported from vllm bench serve results by 'sparktop profiles --import'.",
        "sparktop_profile: 1",
        f"name: {name}",
        f"model: {json.dumps(', '.join(models))}",
        'engine: "vLLM (vllm bench serve)"',
        "limits:",
        *(f"  {k}: {'null' if v is None else v}" for k, v in limits.items()),
        f"output_tokens: {outputs[0] if len(outputs) == 1 else 'null'}",
        "aggregate_kind: end-to-end",
        f"source: {json.dumps('vllm bench serve results: ' + ', '.join(sources))}",
        "columns:",
        *(f"  - {{name: {c}, meaning: {json.dumps(m)}}}" for c, m in COLUMNS),
        "rows:",
    ]
    for r in sorted(results, key=lambda r: (r.concurrency, r.prompt_tokens)):
        cells = [r.prompt_tokens, r.concurrency, r.ttft_s, r.prefill_tps, r.decode_tps]
        cells += [r.aggregate_tps, r.wall_s]
        lines.append(f"  - [{', '.join(str(c) for c in cells)}]")
    text = "\n".join(lines) + "\n"
    parse_profile(text, f"<imported {name}>", "imported")  # the output must load
    return text
