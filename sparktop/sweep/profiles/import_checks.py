"""Implausible values in imported benchmark rows: each flag names the cell and the reason.

A result file can hold numbers no server produced: a tool's unit test sample (a published
``vllm bench serve`` test file reads 0.0106 ms per output token, 94,410 tok/s per request),
a mock server, a stream whose tokens arrived in one chunk, prompts served from the prefix
cache. They import as valid YAML; these checks say which cell looks wrong and why, so the
profile's notes (and ``profiles --import`` on stderr) carry the doubt with the numbers.

Bounds (deliberately loose: a flag means "not a measurement of a serving engine"):

- decode per request above :data:`DECODE_PER_REQUEST_MAX_TPS` (a token every 0.1 ms);
- TTFT below :data:`TTFT_MIN_S` (less than an HTTP round trip with tokenizing and one
  forward pass);
- prefill per request (prompt ÷ TTFT) above :data:`PREFILL_PER_REQUEST_MAX_TPS`;
- an aggregate above :data:`AGGREGATE_SLACK` × concurrency × per-request decode: requests in
  flight cannot together emit faster than each emits alone (the slack covers a mean of
  per-request rates against a rate of means, and a measured mean concurrency).
"""

from __future__ import annotations

from collections.abc import Sequence

from sparktop.sweep.profiles.import_fields import ImportedRow

DECODE_PER_REQUEST_MAX_TPS = 10_000.0
TTFT_MIN_S = 0.001
PREFILL_PER_REQUEST_MAX_TPS = 1_000_000.0
AGGREGATE_SLACK = 1.5


def _cell(row: ImportedRow) -> str:
    return f"prompt {row.prompt_tokens:,} x concurrency {row.concurrency} ({row.where})"


def row_flags(row: ImportedRow) -> list[str]:
    """Reasons the row's values are implausible, each naming the cell; empty if none."""
    flags: list[str] = []
    if row.decode_tps > DECODE_PER_REQUEST_MAX_TPS:
        flags.append(
            f"decode {row.decode_tps:,.0f} tok/s per request (a token every "
            f"{1000 / row.decode_tps:.4f} ms) is above {DECODE_PER_REQUEST_MAX_TPS:,.0f}: no "
            "serving engine streams one request that fast; the tool timed tokens that did not "
            "arrive one by one (a whole answer in one chunk, a mock server, a test sample)"
        )
    if row.ttft_s < TTFT_MIN_S:
        flags.append(
            f"TTFT {row.ttft_s * 1000:.3f} ms is below {TTFT_MIN_S * 1000:g} ms: less than an "
            "HTTP round trip with tokenizing and one forward pass"
        )
    if row.prefill_tps > PREFILL_PER_REQUEST_MAX_TPS:
        flags.append(
            f"prefill {row.prefill_tps:,.0f} tok/s per request is above "
            f"{PREFILL_PER_REQUEST_MAX_TPS:,.0f}: the prompt was probably served from the "
            "prefix cache, so TTFT is not a cold prefill"
        )
    ceiling = row.concurrency * row.decode_tps
    if row.aggregate_tps > AGGREGATE_SLACK * ceiling:
        flags.append(
            f"aggregate {row.aggregate_tps:,.1f} tok/s is {row.aggregate_tps / ceiling:.1f}x "
            f"concurrency x per-request decode ({row.concurrency} x {row.decode_tps:,.1f}): "
            "requests in flight cannot together emit faster than each does alone, so the "
            "concurrency or the decode figure is not what the run had"
        )
    return [f"{_cell(row)}: implausible: {flag}" for flag in flags]


def implausible(rows: Sequence[ImportedRow]) -> list[str]:
    """Every flag of every row, in row order."""
    return [flag for row in rows for flag in row_flags(row)]
