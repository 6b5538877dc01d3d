"""Two sweep profiles side by side, cell by cell: what changed, and whether it beats the noise.

:func:`compare` pairs the cells of an OLD and a NEW profile (the same serving setup before and
after an image, checkpoint or flag change), and for each figure both profiles define the same
way gives every shared cell OLD → NEW, the % change ``(new − old) ÷ old × 100`` (the 4-Spark
seed's section 6 convention) and a verdict: ``better`` or ``worse`` only when the change is
larger than the cell's noise on both sides together (:mod:`sparktop.sweep.compare.compare_noise`:
``|ln(new ÷ old)| > noise_old + noise_new``), else ``noise``. The text and JSON views live in
:mod:`sparktop.report.compare_text`; a plot can draw :attr:`FigureComparison.cells` directly.

Cells pair as :mod:`sparktop.sweep.compare.compare_match` says (nominal context, else prompt tokens
within 10 %, at the same concurrency).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

from sparktop.model import is_num
from sparktop.sweep.compare.compare_match import (
    LimitChange,
    cell_name,
    context_of,
    limit_changes,
    pair_cells,
)
from sparktop.sweep.compare.compare_noise import Noise, NoiseModel
from sparktop.sweep.profiles.profile import Profile, ProfileRow


class Verdict(enum.StrEnum):
    """What a change means for the operator."""

    BETTER = "better"
    WORSE = "worse"
    NOISE = "noise"


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure two profiles can share. ``key`` names it in JSON; ``lower_is_better`` for
    times."""

    key: str
    label: str
    unit: str
    lower_is_better: bool = False


FIGURES = (
    Figure("ttft_s", "TTFT", "s", lower_is_better=True),
    Figure("prefill_tps", "prefill per request", "tok/s"),
    Figure("aggregate_prefill_tps", "aggregate prefill", "tok/s"),
    Figure("decode_tps", "decode per request", "tok/s"),
    Figure("aggregate_decode_tps", "aggregate decode-only", "tok/s"),
    Figure("aggregate_e2e_tps", "aggregate end-to-end", "tok/s"),
)


def figure_column(profile: Profile, key: str) -> str | None:
    """The profile column holding figure ``key``, or None when the profile lacks it: the
    aggregate is ``aggregate_tps`` under the profile's ``aggregate_kind``, and a decode-only
    profile may carry the end-to-end one as ``aggregate_e2e_tps``."""
    kind = profile.aggregate_kind
    column = {
        "aggregate_decode_tps": "aggregate_tps" if kind == "decode-only" else None,
        "aggregate_e2e_tps": "aggregate_tps" if kind == "end-to-end" else "aggregate_e2e_tps",
    }.get(key, key)
    if column is None:
        return None
    present = {name for name, _ in profile.columns} or {
        "ttft_s",
        "prefill_tps",
        "decode_tps",
        "aggregate_tps",
    }
    return column if column in present else None


@dataclass(frozen=True, slots=True)
class CellChange:
    """One cell of one figure: ``concurrency`` requests of ``label`` (the context label, or
    the prompt tokens); prompt tokens as each side sent them; ``old``/``new`` in the figure's
    unit; ``change_pct`` = (new − old) ÷ old × 100; ``noise_pct`` the smallest change in
    the same direction that counts (both sides' noise together: ``threshold_ln`` in logs, so
    a fall must pass 1 − 1 ÷ (1 + rise)); each side's :class:`Noise`."""

    label: str
    concurrency: int
    old_prompt_tokens: int
    new_prompt_tokens: int
    old: float
    new: float
    change_pct: float
    noise_pct: float
    threshold_ln: float
    old_noise: Noise
    new_noise: Noise
    verdict: Verdict

    @property
    def basis(self) -> str:
        """Which noise the verdict rests on: ``runs``, ``band``, ``none`` or ``runs+band``."""
        kinds = sorted({self.old_noise.basis.value, self.new_noise.basis.value})
        return "+".join(kinds)


@dataclass(frozen=True, slots=True)
class FigureComparison:
    """One figure across the paired cells. ``skipped`` says why it is not compared ("" when
    it is); ``old_meaning``/``new_meaning`` are the profiles' own column definitions."""

    figure: Figure
    cells: tuple[CellChange, ...]
    skipped: str = ""
    old_meaning: str = ""
    new_meaning: str = ""

    def worse_beyond(self, pct: float) -> tuple[CellChange, ...]:
        """Cells that got worse beyond the noise and by more than ``pct`` %."""
        return tuple(
            c for c in self.cells if c.verdict is Verdict.WORSE and abs(c.change_pct) > pct
        )


@dataclass(frozen=True, slots=True)
class Comparison:
    """OLD against NEW: the figures, the cells only one side has (labels ``"8K × 4"``), the
    limits, how cells were paired, where each side's noise comes from, and notes on
    definitions that differ."""

    old: Profile
    new: Profile
    figures: tuple[FigureComparison, ...]
    only_old: tuple[str, ...]
    only_new: tuple[str, ...]
    limits: tuple[LimitChange, ...]
    paired_by: str
    old_noise: str
    new_noise: str
    notes: tuple[str, ...]

    def regressions(self, pct: float) -> tuple[tuple[FigureComparison, CellChange], ...]:
        """Every (figure, cell) worse than OLD beyond noise and by more than ``pct`` %."""
        return tuple((f, c) for f in self.figures for c in f.worse_beyond(pct))


def _value(row: ProfileRow, column: str) -> float | None:
    value = getattr(row, column)
    return float(value) if is_num(value) and value > 0 else None


def _change(
    fig: Figure,
    pair: tuple[ProfileRow, ProfileRow],
    columns: tuple[str, str],
    noise: tuple[NoiseModel, NoiseModel],
) -> CellChange | None:
    a, b = pair
    old, new = _value(a, columns[0]), _value(b, columns[1])
    if old is None or new is None:
        return None
    n_old = noise[0].noise(columns[0], a.prompt_tokens, a.concurrency, context_of(a))
    n_new = noise[1].noise(columns[1], b.prompt_tokens, b.concurrency, context_of(b))
    ln = math.log(new / old)
    threshold = n_old.ln + n_new.ln
    if abs(ln) <= threshold:
        verdict = Verdict.NOISE
    else:
        verdict = Verdict.WORSE if (ln > 0) == fig.lower_is_better else Verdict.BETTER
    return CellChange(
        label=cell_name(b) if b.context else cell_name(a),
        concurrency=b.concurrency,
        old_prompt_tokens=a.prompt_tokens,
        new_prompt_tokens=b.prompt_tokens,
        old=old,
        new=new,
        change_pct=(new - old) / old * 100.0,
        noise_pct=(math.expm1(threshold) if ln >= 0 else -math.expm1(-threshold)) * 100.0,
        threshold_ln=threshold,
        old_noise=n_old,
        new_noise=n_new,
        verdict=verdict,
    )


def _skip_reason(fig: Figure, old: Profile, new: Profile, cols: tuple[str | None, ...]) -> str:
    for side, profile, column in (("OLD", old, cols[0]), ("NEW", new, cols[1])):
        if column is None:
            if fig.key.startswith("aggregate_") and fig.key != "aggregate_prefill_tps":
                return f"{side}'s aggregate is {profile.aggregate_kind}: another definition"
            return f"{side} has no {fig.key} column"
        if column in profile.derived_columns:
            return f"{side}'s {column} is derived, not measured ({profile.meaning(column)})"
    return ""


def _notes(old: Profile, new: Profile, figures: tuple[FigureComparison, ...]) -> list[str]:
    notes = []
    if old.aggregate_kind != new.aggregate_kind:
        notes.append(
            f"aggregates differ: OLD's is {old.aggregate_kind}, NEW's {new.aggregate_kind}; "
            "only an aggregate both define the same way is compared"
        )
    if is_num(old.output_tokens) and is_num(new.output_tokens):
        if old.output_tokens != new.output_tokens:
            notes.append(
                f"output tokens per request differ ({old.output_tokens} vs "
                f"{new.output_tokens}): aggregates and wall times are not like for like"
            )
    elif old.output_tokens != new.output_tokens:
        notes.append("output tokens per request are not stated by both: aggregates may differ")
    notes += [
        f"{f.figure.label}: defined differently in wording: OLD '{f.old_meaning}'; "
        f"NEW '{f.new_meaning}'"
        for f in figures
        if not f.skipped and f.old_meaning and f.new_meaning and f.old_meaning != f.new_meaning
    ]
    return notes


def compare(
    old: Profile,
    new: Profile,
    old_noise: NoiseModel | None = None,
    new_noise: NoiseModel | None = None,
    figures: tuple[Figure, ...] = FIGURES,
) -> Comparison:
    """Compare ``new`` against ``old`` (see the module doc). The noise models default to
    :meth:`NoiseModel.of` each profile (its runs file when one is beside it)."""
    noise = (old_noise or NoiseModel.of(old), new_noise or NoiseModel.of(new))
    pairs, only_old, only_new, how = pair_cells(old, new)
    results: list[FigureComparison] = []
    for fig in figures:
        cols = (figure_column(old, fig.key), figure_column(new, fig.key))
        reason = _skip_reason(fig, old, new, cols)
        if reason or cols[0] is None or cols[1] is None:
            results.append(FigureComparison(fig, (), reason))
            continue
        found = (_change(fig, p, (cols[0], cols[1]), noise) for p in pairs)
        cells = tuple(c for c in found if c is not None)
        results.append(
            FigureComparison(
                fig,
                cells,
                "" if cells else "no shared cell has it on both sides",
                old.meaning(cols[0]),
                new.meaning(cols[1]),
            )
        )
    name: Callable[[ProfileRow], str] = lambda r: f"{cell_name(r)} × {r.concurrency}"  # noqa: E731
    return Comparison(
        old=old,
        new=new,
        figures=tuple(results),
        only_old=tuple(name(r) for r in only_old),
        only_new=tuple(name(r) for r in only_new),
        limits=limit_changes(old, new),
        paired_by=how,
        old_noise=noise[0].source,
        new_noise=noise[1].source,
        notes=tuple(_notes(old, new, tuple(results))),
    )
