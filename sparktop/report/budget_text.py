"""Budget output: the stable JSON shape and the human text, both from a :class:`Budget`.

Human text uses thousands separators and h/m/s, and tags every figure with its origin:
``[here]`` computed here, ``[profile]`` from the profile, ``[given]`` from the command line,
``[server]`` from the live server, ``[default]`` a default.
"""

from __future__ import annotations

from sparktop.sweep.budget.budget import Budget, Figure, Origin
from sparktop.sweep.budget.ceiling import Verdict
from sparktop.sweep.budget.send_now import keeps
from sparktop.sweep.estimator.estimator import Basis, Estimated
from sparktop.sweep.profiles.batch_step import batch_step
from sparktop.values import NA, is_num

TAGS = {
    Origin.COMPUTED: "[here]",
    Origin.PROFILE: "[profile]",
    Origin.GIVEN: "[given]",
    Origin.SERVER: "[server]",
    Origin.DEFAULT: "[default]",
}
LEGEND = (
    "[here] computed here · [profile] from the profile · [given] from the command line · "
    "[server] from the live server"
)


# -- formatting ----------------------------------------------------------------------------------


def hms(seconds: float) -> str:
    """``65.4`` → ``1m 05s``; ``4000`` → ``1h 06m 40s``; under a minute → ``6.1 s``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def duration(seconds: float) -> str:
    """Seconds with two decimals and separators, plus h/m/s from a minute up."""
    text = f"{seconds:,.2f} s"
    return f"{text} ({hms(seconds)})" if seconds >= 60 else text


def tokens(n: float) -> str:
    return f"{n:,.0f}"


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}".rstrip("0").rstrip(".")


def _why(value: object) -> str:
    return value.reason if isinstance(value, NA) else "not available"


# -- text ----------------------------------------------------------------------------------------


def _line(tag: Origin | str, label: str, text: str) -> str:
    mark = TAGS[tag] if isinstance(tag, Origin) else tag
    return f"  {mark:<10}{label:<26}{text}"


def _unit(fig: Figure, words: str) -> str:
    """``words`` after a number; nothing after "no data (…)", which they would not read on."""
    return words if is_num(fig.value) else ""


def _fig_text(fig: Figure, fmt: str = "tokens") -> str:
    if not is_num(fig.value):
        return f"no data ({_why(fig.value)})"
    if fmt == "pct":
        return f"{fig.value:,.1f} %"
    return tokens(fig.value)


def _tokens_section(b: Budget) -> list[str]:
    t = b.tokens
    given = Origin.GIVEN if t.method == "given" else Origin.COMPUTED
    method = t.method
    out = ["Tokens", _line(given, "prompt tokens", f"{tokens(t.tokens)} per request ({method})")]
    if is_num(t.files_counted):
        skipped = ", ".join(f"{n:,} {why}" for why, n in t.skipped)
        out.append(
            _line(
                Origin.COMPUTED,
                "files",
                f"{t.files_counted:,} counted, {t.files_skipped:,} skipped"
                + (f" ({skipped})" if skipped else ""),
            )
        )
    if is_num(t.cjk_chars) and is_num(t.other_chars):
        out.append(
            _line(Origin.COMPUTED, "characters", f"{t.cjk_chars:,} CJK, {t.other_chars:,} other")
        )
    if t.method == "estimated":
        out.append(_line("", "", f"estimate: CJK 1:1, other ÷ {t.chars_per_token}"))
    out.append(_line(b.concurrency_origin, "concurrency", f"{b.concurrency:,}"))
    out.append(_line(b.output_origin, "output tokens", f"{tokens(b.output_tokens)} per request"))
    return out


def _ceiling_section(b: Budget) -> list[str]:
    c = b.ceiling
    served = c.served_output_tokens
    output = f"output {tokens(served)}"
    if served != b.output_tokens:
        output += f" of the {tokens(b.output_tokens)} asked"
    out = [
        "Ceiling (max_model_len)",
        _line(
            Origin.COMPUTED,
            "live tokens / request",
            f"{_fig_text(c.live_tokens_per_request)} (prompt {tokens(b.prompt_tokens)} + {output})",
        ),
        _line(c.max_model_len.origin, "max_model_len", _fig_text(c.max_model_len)),
    ]
    if c.verdict is Verdict.FITS:
        out.append(
            _line(Origin.COMPUTED, "fits", f"prompt may grow to {_fig_text(c.max_prompt_tokens)}")
        )
        return out
    if c.verdict is Verdict.UNKNOWN:
        return out
    out.append(_line(Origin.SERVER if b.send_now.live else "", "server", c.rule))
    head = {
        Verdict.REJECTED: "⛔ rejected",
        Verdict.SHORTENED: "✂ output shortened",
        Verdict.DEPENDS: "⚠ rejected or shortened",
    }[c.verdict]
    out.append(_line(Origin.COMPUTED, head, c.why))
    if c.advice:
        label = "to fit" if c.verdict is Verdict.REJECTED else "whole output"
        out.append(_line(Origin.COMPUTED, label, c.advice))
    return out


def _kv_section(b: Budget) -> list[str]:
    k = b.kv
    verdict = {True: " — fits", False: " — does not fit: requests wait or are preempted"}
    out = [
        "KV cache pool (max_num_seqs and max_model_len are ceilings, not reservations)",
        _line(
            Origin.COMPUTED,
            "all requests",
            f"{_fig_text(k.total_tokens)} ({b.concurrency:,} × "
            f"{_fig_text(b.ceiling.live_tokens_per_request)})",
        ),
        _line(k.pool_tokens.origin, "KV pool", _fig_text(k.pool_tokens)),
        _line(
            Origin.COMPUTED,
            "share of the pool",
            _fig_text(k.pool_used_pct, "pct") + verdict.get(k.fits, ""),  # type: ignore[arg-type]
        ),
        _line(
            Origin.COMPUTED,
            "max concurrency (pool)",
            _fig_text(k.max_concurrency_by_pool)
            + _unit(k.max_concurrency_by_pool, " at this length (pool ÷ live tokens)"),
        ),
        _line(
            k.max_num_seqs.origin,
            "max_num_seqs",
            _fig_text(k.max_num_seqs) + _unit(k.max_num_seqs, " run at once"),
        ),
        _line(k.free_tokens_now.origin, "free now", _fig_text(k.free_tokens_now)),
    ]
    if is_num(k.free_used_pct.value):
        now = {True: " — fits now", False: " — does not fit now"}.get(k.fits_now, "")  # type: ignore[arg-type]
        out.append(
            _line(
                Origin.COMPUTED, "share of the free part", _fig_text(k.free_used_pct, "pct") + now
            )
        )
    return out


def _batched_section(b: Budget) -> list[str]:
    x = b.batched
    limit = x.max_num_batched_tokens
    out = [
        "Batched tokens (max_num_batched_tokens)",
        _line(Origin.COMPUTED, "concurrency × prompt", _fig_text(x.batched_tokens)),
        _line(limit.origin, "max_num_batched_tokens", _fig_text(limit)),
    ]
    if not is_num(limit.value):
        return out
    if b.prompt_tokens > limit.value:
        out.append(
            _line(
                Origin.COMPUTED,
                "⚠ chunked prefill",
                f"{tokens(b.prompt_tokens)} > {tokens(limit.value)}: each prompt is prefilled in "
                f"{_fig_text(x.prefill_chunks)} chunks (normal for long prompts; TTFT grows with "
                "length and lowering concurrency does not avoid it)",
            )
        )
    elif x.over_limit:
        fit = _fig_text(x.max_concurrency_in_one_batch)
        out.append(
            _line(
                Origin.COMPUTED,
                "⚠ over the limit",
                f"{_fig_text(x.batched_tokens)} > {tokens(limit.value)}: the {b.concurrency:,} "
                f"prefills do not fit one batch and TTFT steps up{_step_cited(b, limit.value)}",
            )
        )
        out.append(_line("", "", f"keep concurrency ≤ {fit}, or raise max_num_batched_tokens"))
    else:
        out.append(_line(Origin.COMPUTED, "fits one batch", _prefills_fit(b.concurrency)))
    return out


def _step_cited(b: Budget, limit: float) -> str:
    """`` (this profile: 2,048 tokens × 4 → × 6: TTFT 1.38 s → 6.06 s)``: the step as the
    budget's own profile measured it, or "" when its rows do not show one."""
    step = batch_step(b.profile.rows, limit)
    return f" (this profile: {step.text()})" if step is not None else ""


def _est_text(fig: Estimated, kind: str) -> str:
    if not is_num(fig.value):
        return f"no data ({_why(fig.value)})"
    text = duration(fig.value) if kind == "s" else f"{_rate(fig.value)} tok/s"
    text = f"{text} · {fig.basis.value}"
    if fig.basis is Basis.EXACT:
        return text
    if not (is_num(fig.low) and is_num(fig.high)):
        return f"{text}; {fig.low.reason}" if isinstance(fig.low, NA) else text
    if kind == "s":
        return f"{text}, band {fig.low:,.2f}–{fig.high:,.2f} s"
    return f"{text}, band {_rate(fig.low)}–{_rate(fig.high)} tok/s"


def _time_section(b: Budget) -> list[str]:
    t = b.timing
    agg_label = f"aggregate ({t.aggregate_kind})"
    out = [
        f"Time (profile {b.profile.name})"
        if b.describes_server
        else f"Time (profile {b.profile.name}: another setup's, not this server's; see Warnings)",
        _line(Origin.PROFILE, "TTFT", _est_text(t.ttft_s, "s")),
        _line(Origin.PROFILE, "prefill / request", _est_text(t.prefill_tps, "tps")),
        _line(Origin.PROFILE, "decode / request", _est_text(t.decode_tps, "tps")),
        _line(Origin.PROFILE, agg_label, _est_text(t.aggregate_tps, "tps")),
    ]
    decode = t.decode_tps.value
    if is_num(t.total_s.value) and is_num(decode):
        out.append(
            _line(
                Origin.COMPUTED,
                "total / request",
                f"{hms(t.total_s.value)} (TTFT + {tokens(b.ceiling.served_output_tokens)} "
                f"tokens at "
                f"{_rate(decode)} tok/s)",
            )
        )
    else:
        out.append(_line(Origin.COMPUTED, "total / request", _fig_text(t.total_s)))
    hows = []
    for fig in (t.ttft_s, t.prefill_tps, t.decode_tps, t.aggregate_tps):
        if is_num(fig.value) and fig.how not in hows:
            hows.append(fig.how)
    out += [_line("", "how", how) for how in hows]
    return out


QUEUED = {
    "max_num_seqs": "the scheduler is full (running = max_num_seqs)",
    "waiting": "requests already wait (first come, first served)",
    "pool": "the prompt does not fit the free KV tokens now",
}


def _send_now_section(b: Budget) -> list[str]:
    n = b.send_now
    out = ["If sent now (one more request on the live load)"]
    capped = is_num(n.running) and is_num(n.concurrency) and n.concurrency < n.running + 1
    if n.refused:
        out.append(_line(Origin.COMPUTED, "not sent", f"{n.refused}: no TTFT"))
        return out
    c = b.ceiling
    if c.verdict in (Verdict.SHORTENED, Verdict.DEPENDS):
        when = (
            " if the server is vLLM ≥ 0.32 (older: rejected)"
            if c.verdict is Verdict.DEPENDS
            else ""
        )
        out.append(
            _line(
                Origin.COMPUTED,
                "output",
                f"cut to {tokens(c.served_output_tokens)} tokens of the "
                f"{tokens(b.output_tokens)} asked (finish_reason length){when}",
            )
        )
    out.append(_line(Origin.PROFILE, "TTFT idle", _est_text(n.idle_ttft_s, "s")))
    if n.ttft_s is None:
        out.append(_line(Origin.SERVER, "TTFT now", f"no data ({_why(n.running)})"))
        return out
    out.append(
        _line(
            Origin.SERVER,
            "live load",
            f"running {_num(n.running)}, waiting {_num(n.waiting)} → concurrency "
            f"{_num(n.concurrency)} with this request"
            + (" (at most max_num_seqs: it waits for a slot)" if capped else ""),
        )
    )
    out.append(
        _line(
            Origin.COMPUTED,
            "prefill concurrency",
            f"{_num(n.prefill_concurrency)} ({n.prefill_how})",
        )
    )
    out.append(_line(Origin.PROFILE, "TTFT at that load", _est_text(n.ttft_s, "s")))
    if n.queued_because:
        tag = {"server": Origin.SERVER, "profile": Origin.PROFILE}.get(n.wait_origin, "")
        wait = duration(n.queue_wait_s) if is_num(n.queue_wait_s) else _fig_none(n.queue_wait_s)
        out.append(_line(tag, "queues first", f"{QUEUED[n.queued_because]}: ≈ {wait}"))
    total = n.ttft_total_s
    out.append(
        _line(
            Origin.COMPUTED,
            "TTFT now",
            (duration(total) if is_num(total) else _fig_none(total))
            + (" (queue + TTFT)" if n.queued_because else ""),
        )
    )
    return out


def _prefills_fit(concurrency: int) -> str:
    if concurrency == 1:
        return "the one prefill fits one batch"
    return f"the {concurrency:,} prefills fit one batch"


def _num(value: object) -> str:
    return f"{value:,.0f}" if is_num(value) else "n/a"


def _fig_none(value: object) -> str:
    return f"no data ({_why(value)})"


def _lesson_section(b: Budget) -> list[str]:
    x = b.lesson

    def pct(name: str, value: object, how: str = "") -> str:
        if not is_num(value):
            return _line(Origin.PROFILE, f"{name} keeps", _fig_none(value) + how)
        verb, shown = keeps(float(value))
        sign = "+" if verb == "gains" else ""
        text = f"{shown:,.1f} %" if shown < 10 else f"{shown:,.0f} %"
        return _line(Origin.PROFILE, f"{name} {verb}", sign + text + how)

    growth = f"{x.ttft_growth:,.1f}×" if is_num(x.ttft_growth) else _fig_none(x.ttft_growth)
    return [
        f"The sweep's lesson at {tokens(x.prompt_tokens)} tokens vs its shortest prompt "
        f"({tokens(x.shortest_prompt_tokens)}), concurrency {x.concurrency:,}",
        pct("decode", x.decode_keep_pct),
        pct("end-to-end", x.e2e_keep_pct, f" ({x.e2e_how})"),
        _line(Origin.PROFILE, "TTFT grows", growth),
    ]


def render_text(b: Budget) -> str:
    """The human budget report, one section per DESIGN.md §7 item."""
    p = b.profile
    head = [
        f"sparktop budget — profile {p.name}" + (f": {p.cluster}" if p.cluster else ""),
        LEGEND,
    ]
    sections = [
        head,
        _tokens_section(b),
        _ceiling_section(b),
        _kv_section(b),
        _batched_section(b),
        _time_section(b),
        _send_now_section(b),
        _lesson_section(b),
    ]
    if b.warnings:
        sections.append(["Warnings", *(f"  ! {w}" for w in b.warnings)])
    sections.append(["Not accounted for", *(f"  - {c}" for c in b.not_accounted_for)])
    return "\n\n".join("\n".join(s) for s in sections) + "\n"
