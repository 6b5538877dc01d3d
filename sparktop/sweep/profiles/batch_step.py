"""Where a profile's own rows show the ``max_num_batched_tokens`` step.

When ``concurrency × prompt`` passes ``max_num_batched_tokens`` the prefills no longer fit one
batch and TTFT steps up (the 2-Spark seed: 2,048 tokens × 4 = 8,192 → 1.38 s, × 6 = 12,288 →
6.06 s). The budget cites the step as *this* profile measured it, not another profile's row.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktop.sweep.profiles.profile import ProfileRow

SAME_PROMPT = 0.02
"""Rows whose prompts differ by less than this fraction are one prompt length (sweeps land
a few tokens off their target: 3,800 / 3,802 / 3,806)."""


@dataclass(frozen=True, slots=True)
class BatchStep:
    """Two rows of one prompt length either side of the limit: ``fits`` the largest
    concurrency whose prefills fit one batch, ``over`` the smallest that does not."""

    fits: ProfileRow
    over: ProfileRow

    @property
    def ratio(self) -> float:
        return self.over.ttft_s / self.fits.ttft_s if self.fits.ttft_s > 0 else 0.0

    def text(self) -> str:
        """``3,800 tokens × 2 → × 4: TTFT 2.55 s → 4.42 s``."""
        return (
            f"{self.fits.prompt_tokens:,} tokens × {self.fits.concurrency} → "
            f"× {self.over.concurrency}: TTFT {self.fits.ttft_s:,.2f} s → {self.over.ttft_s:,.2f} s"
        )


def _groups(rows: tuple[ProfileRow, ...]) -> list[list[ProfileRow]]:
    groups: list[list[ProfileRow]] = []
    for row in sorted(rows, key=lambda r: r.prompt_tokens):
        if groups and row.prompt_tokens <= groups[-1][0].prompt_tokens * (1 + SAME_PROMPT):
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


def batch_step(rows: tuple[ProfileRow, ...], limit: float) -> BatchStep | None:
    """The clearest step in ``rows`` at ``limit`` batched tokens (the largest TTFT jump
    across it, among prompts that fit one chunk), or None when no prompt length has rows on
    both sides."""
    best: BatchStep | None = None
    for group in _groups(rows):
        if group[0].prompt_tokens > limit:
            continue  # chunked prefill: a different effect
        fits = [r for r in group if r.prompt_tokens * r.concurrency <= limit]
        over = [r for r in group if r.prompt_tokens * r.concurrency > limit]
        if not fits or not over:
            continue
        step = BatchStep(
            max(fits, key=lambda r: r.concurrency), min(over, key=lambda r: r.concurrency)
        )
        if best is None or step.ratio > best.ratio:
            best = step
    return best
