"""Where NEW wins and where it loses: a comparison's cells summed up by figure and region.

The regions are the seed's way of reading a comparison ("decode better at concurrency ≥ 2,
worse at 1 and past 128K"): the paired cells split into short and long prompts at the geometric
middle of their prompt range, and into the lowest concurrency measured (a single stream, as a
rule) and the batched ones above it (with 1K–512K × 1/2/4/8: short = up to 16K, low = 1).
Regions are named by their bounds (``prompts ≤ 16K × concurrency 1``). A region is ``better`` or
``worse`` when more of its cells beat the noise that way than the other way and than stayed
within it, ``mixed`` when cells beat the noise both ways, else ``noise``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from sparktop.sweep.compare.compare import CellChange, Comparison, FigureComparison, Verdict


@dataclass(frozen=True, slots=True)
class Region:
    """One region's cells of one figure: counts by verdict, the median % change of all its
    cells, and the region's verdict (``better``, ``worse``, ``mixed`` or ``noise``)."""

    name: str
    cells: int
    better: int
    worse: int
    noise: int
    median_change_pct: float
    verdict: str


@dataclass(frozen=True, slots=True)
class FigureSummary:
    """A figure's verdict counts over all paired cells, and its regions (empty regions left
    out)."""

    key: str
    label: str
    better: int
    worse: int
    noise: int
    regions: tuple[Region, ...]


@dataclass(frozen=True, slots=True)
class Summary:
    """The summaries of the compared figures, and the splits the regions use: prompts up to
    ``short_max_prompt`` tokens are short, concurrency up to ``low_max_concurrency`` is low
    (the lowest measured)."""

    figures: tuple[FigureSummary, ...]
    short_max_prompt: int
    low_max_concurrency: int

    def wins(self) -> list[tuple[FigureSummary, Region]]:
        """(figure, region) pairs where NEW is better."""
        return [(f, r) for f in self.figures for r in f.regions if r.verdict == "better"]

    def losses(self) -> list[tuple[FigureSummary, Region]]:
        """(figure, region) pairs where NEW is worse."""
        return [(f, r) for f in self.figures for r in f.regions if r.verdict == "worse"]


def _split(values: list[int]) -> int:
    """The largest value at or below the geometric middle of ``values``."""
    low, high = min(values), max(values)
    middle = math.sqrt(low * high)
    return max(v for v in values if v <= middle)


def _verdict(cells: list[CellChange]) -> str:
    better = sum(c.verdict is Verdict.BETTER for c in cells)
    worse = sum(c.verdict is Verdict.WORSE for c in cells)
    noise = len(cells) - better - worse
    if better > worse and better >= noise:
        return "better"
    if worse > better and worse >= noise:
        return "worse"
    return "mixed" if better and worse else "noise"


def _region(name: str, cells: list[CellChange]) -> Region:
    return Region(
        name=name,
        cells=len(cells),
        better=sum(c.verdict is Verdict.BETTER for c in cells),
        worse=sum(c.verdict is Verdict.WORSE for c in cells),
        noise=sum(c.verdict is Verdict.NOISE for c in cells),
        median_change_pct=statistics.median(c.change_pct for c in cells),
        verdict=_verdict(cells),
    )


def _names(cells: list[CellChange], short_max: int, low_max: int) -> dict[bool, str]:
    """Region names of the two prompt halves, by the labels of the cells at their bounds."""
    by_prompt = sorted(cells, key=lambda c: c.new_prompt_tokens)
    short = [c for c in by_prompt if c.new_prompt_tokens <= short_max]
    long = [c for c in by_prompt if c.new_prompt_tokens > short_max]
    return {
        True: f"prompts ≤ {short[-1].label}" if short else "",
        False: f"prompts ≥ {long[0].label}" if long else "",
    }


def _figure(fig: FigureComparison, short_max: int, low_max: int) -> FigureSummary:
    regions = []
    prompts = _names(list(fig.cells), short_max, low_max)
    highs = sorted({c.concurrency for c in fig.cells if c.concurrency > low_max})
    high_name = f"concurrency ≥ {highs[0]}" if highs else ""
    for is_short in (True, False):
        prompt_name = prompts[is_short]
        for conc_name, is_low in ((f"concurrency {low_max}", True), (high_name, False)):
            cells = [
                c
                for c in fig.cells
                if (c.new_prompt_tokens <= short_max) == is_short
                and (c.concurrency <= low_max) == is_low
            ]
            if cells:
                regions.append(_region(f"{prompt_name} × {conc_name}", cells))
    whole = _region("all", list(fig.cells))
    return FigureSummary(
        fig.figure.key, fig.figure.label, whole.better, whole.worse, whole.noise, tuple(regions)
    )


def summarize(comparison: Comparison) -> Summary:
    """Verdict counts and regions of every compared figure (see the module doc)."""
    compared = [f for f in comparison.figures if f.cells]
    cells = [c for f in compared for c in f.cells]
    if not cells:
        return Summary((), 0, 0)
    short_max = _split(sorted({c.new_prompt_tokens for c in cells}))
    low_max = min(c.concurrency for c in cells)
    return Summary(tuple(_figure(f, short_max, low_max) for f in compared), short_max, low_max)
