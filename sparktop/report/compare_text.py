"""A profile comparison as text (one grid per figure, the seed's ``old→new (±x%)`` cells) and
as JSON (schema ``sparktop.compare/1``, documented in ``docs/compare.md``)."""

from __future__ import annotations

import math
from typing import Any

from sparktop.sweep.compare.compare import CellChange, Comparison, FigureComparison, Verdict
from sparktop.sweep.compare.compare_summary import Summary, summarize

SCHEMA = "sparktop.compare/1"
NOISE_MARK = "~"
"""After a change within the noise (benchstat's mark for "no significant change")."""


def pct_text(pct: float) -> str:
    """``50.06`` → ``+50%``; rounded half away from zero, as the seed rounds."""
    whole = math.floor(abs(pct) + 0.5)
    return f"{'-' if pct < 0 and whole else '+'}{whole}%"


def places(fig: FigureComparison) -> int:
    """Decimals a figure's cells are shown with, as the seed prints them: seconds 2, rates 1,
    rates of a figure that reaches 1,000 tok/s none."""
    if fig.figure.unit == "s":
        return 2
    top = max((max(c.old, c.new) for c in fig.cells), default=0.0)
    return 0 if top >= 1000 else 1


def cell_text(cell: CellChange, decimals: int) -> str:
    """``268.7→403.2 +50%``, with :data:`NOISE_MARK` after a change within the noise."""
    mark = NOISE_MARK if cell.verdict is Verdict.NOISE else ""
    return f"{cell.old:,.{decimals}f}→{cell.new:,.{decimals}f} {pct_text(cell.change_pct)}{mark}"


def _grid(fig: FigureComparison) -> list[str]:
    """Prompt rows × concurrency columns; a cell without a pair stays blank (the cells only
    one side has are listed after the grids)."""
    decimals = places(fig)
    concurrencies = sorted({c.concurrency for c in fig.cells})
    cells = {(c.label, c.concurrency): c for c in fig.cells}
    order: dict[str, int] = {}
    for c in sorted(fig.cells, key=lambda c: c.new_prompt_tokens):
        order.setdefault(c.label, len(order))
    table = [["", *(f"× {c}" for c in concurrencies)]]
    for label in order:
        row = [label]
        for conc in concurrencies:
            cell = cells.get((label, conc))
            row.append(cell_text(cell, decimals) if cell else "")
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = []
    for row in table:
        texts = (
            t.rjust(w) if i else t.ljust(w)
            for i, (t, w) in enumerate(zip(row, widths, strict=True))
        )
        lines.append(("  " + "  ".join(texts)).rstrip())
    return lines


def _limit_text(value: int | str | None) -> str:
    if value is None:
        return "not stated"
    return f"{value:,}" if isinstance(value, int) else value


def _only_text(names: tuple[str, ...]) -> str:
    """``("1K × 1", "4K × 1", "1K × 2")`` → ``"3: × 1 1K, 4K; × 2 1K"``."""
    if not names:
        return "none"
    by_conc: dict[str, list[str]] = {}
    for name in names:
        label, conc = name.rsplit(" × ", 1)
        by_conc.setdefault(conc, []).append(label)
    groups = "; ".join(f"× {c} {', '.join(labels)}" for c, labels in by_conc.items())
    return f"{len(names)}: {groups}"


def _summary_lines(summary: Summary) -> list[str]:
    if not summary.figures:
        return []
    lines = ["summary (cells beyond the noise):"]
    width = max(len(f.label) for f in summary.figures)
    for f in summary.figures:
        total = f.better + f.worse + f.noise
        lines.append(
            f"  {f.label:<{width}}  better in {f.better} of {total} cells, worse in {f.worse}, "
            f"within noise {f.noise}"
        )
    for title, pairs in (("NEW wins", summary.wins()), ("NEW loses", summary.losses())):
        if not pairs:
            lines.append(f"  {title}: nowhere beyond the noise")
            continue
        lines.append(f"  {title}:")
        for f in summary.figures:
            said = ", ".join(
                f"{r.name} (median {pct_text(r.median_change_pct)})" for g, r in pairs if g is f
            )
            if said:
                lines.append(f"    {f.label:<{width}}  {said}")
    return lines


def render_text(comparison: Comparison, fail_pct: float | None = None) -> str:
    """The comparison for a terminal (plain text, ≤ ~110 columns with four concurrencies)."""
    old, new = comparison.old, comparison.new
    lines = [
        f"OLD {old.name}  ({old.origin})",
        f"NEW {new.name}  ({new.origin})",
        f"cells paired by {comparison.paired_by}; change = (NEW − OLD) ÷ OLD; "
        f"'{NOISE_MARK}' = within noise",
        f"noise: OLD {comparison.old_noise}; NEW {comparison.new_noise}",
        "",
        "limits:",
    ]
    width = max(len(lim.name) for lim in comparison.limits)
    for lim in comparison.limits:
        if lim.old is None and lim.new is None:
            continue
        if isinstance(lim.old, int) and isinstance(lim.new, int) and lim.changed:
            change = pct_text((lim.new - lim.old) / lim.old * 100)
            text = f"{_limit_text(lim.old)} → {_limit_text(lim.new)}  ({change})"
        elif lim.old == lim.new and lim.old is not None:
            text = f"{_limit_text(lim.new)} (both)"
        else:
            text = f"OLD {_limit_text(lim.old)}\n  {'':<{width}}  NEW {_limit_text(lim.new)}"
        lines.append(f"  {lim.name:<{width}}  {text}")
    lines += [f"note: {n}" for n in comparison.notes]
    for fig in comparison.figures:
        better = "lower" if fig.figure.lower_is_better else "higher"
        lines.append("")
        if fig.skipped:
            lines.append(f"{fig.figure.label}: not compared: {fig.skipped}")
            continue
        bases = sorted({c.basis for c in fig.cells})
        lines.append(
            f"{fig.figure.label} ({fig.figure.unit}, {better} is better; noise basis: "
            f"{', '.join(bases)})"
        )
        lines += _grid(fig)
    if comparison.only_old or comparison.only_new:
        lines.append("")
        for side, names in (("OLD", comparison.only_old), ("NEW", comparison.only_new)):
            lines.append(f"cells only in {side}: {_only_text(names)}")
    lines.append("")
    lines += _summary_lines(summarize(comparison))
    if fail_pct is not None:
        lines.append("")
        lines += regression_lines(comparison, fail_pct)
    return "\n".join(lines) + "\n"


def regression_lines(comparison: Comparison, pct: float) -> list[str]:
    """What ``--fail-on-regression PCT`` found, one line per regressed cell."""
    found = comparison.regressions(pct)
    if not found:
        return [f"no figure regressed by more than {pct:g}% beyond the noise"]
    head = f"regressed by more than {pct:g}% beyond the noise in {len(found)} cell(s):"
    return [head] + [
        f"  {f.figure.label} {c.label} × {c.concurrency}: {cell_text(c, places(f))} "
        f"(noise {c.noise_pct:.0f}%, {c.basis})"
        for f, c in found
    ]


def _cell_json(c: CellChange) -> dict[str, Any]:
    def side(noise: Any) -> dict[str, Any]:
        return {"pct": round(noise.pct, 2), "basis": noise.basis.value, "runs": noise.runs}

    return {
        "label": c.label,
        "concurrency": c.concurrency,
        "old_prompt_tokens": c.old_prompt_tokens,
        "new_prompt_tokens": c.new_prompt_tokens,
        "old": c.old,
        "new": c.new,
        "change_pct": round(c.change_pct, 3),
        "noise_pct": round(c.noise_pct, 3),
        "basis": c.basis,
        "old_noise": side(c.old_noise),
        "new_noise": side(c.new_noise),
        "verdict": c.verdict.value,
    }


def to_json(comparison: Comparison, fail_pct: float | None = None) -> dict[str, Any]:
    """The comparison as plain data (schema :data:`SCHEMA`; every key always present)."""
    summary = summarize(comparison)

    def profile(p: Any, noise: str) -> dict[str, Any]:
        return {"name": p.name, "origin": p.origin, "source": p.source, "noise": noise}

    regressions = comparison.regressions(fail_pct) if fail_pct is not None else ()
    return {
        "schema": SCHEMA,
        "old": profile(comparison.old, comparison.old_noise),
        "new": profile(comparison.new, comparison.new_noise),
        "paired_by": comparison.paired_by,
        "limits": [
            {"name": lim.name, "old": lim.old, "new": lim.new, "changed": lim.changed}
            for lim in comparison.limits
        ],
        "notes": list(comparison.notes),
        "figures": [
            {
                "key": f.figure.key,
                "label": f.figure.label,
                "unit": f.figure.unit,
                "lower_is_better": f.figure.lower_is_better,
                "compared": not f.skipped,
                "skipped": f.skipped or None,
                "old_meaning": f.old_meaning,
                "new_meaning": f.new_meaning,
                "cells": [_cell_json(c) for c in f.cells],
            }
            for f in comparison.figures
        ],
        "only_old": list(comparison.only_old),
        "only_new": list(comparison.only_new),
        "summary": {
            "short_max_prompt_tokens": summary.short_max_prompt,
            "low_max_concurrency": summary.low_max_concurrency,
            "figures": [
                {
                    "key": f.key,
                    "better": f.better,
                    "worse": f.worse,
                    "noise": f.noise,
                    "regions": [
                        {
                            "name": r.name,
                            "cells": r.cells,
                            "better": r.better,
                            "worse": r.worse,
                            "noise": r.noise,
                            "median_change_pct": round(r.median_change_pct, 3),
                            "verdict": r.verdict,
                        }
                        for r in f.regions
                    ],
                }
                for f in summary.figures
            ],
        },
        "fail_on_regression": None
        if fail_pct is None
        else {
            "pct": fail_pct,
            "regressed": bool(regressions),
            "cells": [{"figure": f.figure.key, **_cell_json(c)} for f, c in regressions],
        },
    }
