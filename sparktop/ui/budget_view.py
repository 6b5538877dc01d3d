"""The budget pane's lines, from :func:`sparktop.sweep.budget.compute_budget` (Textual-free).

Every figure is tagged with its origin as ``sparktop budget`` does (``here``, ``profile``,
``server``, ``given``), shortened for a ~44-column pane.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sparktop.model import NA, EngineSample, is_num
from sparktop.sweep.budget import Budget, Figure, Origin, compute_budget
from sparktop.sweep.profile import Profile
from sparktop.sweep.tokens import TokenCount
from sparktop.ui import format as fmt
from sparktop.ui.views import Cell

Line = list[Cell]

TAG = {
    Origin.COMPUTED: "here",
    Origin.PROFILE: "profile",
    Origin.GIVEN: "given",
    Origin.SERVER: "server",
    Origin.DEFAULT: "default",
}


@dataclass(frozen=True, slots=True)
class BudgetInputs:
    """What the operator set: the prompt (with how it was counted), concurrency, output."""

    prompt: TokenCount
    concurrency: int
    output_tokens: int

    def replace(self, **changes: Any) -> BudgetInputs:
        return replace(self, **changes)


def _tok(value: object) -> str:
    return f"{value:,.0f}" if is_num(value) else "?"


def _tag(fig: Figure) -> Cell:
    return (f" [{TAG.get(fig.origin, fig.origin)}]", "dim")


def _why(value: object) -> str:
    return value.reason if isinstance(value, NA) else "unknown"


def _ok(flag: bool | None, yes: str, no: str) -> Cell:
    if flag is None:
        return ("?", "dim")
    return (yes, "ok") if flag else (no, "crit")


def _prompt_lines(b: Budget) -> list[Line]:
    t = b.tokens
    lines: list[Line] = [
        [("prompt  ", "dim"), (f"{t.tokens:,} tok", "bold"), (f"  {t.method}", "dim")]
    ]
    if is_num(t.files_counted):
        lines.append(
            [("        ", ""), (f"{t.files_counted:,} files, {t.files_skipped} skipped", "dim")]
        )
    if t.source and t.source not in ("", "text"):
        lines.append([("        ", ""), (t.source[-36:], "dim")])
    return lines


def _ceiling_lines(b: Budget) -> list[Line]:
    c = b.ceiling
    line: Line = [
        ("ceiling ", "dim"),
        (f"{_tok(b.prompt_tokens + b.output_tokens)} of {_tok(c.max_model_len.value)}", ""),
        _tag(c.max_model_len),
    ]
    line += [(" ", ""), _ok(None if c.rejected is None else not c.rejected, "fits", "REJECTED")]
    lines = [line]
    if c.rejected:
        lines.append([("        ", ""), (f"over by {_tok(c.over_by_tokens.value)} tokens", "crit")])
    return lines


def _kv_lines(b: Budget) -> list[Line]:
    kv = b.kv
    pct = f" {kv.pool_used_pct.value:.1f}%" if is_num(kv.pool_used_pct.value) else ""
    lines: list[Line] = [
        [
            ("KV      ", "dim"),
            (f"{_tok(kv.total_tokens.value)} of {fmt.si_tokens(kv.pool_tokens.value)}{pct}", ""),
            _tag(kv.pool_tokens),
            (" ", ""),
            _ok(kv.fits, "fits", "OVER POOL"),
        ],
    ]
    if is_num(kv.free_tokens_now.value):
        free_pct = f" → {kv.free_used_pct.value:.1f}%" if is_num(kv.free_used_pct.value) else ""
        lines.append(
            [
                ("  free now ", "dim"),
                (f"{fmt.si_tokens(kv.free_tokens_now.value)}{free_pct}", ""),
                _tag(kv.free_tokens_now),
                (" ", ""),
                _ok(kv.fits_now, "fits now", "NOT NOW"),
            ]
        )
    else:
        lines.append([("  free now ", "dim"), (_why(kv.free_tokens_now.value)[:32], "dim")])
    seqs = f"  max_num_seqs {_tok(kv.max_num_seqs.value)}" if is_num(kv.max_num_seqs.value) else ""
    lines.append(
        [
            ("  max concurrency by pool ", "dim"),
            (_tok(kv.max_concurrency_by_pool.value), ""),
            (seqs, "dim"),
        ]
    )
    return lines


def _batched_lines(b: Budget) -> list[Line]:
    bt = b.batched
    limit = bt.max_num_batched_tokens
    line: Line = [
        ("batched ", "dim"),
        (f"{_tok(bt.batched_tokens.value)} vs {_tok(limit.value)}", ""),
        _tag(limit),
    ]
    if bt.over_limit is None:
        return [line]
    line += [(" ", ""), _ok(not bt.over_limit, "one batch", "TTFT steps up")]
    lines = [line]
    chunks = bt.prefill_chunks.value
    if is_num(chunks) and chunks > 1:
        lines.append([("  chunked prefill ", "dim"), (f"{chunks:.0f} chunks", "")])
    if bt.over_limit:
        fit = bt.max_concurrency_in_one_batch.value
        text = f"fits at concurrency ≤ {fit:.0f}" if is_num(fit) else _why(fit)[:40]
        lines.append([("  ", ""), (text, "warn")])
    return lines


def _time_lines(b: Budget) -> list[Line]:
    t = b.timing

    def fig(label: str, est: Any, unit: str) -> Line:
        if not is_num(est.value):
            return [(label, "dim"), ("no data", "dim")]
        text = fmt.seconds(est.value) if unit == "s" else f"{est.value:,.1f} tok/s"
        return [(label, "dim"), (text, "bold" if unit == "s" else ""), (f" [{est.basis!s}]", "dim")]

    total = t.total_s.value
    return [
        fig("TTFT    ", t.ttft_s, "s"),
        [*fig("decode  ", t.decode_tps, "tps"), ("/req", "dim")],
        [*fig("agg     ", t.aggregate_tps, "tps"), (f" {t.aggregate_kind}", "dim")],
        [
            ("total   ", "dim"),
            (
                f"≈ {fmt.seconds(total)}" if is_num(total) else "no data",
                "bold" if is_num(total) else "dim",
            ),
            (" per request", "dim"),
        ],
    ]


def budget_lines(
    inputs: BudgetInputs,
    profile: Profile | None,
    live: EngineSample | None,
    estimate: Any = None,
    counting: str = "",
) -> list[Line]:
    """The pane's lines for the inputs, profile and live engine (``estimate`` unused here:
    the budget asks the shared estimator itself)."""
    if profile is None:
        return [[("no sweep profile: budget needs one (--profile)", "warn")]]
    try:
        b = compute_budget(
            inputs.prompt, inputs.concurrency, profile, inputs.output_tokens, live=live
        )
    except ValueError as exc:
        return [[(str(exc), "warn")]]
    head: Line = [("profile ", "dim"), (profile.name, "accent")]
    lines: list[Line] = [head]
    if counting:
        lines.append([(counting, "warn")])
    lines += _prompt_lines(b)
    lines.append(
        [
            ("conc    ", "dim"),
            (str(b.concurrency), "bold"),
            ("  output ", "dim"),
            (f"{b.output_tokens:,} tok", ""),
        ]
    )
    lines += [[], *_ceiling_lines(b), *_kv_lines(b), *_batched_lines(b), [], *_time_lines(b)]
    for warning in b.warnings:
        lines.append([("! ", "warn"), (warning, "warn")])
    lines += [[], [("+/- conc  [/] prompt  </> output  i edit", "dim")]]
    return lines
