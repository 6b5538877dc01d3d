"""Matching two sweep profiles for :mod:`sparktop.sweep.compare.compare`: which cells pair up, and
their serving limits side by side.

Cells pair by nominal context (``context_tokens``) and concurrency when every row of both
profiles has one (a sweep repeated with another tokenizer sends a few % more or fewer tokens
for the same "8K"), else by prompt tokens within :data:`PROMPT_MATCH` at the same
concurrency, closest first, each row once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sparktop.model import is_num
from sparktop.sweep.profiles.profile import Profile, ProfileRow

PROMPT_MATCH = 0.10
"""Without context labels, cells pair when their prompt lengths differ by at most 10 %."""


@dataclass(frozen=True, slots=True)
class LimitChange:
    """One serving limit or description: ``old``/``new`` as stated (None when not)."""

    name: str
    old: int | str | None
    new: int | str | None

    @property
    def changed(self) -> bool:
        return self.old is not None and self.new is not None and self.old != self.new


def cell_name(row: ProfileRow) -> str:
    """The row's context label, else its prompt tokens (``"8K"``, ``"8,192"``)."""
    return row.context or f"{row.prompt_tokens:,}"


def context_of(row: ProfileRow) -> int:
    """The row's nominal context tokens, 0 when the profile has none."""
    return int(row.context_tokens) if is_num(row.context_tokens) else 0


def pair_cells(
    old: Profile, new: Profile
) -> tuple[list[tuple[ProfileRow, ProfileRow]], list[ProfileRow], list[ProfileRow], str]:
    """(paired rows, rows only in OLD, rows only in NEW, how they were paired)."""
    by_context = all(context_of(r) for r in (*old.rows, *new.rows))
    pairs: list[tuple[ProfileRow, ProfileRow]] = []
    if by_context:
        index = {(context_of(r), r.concurrency): r for r in new.rows}
        for row in old.rows:
            other = index.pop((context_of(row), row.concurrency), None)
            if other is not None:
                pairs.append((row, other))
        how = "nominal context and concurrency"
    else:
        candidates = sorted(
            (abs(math.log(a.prompt_tokens / b.prompt_tokens)), i, j)
            for i, a in enumerate(old.rows)
            for j, b in enumerate(new.rows)
            if a.concurrency == b.concurrency
        )
        used_old: set[int] = set()
        used_new: set[int] = set()
        for gap, i, j in candidates:  # closest first, each row once
            if gap <= math.log1p(PROMPT_MATCH) and i not in used_old and j not in used_new:
                used_old.add(i)
                used_new.add(j)
                pairs.append((old.rows[i], new.rows[j]))
        how = f"prompt tokens within {PROMPT_MATCH:.0%} at the same concurrency"
    paired_old = {id(a) for a, _ in pairs}
    paired_new = {id(b) for _, b in pairs}
    pairs.sort(key=lambda p: (p[1].concurrency, p[1].prompt_tokens))
    only_old = [r for r in old.rows if id(r) not in paired_old]
    only_new = [r for r in new.rows if id(r) not in paired_new]
    return pairs, only_old, only_new, how


def limit_changes(old: Profile, new: Profile) -> tuple[LimitChange, ...]:
    """The limits and descriptions of both profiles, in a fixed order."""

    def val(value: object) -> int | str | None:
        if isinstance(value, str):
            return value or None
        return int(value) if is_num(value) else None

    names = (
        "kv_pool_tokens",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "output_tokens",
        "aggregate_kind",
        "nodes",
        "model",
        "engine",
        "cluster",
    )
    return tuple(LimitChange(n, val(getattr(old, n)), val(getattr(new, n))) for n in names)
