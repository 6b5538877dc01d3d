"""A sweep cell's figures from its requests: per run, then the median over runs.

A *cell* is ``concurrency`` requests of one prompt length sent together, ``runs`` times.
Per run, over the requests that succeeded (failed ones are counted, never averaged in):

- ``ttft_s``, ``prefill_tps`` (prompt ÷ TTFT), ``decode_tps`` (tokens after the first ÷
  time after the first): means over requests, as the 4-Spark seed defines them;
- ``aggregate_prefill_tps`` = Σ prompt tokens ÷ max TTFT;
- ``aggregate_tps`` (decode-only) = Σ output tokens ÷ (last token of the run − max TTFT);
- ``aggregate_e2e_tps`` (end-to-end) = Σ output tokens ÷ the run's wall time;
- ``wall_s``: the run's wall time.

The cell's value of each figure is the median over its runs.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sparktop.sweep.runner.bench_client import RequestResult

FIGURES = (
    "prompt_tokens",
    "ttft_s",
    "prefill_tps",
    "decode_tps",
    "aggregate_prefill_tps",
    "aggregate_tps",
    "aggregate_e2e_tps",
    "wall_s",
)


@dataclass(frozen=True, slots=True)
class CellRuns:
    """What was measured in one cell: per run, its requests and wall time (s)."""

    context: str
    context_tokens: int
    concurrency: int
    runs: tuple[tuple[RequestResult, ...], ...]
    walls_s: tuple[float, ...]

    @property
    def requests(self) -> int:
        return sum(len(r) for r in self.runs)

    @property
    def failed(self) -> int:
        return sum(1 for run in self.runs for r in run if not r.ok)

    def errors(self) -> tuple[str, ...]:
        """Distinct failure reasons, in order of first appearance."""
        seen: list[str] = []
        for run in self.runs:
            for r in run:
                if not r.ok and r.error not in seen:
                    seen.append(r.error)
        return tuple(seen)


def run_figures(results: Sequence[RequestResult], wall_s: float) -> dict[str, float] | None:
    """One run's figures (see the module doc), or None when no request succeeded."""
    ok = [r for r in results if r.ok]
    if not ok:
        return None
    max_ttft = max(r.ttft_s for r in ok)
    last = max(r.ttft_s + r.decode_s for r in ok)
    outputs = sum(r.output_tokens for r in ok)
    decoders = [r.decode_tps for r in ok if r.decode_tps > 0]
    figures = {
        "prompt_tokens": statistics.fmean(r.prompt_tokens for r in ok),
        "ttft_s": statistics.fmean(r.ttft_s for r in ok),
        "prefill_tps": statistics.fmean(r.prefill_tps for r in ok),
        "aggregate_prefill_tps": sum(r.prompt_tokens for r in ok) / max_ttft,
        "aggregate_e2e_tps": outputs / wall_s if wall_s > 0 else 0.0,
        "wall_s": wall_s,
    }
    if decoders:
        figures["decode_tps"] = statistics.fmean(decoders)
    if last > max_ttft:
        figures["aggregate_tps"] = outputs / (last - max_ttft)
    return figures


def cell_figures(cell: CellRuns) -> dict[str, float] | None:
    """The cell's medians over runs; None when a figure the profile requires is missing
    from every run (all requests failed, or each gave a single token)."""
    pairs = zip(cell.runs, cell.walls_s, strict=True)
    per_run = [f for f in (run_figures(r, w) for r, w in pairs) if f]
    out: dict[str, float] = {}
    for name in FIGURES:
        values = [f[name] for f in per_run if name in f and f[name] > 0]
        if values:
            out[name] = statistics.median(values)
    return out if all(k in out for k in REQUIRED) else None


REQUIRED = ("prompt_tokens", "ttft_s", "prefill_tps", "decode_tps", "aggregate_tps")
"""Figures every profile row has; a cell without one of them is left out, with a reason."""


def no_figures_reason(cell: CellRuns) -> str:
    """Why :func:`cell_figures` gave None: every run failed (with the first reasons), or
    which required figures no run measured and why (decode needs tokens that come in over
    time after the first; a server that sends a whole answer in one burst gives none)."""
    if not any(r.ok for run in cell.runs for r in run):
        errors = "; ".join(cell.errors()[:2])
        return f"every request failed ({errors})" if errors else "every request failed"
    pairs = zip(cell.runs, cell.walls_s, strict=True)
    per_run = [f for f in (run_figures(r, w) for r, w in pairs) if f]
    missing = [k for k in REQUIRED if not any(f.get(k, 0) > 0 for f in per_run)]
    why = ", ".join(missing)
    if {"decode_tps", "aggregate_tps"} & set(missing):
        return (
            f"{why} not measured: every answer's tokens arrived in one burst, so no time "
            "after the first token to divide by (not a failure)"
        )
    return f"{why} not measured (not a failure)"


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """25th and 75th percentiles (inclusive method; both = the value for one value)."""
    if len(values) == 1:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]
