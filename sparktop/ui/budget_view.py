"""The budget pane's lines, from :func:`sparktop.sweep.budget.budget.compute_budget` (Textual-free).

Every figure is tagged with its origin as ``sparktop budget`` does (``here``, ``profile``,
``server``, ``given``), plus ``inventory`` for a limit from ``cluster.yaml`` and ``what-if``
for a prompt set with the keys; a dim legend ends the pane. Limits the live engine sample
carries (server or inventory) beat the profile's, as in the engine row. Items are packed to
the pane's width (~42 columns).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sparktop.model import NA, EngineSample, is_num
from sparktop.sweep.budget.budget import (
    DEFAULT_OUTPUT_TOKENS,
    Budget,
    Figure,
    Origin,
    compute_budget,
)
from sparktop.sweep.budget.ceiling import Verdict
from sparktop.sweep.budget.send_now import keeps
from sparktop.sweep.profiles.profile import Profile
from sparktop.sweep.tokens.tokens import TokenCount
from sparktop.ui import format as fmt
from sparktop.ui.packing import Group, pack
from sparktop.ui.views import Cell
from sparktop.values import counted

Line = list[Cell]

TAG = {
    Origin.COMPUTED: "here",
    Origin.PROFILE: "profile",
    Origin.GIVEN: "given",
    Origin.SERVER: "server",
    Origin.DEFAULT: "default",
}
TAG_MEANINGS = (
    ("default", "not set yet"),
    ("given", "typed"),
    ("what-if", "keys"),
    ("server", "live engine"),
    ("inventory", "cluster.yaml"),
    ("profile", "sweep"),
    ("here", "computed"),
)
"""What each origin tag means (the pane's legend line and the help screen)."""

LIVE_LIMITS = ("max_model_len", "max_num_seqs", "max_num_batched_tokens")

Tags = dict[str, str]
"""Budget figure name → origin tag, for limits taken from the live engine or inventory."""


def live_limits(live: EngineSample | None) -> tuple[dict[str, int], Tags]:
    """Limits the live engine sample carries from the server or the inventory (the engine
    row's ``/32``), as :func:`compute_budget` overrides, with the tag each gets.

    The budget prefers them over the profile's, as the engine row does; a limit the sample
    itself took from the profile is left to the profile.
    """
    overrides: dict[str, int] = {}
    tags: Tags = {}
    if live is None or not live.ok:
        return overrides, tags
    for name in LIVE_LIMITS:
        value = getattr(live, name)
        source = live.limit_sources.get(name, "")
        if is_num(value) and value > 0 and source != "profile":
            overrides[name] = int(value)
            tags[name] = "inventory" if source == "inventory" else "server"
    if live.kv_pool_source == "inventory" and is_num(live.kv_pool_tokens):
        overrides["kv_pool_tokens"] = int(live.kv_pool_tokens)
        tags["kv_pool_tokens"] = "inventory"
    return overrides, tags


def legend() -> list[Group]:
    """The origin tags' legend as packable groups (``[given] typed`` …)."""
    return [[(f"[{tag}] {meaning}", "dim")] for tag, meaning in TAG_MEANINGS]


@dataclass(frozen=True, slots=True)
class BudgetInputs:
    """What the operator set: the prompt (with how it was counted), concurrency, output
    tokens per request (None: ``sparktop budget``'s default, :data:`DEFAULT_OUTPUT_TOKENS`)."""

    prompt: TokenCount
    concurrency: int
    output_tokens: int | None = None

    @property
    def output(self) -> int:
        """The output tokens the budget uses."""
        return DEFAULT_OUTPUT_TOKENS if self.output_tokens is None else self.output_tokens

    def replace(self, **changes: Any) -> BudgetInputs:
        return replace(self, **changes)


def _tok(value: object) -> str:
    return f"{value:,.0f}" if is_num(value) else "?"


def _tag(fig: Figure, tag: str | None = None) -> Cell:
    """The figure's origin tag; ``tag`` names it when the budget was handed the value as an
    override (from the live engine or inventory, not typed)."""
    return (f" [{tag or TAG.get(fig.origin, fig.origin)}]", "dim")


def _why(value: object) -> str:
    return for_the_pane(value.reason) if isinstance(value, NA) else "unknown"


_CLI_ADVICE = (
    ("no live server; pass --endpoint", "no live engine answering"),
    ("; use --scan-dir", ""),
    (" (use --file for a single file)", ""),
    ("; to count what a pipe carries, send it to standard input: --file -", ""),
    ("; --endpoint or --tokenizer count exactly", "; a live engine's /tokenize counts exactly"),
    ("--prompt-tokens", "prompt"),
    ("--concurrency", "concurrency"),
    ("--output-tokens", "output tokens"),
)
"""Command-line advice in shared messages, and what the pane says instead (it has no flags)."""


def for_the_pane(message: str) -> str:
    """``message`` with command-line advice (``use --scan-dir``) phrased for the pane."""
    for cli, pane in _CLI_ADVICE:
        message = message.replace(cli, pane)
    return message


def _ok(label: str, flag: bool | None, yes: str, no: str) -> Group:
    """The check's verdict first, so the pane reads at a glance."""
    if flag is None:
        return [_label(label), ("?", "dim")]
    return [_label(label), (yes, "ok") if flag else (no, "crit")]


def _label(text: str) -> Cell:
    return (f"{text:<8}", "dim")


def _prompt(b: Budget) -> list[Group]:
    t = b.tokens
    method = f"[{t.method}]" if t.method in ("default", "given", "what-if") else t.method
    groups: list[Group] = [[_label("prompt"), (f"{t.tokens:,} tok", "bold")], [(method, "dim")]]
    if is_num(t.files_counted):
        files = counted(int(t.files_counted), "file")
        groups.append([(f"{files}, {t.files_skipped:,} skipped", "dim")])
    if t.source and t.source != "text":
        groups.append([(t.source[-40:], "dim")])
    return groups


CEILING_HEAD = {
    Verdict.FITS: ("fits", "ok"),
    Verdict.SHORTENED: ("OUTPUT CUT", "warn"),
    Verdict.DEPENDS: ("REJECTED OR CUT", "warn"),
    Verdict.REJECTED: ("REJECTED", "crit"),
    Verdict.UNKNOWN: ("?", "dim"),
}
"""The ceiling's verdict at a glance (:mod:`sparktop.sweep.budget.ceiling`)."""


def _ceiling(b: Budget, tags: Tags) -> list[Group]:
    c = b.ceiling
    word, style = CEILING_HEAD[c.verdict]
    groups: list[Group] = [
        [_label("ceiling"), (word, style)],
        [(f"{_tok(b.prompt_tokens + b.output_tokens)}/{_tok(c.max_model_len.value)}", ""),
         _tag(c.max_model_len, tags.get("max_model_len"))],
    ]  # fmt: skip
    cut = f"output cut to {c.served_output_tokens:,} tok"
    if c.verdict is Verdict.SHORTENED:
        groups.append([(cut, "warn"), (f" by {c.rule}", "dim")])
    elif c.verdict is Verdict.DEPENDS:
        groups.append([("vLLM < 0.32 rejects; ≥ 0.32: ", "dim"), (cut, "warn")])
    elif c.verdict is Verdict.REJECTED:
        groups.append([(c.why, "crit")])
    if c.advice:
        groups.append([(c.advice, "warn" if c.verdict is not Verdict.REJECTED else "crit")])
    return groups


def _kv(b: Budget, tags: Tags) -> list[list[Group]]:
    kv = b.kv
    pct = f" {kv.pool_used_pct.value:,.1f}%" if is_num(kv.pool_used_pct.value) else ""
    pool: list[Group] = [
        _ok("KV", kv.fits, "fits", "OVER POOL"),
        [(f"{_tok(kv.total_tokens.value)}/{fmt.si_tokens(kv.pool_tokens.value)}{pct}", ""),
         _tag(kv.pool_tokens, tags.get("kv_pool_tokens"))],
    ]  # fmt: skip
    if is_num(kv.free_tokens_now.value):
        used = kv.free_used_pct.value
        now: list[Group] = [
            _ok(" now", kv.fits_now, "fits", "NOT NOW"),
            [(f"{fmt.si_tokens(kv.free_tokens_now.value)} free", ""),
             (f" → {used:,.1f}%" if is_num(used) else "", ""), _tag(kv.free_tokens_now)],
        ]  # fmt: skip
    else:
        now = [[_label(" now"), (_why(kv.free_tokens_now.value), "dim")]]
    limits: list[Group] = [
        [
            _label(" max"),
            ("conc ", "dim"),
            (_tok(kv.max_concurrency_by_pool.value), ""),
            (" by pool", "dim"),
        ]
    ]
    if is_num(kv.max_num_seqs.value):
        limits.append(
            [
                ("max_num_seqs ", "dim"),
                (_tok(kv.max_num_seqs.value), ""),
                _tag(kv.max_num_seqs, tags.get("max_num_seqs")),
            ]
        )
    return [pool, now, limits]


def _over_seqs(b: Budget) -> list[Group]:
    """Beside the concurrency, when it passes ``max_num_seqs``: how many would wait (the
    what-if keys go past it, and the figures below are for requests that cannot all run)."""
    seqs = b.kv.max_num_seqs.value
    if not is_num(seqs) or b.concurrency <= seqs:
        return []
    waiting = b.concurrency - int(seqs)
    return [[(f"> max_num_seqs {int(seqs):,}: {waiting:,} wait", "warn")]]


def _batched(b: Budget, tags: Tags) -> list[list[Group]]:
    bt = b.batched
    limit = bt.max_num_batched_tokens
    figures: Group = [
        (f"{_tok(bt.batched_tokens.value)}/{_tok(limit.value)}", ""),
        _tag(limit, tags.get("max_num_batched_tokens")),
    ]
    if bt.over_limit is None:
        return [[[_label("batched"), *figures]]]
    out = [[_ok("batched", not bt.over_limit, "one batch", "TTFT steps up"), figures]]
    chunks = bt.prefill_chunks.value
    if is_num(chunks) and chunks > 1:
        out.append([[_label(" chunks"), (f"{chunks:,.0f} (chunked prefill)", "")]])
    if bt.over_limit:
        fit = bt.max_concurrency_in_one_batch.value
        text = f"fits at concurrency ≤ {fit:.0f}" if is_num(fit) else _why(fit)
        out.append([[_label(""), (text, "warn")]])
    return out


def _time(b: Budget) -> list[list[Group]]:
    t = b.timing

    def fig(label: str, est: Any, unit: str, after: str = "") -> list[Group]:
        if not is_num(est.value):
            return [[_label(label), ("no data", "dim")], [(_why(est.value), "dim")]]
        text = fmt.seconds(est.value) if unit == "s" else f"{est.value:,.1f} tok/s"
        band = fmt.band(est.low, est.high, unit)
        why_none = isinstance(est.low, NA) and str(est.basis) != "exact"
        return [
            [_label(label), (text, "bold" if unit == "s" else ""), (after, "dim")],
            [(f"[{est.basis}]", "dim")],
            *([[(f"band {band}", "dim")]] if band else []),
            *([[(est.low.reason, "dim")]] if not band and why_none else []),  # say why
        ]

    total = t.total_s.value
    return [
        fig("TTFT", t.ttft_s, "s"),
        fig("decode", t.decode_tps, "tps", "/req"),
        fig("agg", t.aggregate_tps, "tps", f" {t.aggregate_kind}"),
        [[_label("total"), (f"≈ {fmt.seconds(total)}" if is_num(total) else "no data",
                            "bold" if is_num(total) else "dim"),
                           (" per request" if is_num(total) else "", "dim")]],
    ]  # fmt: skip


QUEUE_WHY = {
    "max_num_seqs": "scheduler full",
    "waiting": "behind the waiting",
    "pool": "free pool too small",
}


def _send_now(b: Budget) -> list[list[Group]]:
    """One more request on the live load, next to the idle figure (sweep/budget/send_now.py)."""
    n = b.send_now
    idle = n.idle_ttft_s.value
    out: list[list[Group]] = []
    if n.refused:
        return [[[_label("now"), ("not sent", "crit")], [("the server rejects it", "dim")]]]
    if n.ttft_s is None:
        out.append([[_label("now"), ("no data", "dim")], [(_why(n.ttft_total_s), "dim")]])
    else:
        total = n.ttft_total_s
        out.append([
            [_label("now"), (f"TTFT {fmt.seconds(total)}" if is_num(total) else "no data",
                             "bold" if is_num(total) else "dim")],
            [(f" at {fmt.num(n.concurrency)} running", "dim")],
            [(f"~{fmt.num(n.prefill_concurrency)} prefilling", "dim"), (" [server]", "dim")],
        ])  # fmt: skip
        if n.queued_because:
            wait = n.queue_wait_s
            text = f"≈ {fmt.seconds(wait)}" if is_num(wait) else _why(wait)
            out.append([
                [_label(" queue"), (text, "warn")],
                [(QUEUE_WHY[n.queued_because], "dim"), (f" [{n.wait_origin or 'here'}]", "dim")],
            ])  # fmt: skip
    if b.ceiling.verdict in (Verdict.SHORTENED, Verdict.DEPENDS):
        served = b.ceiling.served_output_tokens
        when = " if vLLM ≥ 0.32" if b.ceiling.verdict is Verdict.DEPENDS else ""
        out.append([[_label(" output"), (f"cut to {served:,} tok{when}", "warn")]])
    out.append([[_label("idle"), (f"TTFT {fmt.seconds(idle)}" if is_num(idle) else "no data",
                                  ""), (" [profile]", "dim")]])  # fmt: skip
    return out


def _lesson(b: Budget) -> list[Group]:
    x = b.lesson

    said: set[str] = set()

    def no_data(value: object) -> str:
        """``no data (reason)`` as the CLI says it; a reason already given is not repeated."""
        why = _why(value)
        if why in said:
            return "no data"
        said.add(why)
        return f"no data ({why})"

    def pct(name: str, value: object) -> Group:
        if not is_num(value):
            return [(f"{name} ", "dim"), (no_data(value), "")]
        verb, shown = keeps(float(value))
        return [(f"{name} {verb} ", "dim"), (f"{'+' if verb == 'gains' else ''}{shown:.0f}%", "")]

    # In the order they are read, so the first one without data gives the reason.
    decode, e2e = pct("decode", x.decode_keep_pct), pct("e2e", x.e2e_keep_pct)
    growth = f"{x.ttft_growth:,.1f}×" if is_num(x.ttft_growth) else no_data(x.ttft_growth)
    return [
        [_label("lesson"), (f"vs shortest {x.shortest_prompt_tokens:,} tok:", "dim")],
        decode,
        e2e,
        [("TTFT ", "dim"), (growth, ""), (" [profile]", "dim")],
    ]


def budget_lines(
    inputs: BudgetInputs,
    profile: Profile | None,
    live: EngineSample | None,
    counting: str = "",
    width: int = 42,
    *,
    error: str = "",
    profile_limits: bool = True,
) -> list[Line]:
    """The pane's lines for the inputs, the profile and the live engine (its free pool).

    ``profile_limits`` False: the profile was not named for this cluster (the default), so
    a live engine's limits come from its server or the inventory only, as on its engine row;
    without a live engine the budget is the profile's own setup and keeps them.

    ``error`` (a field the operator just entered that was refused) replaces the figures: they
    would be for the previous input, under the new text.
    """
    if profile is None:
        return [[("no sweep profile: the budget needs one (--profile)", "warn")]]
    if error:
        sections_error: list[list[Group]] = [
            [[_label("profile"), (profile.name, "accent")]],
            [[("! ", "warn"), (error, "warn")]],
            [[("fix the field and press Enter (Escape leaves it)", "dim")]],
        ]
        out: list[Line] = []
        for groups in sections_error:
            out += pack(groups, width, indent=" " * 2, hang=" " * 2)
        return out
    overrides, tags = live_limits(live)
    try:
        b = compute_budget(
            inputs.prompt, inputs.concurrency, profile, inputs.output_tokens, live=live,
            profile_limits=profile_limits or live is None, **overrides,
        )  # fmt: skip
    except ValueError as exc:
        return [[(str(exc), "warn")]]
    sections: list[list[Group]] = [
        [[_label("profile"), (profile.name, "accent")]],
        *([[[(counting, "warn")]]] if counting else []),
        _prompt(b),
        [[_label("conc"), (f"{b.concurrency:,}", "bold")], *_over_seqs(b),
         [("output ", "dim"), (f"{b.output_tokens:,} tok", "")]],
        [],
        _ceiling(b, tags),
        *_kv(b, tags),
        *_batched(b, tags),
        [],
        *_time(b),
        [],
        *_send_now(b),
        _lesson(b),
        *([[("! ", "warn"), (w, "warn")]] for w in b.warnings),
        [],
        legend(),
    ]  # fmt: skip
    lines: list[Line] = []
    for groups in sections:
        # A long reply or reason goes on under the figures' column (``hang``), as they do.
        lines += pack(groups, width, indent=" " * 8, hang=" " * 8) if groups else [[]]
    return lines
