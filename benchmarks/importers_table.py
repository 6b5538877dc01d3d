"""The comparison table of ``importers_vs_sweep.py``: imported profiles against two
``sparktop sweep`` profiles of the same server, cell by cell.

A cell is (nominal prompt tokens, concurrency). A tool's row belongs to the nominal prompt
within :data:`PROMPT_MATCH` of it (tools count prompts with their own templates); the prompt
it reports is shown in its own table. The noise floor of a figure in a cell is the spread
of the two sweeps, ``|A - B| / mean(A, B)``, but at least the median spread of that figure
over all cells (two runs can agree by chance in one cell); a tool's figure is given as its
difference from the sweeps' mean, marked ``**`` when that difference is larger than the
floor.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

PROMPT_MATCH = 0.25


@dataclass(frozen=True, slots=True)
class Metric:
    """One figure compared: ``sweep`` reads it from a sweep row, ``tool`` from a tool's row
    (None when that tool's profile does not define it the sweep's way)."""

    title: str
    unit: str
    sweep: Callable[[Any], float | None]
    tool: Callable[[str, Any], float | None]
    digits: int


def _e2e(tool: str, row: Any) -> float | None:
    return None if tool == "llama-benchy" else row.aggregate_tps


def _decode_only(tool: str, row: Any) -> float | None:
    return row.aggregate_tps if tool == "llama-benchy" else None


METRICS = (
    Metric("TTFT", "ms", lambda r: r.ttft_s * 1000, lambda _t, r: r.ttft_s * 1000, 1),
    Metric("decode per request", "tok/s", lambda r: r.decode_tps, lambda _t, r: r.decode_tps, 1),
    Metric(
        "aggregate, end-to-end (output tokens / whole run)",
        "tok/s",
        lambda r: getattr(r, "aggregate_e2e_tps", None),
        _e2e,
        1,
    ),
    Metric(
        "aggregate, decode-only (output tokens / generation time; llama-benchy's kind)",
        "tok/s",
        lambda r: r.aggregate_tps,
        _decode_only,
        1,
    ),
)


def cell_of(prompt: float, prompts: Sequence[int]) -> int | None:
    """The nominal prompt a measured one belongs to, or None if none is within reach."""
    best = min(prompts, key=lambda p: abs(prompt - p))
    return best if abs(prompt - best) <= PROMPT_MATCH * best else None


def by_cell(rows: Sequence[Any], prompts: Sequence[int]) -> dict[tuple[int, int], Any]:
    """Rows keyed by (nominal prompt, concurrency)."""
    cells: dict[tuple[int, int], Any] = {}
    for row in rows:
        nominal = cell_of(row.prompt_tokens, prompts)
        if nominal is not None:
            cells[(nominal, row.concurrency)] = row
    return cells


def _fmt(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """A tool's figure against the sweeps in one cell."""

    tool: str
    cell: tuple[int, int]
    metric: str
    value: float
    deviation: float
    floor: float

    @property
    def beyond(self) -> bool:
        return abs(self.deviation) > self.floor


def compare(
    sweeps: tuple[Sequence[Any], Sequence[Any]],
    tools: dict[str, Sequence[Any]],
    prompts: Sequence[int],
    concurrencies: Sequence[int],
) -> tuple[str, list[Outcome]]:
    """Markdown tables (one per metric, then the prompts as counted) and every outcome."""
    a, b = (by_cell(s, prompts) for s in sweeps)
    mine = {name: by_cell(rows, prompts) for name, rows in tools.items()}
    names = list(tools)
    cells = [(p, c) for p in prompts for c in concurrencies if (p, c) in a and (p, c) in b]
    out: list[str] = []
    outcomes: list[Outcome] = []
    for metric in METRICS:
        users = [n for n in names if any(metric.tool(n, r) is not None for r in mine[n].values())]
        if not users:
            continue
        out += [f"**{metric.title}**, {metric.unit}", ""]
        out.append(
            "| prompt × conc | sweep A | sweep B | noise floor | " + " | ".join(users) + " |"
        )
        out.append("|---|---:|---:|---:|" + "---:|" * len(users))
        pairs = {c: (metric.sweep(a[c]), metric.sweep(b[c])) for c in cells}
        spreads = {c: abs(x - y) / ((x + y) / 2) for c, (x, y) in pairs.items() if x and y}
        typical = statistics.median(spreads.values()) if spreads else 0.0
        for cell, spread in spreads.items():
            va, vb = pairs[cell]
            assert va is not None and vb is not None
            mean, floor = (va + vb) / 2, max(spread, typical)
            line = f"| {cell[0]:,} × {cell[1]} | {_fmt(va, metric.digits)} | "
            line += f"{_fmt(vb, metric.digits)} | {floor:.0%} |"
            for name in users:
                row = mine[name].get(cell)
                value = None if row is None else metric.tool(name, row)
                if value is None:
                    line += " — |"
                    continue
                res = Outcome(name, cell, metric.title, value, value / mean - 1, floor)
                outcomes.append(res)
                mark = "**" if res.beyond else ""
                line += f" {mark}{_fmt(value, metric.digits)} ({res.deviation:+.0%}){mark} |"
            out.append(line)
        out.append("")
        out.append(f"Median spread of the two sweeps over these cells: {typical:.0%}.")
        out.append("")
    out += ["**prompt tokens per request as each reports them**", ""]
    out.append("| prompt × conc | sweep A | sweep B | " + " | ".join(names) + " |")
    out.append("|---|---:|---:|" + "---:|" * len(names))
    for cell in cells:
        got = [mine[n].get(cell) for n in names]
        shown = ["—" if r is None else f"{r.prompt_tokens:,}" for r in got]
        line = f"| {cell[0]:,} × {cell[1]} | {a[cell].prompt_tokens:,} | "
        out.append(line + f"{b[cell].prompt_tokens:,} | " + " | ".join(shown) + " |")
    return "\n".join(out) + "\n", outcomes


def summary(outcomes: Sequence[Outcome]) -> str:
    """Per tool and metric: cells compared, cells beyond the floor, median difference."""
    lines = [
        "| tool | figure | cells | beyond the floor | median difference |",
        "|---|---|---:|---:|---:|",
    ]
    keys = sorted({(o.tool, o.metric) for o in outcomes}, key=lambda k: (k[0], k[1]))
    for tool, metric in keys:
        mine = sorted(o.deviation for o in outcomes if (o.tool, o.metric) == (tool, metric))
        beyond = sum(o.beyond for o in outcomes if (o.tool, o.metric) == (tool, metric))
        median = statistics.median(mine)
        lines.append(
            f"| {tool} | {metric.split(' (')[0]} | {len(mine)} | {beyond} | {median:+.0%} |"
        )
    return "\n".join(lines) + "\n"
