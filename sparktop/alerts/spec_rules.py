"""Speculative decoding: acceptance that falls well below the engine's own recent baseline.

Input: :attr:`~sparktop.model.EngineSample.spec_acceptance_rate` — accepted ÷ draft tokens
over the sample's window (Δ``vllm:spec_decode_num_accepted_tokens_total`` ÷
Δ``…num_draft_tokens_total``; SGLang's ``spec_accept_rate`` gauge) — and its history in the
cluster state. The baseline is the upper quartile of the engine's readings over the history
(up to 600 polls, 10 min at 1 Hz), so a collapse that lasts minutes does not teach the
baseline its own low value; before :data:`MIN_POINTS` readings there is none and the rule
says nothing. A reading computed over the server's lifetime (first scrape) is not judged.

``spec.acceptance`` (warning): acceptance ≥ ``spec_drop_pct`` (40 %) below the baseline, e.g.
MTP with 5 speculative tokens going from 54 % to 5 % of draft tokens (mean acceptance length
3.7 → 1.25): each step yields fewer tokens, so decode slows without any node throttling
(vLLM users report it after long inputs). Hysteresis: the alert engine's ``hold_s``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sparktop.alerts.context import Finding, RuleContext, Scope, rule
from sparktop.alerts.engine_rules import engine_finding, ok_engines, windowed
from sparktop.alerts.model import Severity
from sparktop.model import EngineSample, is_num

MIN_POINTS = 20
"""Readings of the engine's own acceptance needed before it has a baseline."""


def upper_quartile(values: tuple[float, ...]) -> float:
    """The 75th percentile by linear interpolation between closest ranks."""
    data = sorted(values)
    pos = 0.75 * (len(data) - 1)
    low = int(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def acceptance_baseline(ctx: RuleContext, engine: str) -> float | None:
    """The engine's recent acceptance (upper quartile of its history), or None without
    :data:`MIN_POINTS` readings."""
    values = ctx.state.history.get(engine, "spec_acceptance_rate").values()
    return upper_quartile(values) if len(values) >= MIN_POINTS else None


@dataclass(frozen=True, slots=True)
class SpecDrop:
    """Acceptance ``rate`` (fraction of draft tokens) ``below_pct`` % under its recent
    ``baseline`` (fraction)."""

    rate: float
    baseline: float
    below_pct: float


def spec_drop(ctx: RuleContext, s: EngineSample) -> SpecDrop | None:
    """The ``spec.acceptance`` condition: the windowed acceptance at least ``spec_drop_pct``
    below the engine's own baseline (:func:`acceptance_baseline`); None when it is not, or
    cannot be judged. The rule and the cause finder (:mod:`sparktop.alerts.causes`) both ask
    here."""
    rate = s.spec_acceptance_rate
    if not is_num(rate) or not windowed(s, "spec_acceptance_rate"):
        return None
    base = acceptance_baseline(ctx, s.engine)
    if base is None or base <= 0:
        return None
    below = (1.0 - rate / base) * 100.0
    return SpecDrop(rate, base, below) if below >= ctx.thresholds.spec_drop_pct else None


@rule({"spec.acceptance": Scope.ENGINE})
def spec_rule(ctx: RuleContext) -> Iterator[Finding]:
    for s in ok_engines(ctx):
        drop = spec_drop(ctx, s)
        if drop is None:
            continue
        rate, base, below = drop.rate, drop.baseline, drop.below_pct
        length = s.spec_mean_accept_len
        tokens = f"; {length:.2f} tokens per step" if is_num(length) else ""
        yield engine_finding(
            s,
            "spec.acceptance",
            Severity.WARNING,
            f"speculative acceptance {rate * 100:.0f}% of draft tokens, {below:.0f}% below "
            f"its recent {base * 100:.0f}%{tokens}: decode slows with it",
            {"acceptance_pct": rate * 100, "baseline_pct": base * 100, "below_pct": below},
            score=below,
        )


RULES = (spec_rule,)
