"""How much a profile's cell moves by chance: the noise a comparison measures changes against.

Two sources, best first, per cell and figure:

- **runs**: the run-to-run spread a ``sparktop sweep`` recorded. Beside a profile file ``X.yaml``
  the sweep keeps ``X.yaml.runs.jsonl`` (:mod:`sparktop.sweep.runner.sweep_state`) with every
  request of every run; each run's figures are recomputed as the sweep computed them
  (:func:`sparktop.sweep.runner.sweep_cells.run_figures`) and the noise is the full range over the
  runs, ``ln(max / min)``, but at least the median of that range over the sweep's cells (the
  range of 2 or 3 runs is small by chance every few cells; the sweep's typical range steadies
  it). A cell needs at least 2 runs with the figure;
- **band**: the estimator's held-out band at the cell
  (:meth:`sparktop.sweep.estimator.estimator.Fitted.band` as if the cell were estimated, not read):
  1.5 × the distance-weighted RMS of the errors the surface made on nearby cells held out. It
  measures how irregular the table is around the cell, an upper bound of its noise when no runs were
  kept (the seeds publish none);
- **none**: neither (a profile of fewer than 3 cells, a figure the estimator does not model).

Every side's noise is at least :data:`NOISE_FLOOR_LN` (figures are written rounded).
"""

from __future__ import annotations

import enum
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from sparktop.errors import UserError
from sparktop.sweep.estimator.estimator import fitted
from sparktop.sweep.estimator.surface import Part
from sparktop.sweep.profiles.profile import Profile
from sparktop.sweep.runner.sweep_cells import run_figures
from sparktop.sweep.runner.sweep_state import read_runs, runs_path

NOISE_FLOOR_LN = 0.01
"""Least noise of one side, log (about 1 %): profiles round their figures."""

BAND_METRIC = {
    "ttft_s": "ttft_s",
    "prefill_tps": "prefill_tps",
    "decode_tps": "decode_tps",
    "aggregate_tps": "aggregate_tps",
    "aggregate_prefill_tps": "ttft_s",  # Σ prompt ÷ max TTFT moves with TTFT
    "aggregate_e2e_tps": "aggregate_tps",
}
"""Profile column → the estimator figure whose band stands for its noise."""


class NoiseBasis(enum.StrEnum):
    """Where a side's noise figure comes from."""

    RUNS = "runs"
    BAND = "band"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class Noise:
    """One side's noise at one cell: ``ln`` (log of a ratio, ≥ the floor), its ``basis`` and
    for runs how many there were."""

    ln: float
    basis: NoiseBasis
    runs: int = 0

    @property
    def pct(self) -> float:
        """The noise as a % change (``exp(ln) − 1``)."""
        return math.expm1(self.ln) * 100.0


RunValues = dict[tuple[int, int], dict[str, tuple[float, ...]]]
"""(context tokens, concurrency) → figure → its value in each run."""


def runs_file_of(profile: Profile) -> Path | None:
    """The runs file ``sparktop sweep`` kept beside ``profile``'s file, if there is one."""
    if profile.origin in ("built-in", "sweep") or not profile.origin:
        return None
    path = runs_path(Path(profile.origin))
    return path if path.is_file() else None


def read_run_values(path: Path) -> RunValues:
    """Per-run figures of every cell of a runs file. UserError naming the file and line when
    it is not one."""
    _plan, _prov, cells = read_runs(path)
    out: RunValues = {}
    for cell in cells:
        per_run = [
            f
            for f in (run_figures(r, w) for r, w in zip(cell.runs, cell.walls_s, strict=True))
            if f
        ]
        figures: dict[str, tuple[float, ...]] = {}
        for name in {k for f in per_run for k in f}:
            figures[name] = tuple(f[name] for f in per_run if f.get(name, 0) > 0)
        out[(cell.context_tokens, cell.concurrency)] = figures
    return out


def _spread(values: tuple[float, ...]) -> float:
    """The full range of ``values`` as a log ratio, ``ln(max / min)``."""
    return math.log(max(values) / min(values))


class NoiseModel:
    """The noise of one profile's cells: from its runs file when it has one, else its
    estimator band. ``source`` says which in one line."""

    def __init__(
        self,
        profile: Profile,
        runs: RunValues | None = None,
        runs_from: str = "",
        runs_problem: str = "",
    ):
        self.profile = profile
        self.runs = runs or {}
        self.runs_from = runs_from
        self.runs_problem = runs_problem
        self._fit = fitted(profile) if len(profile.rows) >= 3 else None
        self._typical: dict[str, float] = {}
        for name in {k for figures in self.runs.values() for k in figures}:
            spreads = [_spread(f[name]) for f in self.runs.values() if len(f.get(name, ())) >= 2]
            if spreads:
                self._typical[name] = statistics.median(spreads)

    @classmethod
    def of(cls, profile: Profile) -> NoiseModel:
        """The noise model of a loaded profile, with its runs file when one is beside it."""
        path = runs_file_of(profile)
        if path is None:
            return cls(profile)
        try:
            return cls(profile, read_run_values(path), str(path))
        except UserError as exc:  # a broken runs file: the band, and ``source`` says why
            return cls(profile, runs_problem=str(exc))

    @property
    def source(self) -> str:
        runs = max((len(v) for f in self.runs.values() for v in f.values()), default=0)
        if self.runs_from and runs >= 2:
            return f"run-to-run spread ({self.runs_from}, up to {runs} runs a cell)"
        kept = "no runs kept"
        if self.runs_problem:
            kept = f"runs unusable: {self.runs_problem}"
        elif self.runs_from:
            kept = f"{self.runs_from} has 1 run a cell: no spread"
        if self._fit is not None:
            return f"estimator band ({kept})"
        return f"none ({kept}, too few cells for a band)"

    def noise(self, column: str, prompt_tokens: int, concurrency: int, context: int) -> Noise:
        """The noise of ``column`` at a cell (``context`` = its nominal context tokens, the
        runs file's key; 0 when the profile has none)."""
        values = self.runs.get((context, concurrency), {}).get(column, ())
        if len(values) >= 2:
            spread = max(_spread(values), self._typical.get(column, 0.0))
            return Noise(max(NOISE_FLOOR_LN, spread), NoiseBasis.RUNS, len(values))
        metric = BAND_METRIC.get(column)
        if self._fit is not None and metric is not None:
            half = self._fit.band(metric, Part(0.0, "fitted"), float(prompt_tokens), concurrency)
            if half is not None:
                return Noise(max(NOISE_FLOOR_LN, half), NoiseBasis.BAND)
        return Noise(NOISE_FLOOR_LN, NoiseBasis.NONE)
