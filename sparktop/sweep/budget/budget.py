"""The context budget: will this prompt fit, and how long will it take? (DESIGN.md §7)

:func:`compute_budget` is pure and cheap (the TUI's side pane calls it on every keypress): it
takes a token count, concurrency, output tokens, a profile, optional overrides and an
optional live :class:`~sparktop.model.EngineSample`, and returns a :class:`Budget` whose every
figure says where it came from (:class:`Origin`). :func:`sparktop.report.budget_json.to_json`
is the stable ``--json`` shape (schema ``sparktop.budget/1``, documented in
``sparktop/sweep/README.md``); :mod:`sparktop.report.budget_text` renders the human text.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktop.sweep.budget.ceiling import UNKNOWN_RULE, Rule, Verdict, advice, rule_for, verdict
from sparktop.sweep.budget.send_now import Lesson, SendNow, lesson, send_now
from sparktop.sweep.estimator.estimator import Basis, Estimate, Estimated, estimate
from sparktop.sweep.profiles.profile import Profile
from sparktop.sweep.tokens.tokens import TokenCount
from sparktop.values import NA, is_num

if TYPE_CHECKING:
    from sparktop.model import EngineSample, EngineState

SCHEMA = "sparktop.budget/1"


DEFAULT_OUTPUT_TOKENS = 2048
"""Output tokens per request when none are given (the seed script's default)."""


class Origin(enum.StrEnum):
    """Where a budget figure comes from."""

    COMPUTED = "computed here"
    PROFILE = "from the profile"
    GIVEN = "given"
    SERVER = "from the server"
    DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class Figure:
    """A number (tokens, %, s or requests) or NA with the reason, and its origin."""

    value: float | NA
    origin: Origin


def _here(value: float | NA) -> Figure:
    return Figure(value, Origin.COMPUTED)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """``max_model_len`` check: prompt + output per request against the server's ceiling,
    and what the server does over it (:mod:`sparktop.sweep.budget.ceiling`: vLLM ≥ 0.32 shortens
    the output, older vLLM refuses the request, a prompt that fills the limit is refused by
    all).

    ``live_tokens_per_request``: prompt + the output the request can produce
    (``served_output_tokens``: the output asked for, or ``max_model_len − prompt`` when it
    is shortened, or may be). ``rejected``: True refused, False served (whole or shortened),
    None unknown (the limit, or the server's version). ``why``: the verdict in words, with
    the rule's source; ``advice``: what to lower so it fits whole ("" when it does)."""

    max_model_len: Figure
    live_tokens_per_request: Figure
    over_by_tokens: Figure
    max_prompt_tokens: Figure
    rejected: bool | None
    verdict: Verdict = Verdict.UNKNOWN
    served_output_tokens: int = 0
    why: str = ""
    advice: str = ""
    rule: str = ""


@dataclass(frozen=True, slots=True)
class KvFit:
    """KV-pool check: live tokens of all requests against the pool (and its free part now)."""

    pool_tokens: Figure
    total_tokens: Figure
    pool_used_pct: Figure
    fits: bool | None
    max_concurrency_by_pool: Figure
    max_num_seqs: Figure
    free_tokens_now: Figure
    free_used_pct: Figure
    fits_now: bool | None


@dataclass(frozen=True, slots=True)
class Batched:
    """``max_num_batched_tokens`` check: chunked prefill and concurrent prefills per batch."""

    max_num_batched_tokens: Figure
    batched_tokens: Figure
    prefill_chunks: Figure
    over_limit: bool | None
    max_concurrency_in_one_batch: Figure


@dataclass(frozen=True, slots=True)
class Timing:
    """Expected time from the profile; ``total_s`` ≈ TTFT + output ÷ decode (per request)."""

    ttft_s: Estimated
    prefill_tps: Estimated
    decode_tps: Estimated
    aggregate_tps: Estimated
    aggregate_kind: str
    total_s: Figure


@dataclass(frozen=True, slots=True)
class Budget:
    """Everything ``sparktop budget`` reports, each figure with its origin."""

    profile: Profile
    tokens: TokenCount
    concurrency: int
    output_tokens: int
    output_origin: Origin
    ceiling: Ceiling
    kv: KvFit
    batched: Batched
    timing: Timing
    estimate: Estimate
    warnings: tuple[str, ...]
    not_accounted_for: tuple[str, ...]
    send_now: SendNow
    """One more request on the live load (:mod:`sparktop.sweep.budget.send_now`)."""
    lesson: Lesson
    """The seed's lesson for this prompt against the profile's shortest."""
    concurrency_origin: Origin = Origin.GIVEN
    """``given`` (typed) or ``default`` (the command's default of 1, set by its caller)."""
    describes_server: bool = True
    """False: the profile was not named for the live server (the default profile beside
    ``--endpoint``), so its times are another setup's (a warning says so)."""

    @property
    def prompt_tokens(self) -> int:
        return self.tokens.tokens


def _limit(
    given: int | None, server: float | NA | None, profile: int | NA | None, flag: str
) -> Figure:
    """The command line, else the server, else the profile; ``profile`` None: the profile
    does not describe this server, so a limit neither states is unknown."""
    if given is not None:
        return Figure(given, Origin.GIVEN)
    if server is not None and is_num(server) and server > 0:
        return Figure(int(server), Origin.SERVER)
    if profile is None:
        if isinstance(server, NA) and server.reason:
            # The server's own reason names where the figure would come from.
            why = server.reason.split("; set ")[0]
            return Figure(NA(f"{why}; the default profile is another setup's; pass {flag}"),
                          Origin.SERVER)  # fmt: skip
        return Figure(NA(f"{NOT_THIS_SERVER}; pass {flag}"), Origin.SERVER)
    if isinstance(profile, int):
        return Figure(profile, Origin.PROFILE)
    return Figure(NA(f"not in the profile; pass {flag}"), Origin.PROFILE)


NOT_THIS_SERVER = "not exported by the server, and the default profile is another setup's"
"""Why a limit is unknown when only a profile nobody named for this server would state it."""


SERVER_SOURCES = frozenset({"server", "cache_config_info", "/v1/models"})
"""``EngineSample.limit_sources`` values that mean the server itself said it."""


def _told(live: EngineSample | None, name: str) -> float | NA | None:
    """A limit the live server itself exported (not one the scrape took from elsewhere)."""
    if live is None or live.limit_sources.get(name) not in SERVER_SOURCES:
        return None
    return getattr(live, name)  # type: ignore[no-any-return]


def _ceiling(prompt: int, output: int, mml: Figure, rule: Rule) -> Ceiling:
    if not is_num(mml.value):
        reason = f"max_model_len unknown ({getattr(mml.value, 'reason', '')})"
        return Ceiling(
            mml, _here(prompt + output), _here(NA(reason)), _here(NA(reason)), None,
            Verdict.UNKNOWN, output, reason, "", rule.server,
        )  # fmt: skip
    limit = int(mml.value)
    over = max(0, prompt + output - limit)
    room = limit - output
    max_prompt = _here(room) if room > 0 else _here(NA("the output alone reaches max_model_len"))
    found = verdict(prompt, output, limit, rule)
    served = output if found in (Verdict.FITS, Verdict.REJECTED) else limit - prompt
    rejected = {Verdict.FITS: False, Verdict.SHORTENED: False, Verdict.REJECTED: True}.get(found)
    return Ceiling(
        mml, _here(prompt + served), _here(over), max_prompt, rejected, found, served,
        _why_verdict(found, prompt, output, limit, rule), advice(prompt, output, limit),
        rule.server,
    )  # fmt: skip


def _why_verdict(found: Verdict, prompt: int, output: int, limit: int, rule: Rule) -> str:
    cut = f"stops the output at {limit - prompt:,} tokens (finish_reason length)"
    if found is Verdict.FITS:
        return f"prompt + output ≤ max_model_len {limit:,}"
    if found is Verdict.SHORTENED:
        return f"{rule.server} accepts it and {cut}"
    if found is Verdict.DEPENDS:
        return f"vLLM < 0.32 refuses it; vLLM ≥ 0.32 {cut}"
    if prompt >= limit:
        return (
            f"the prompt alone ({prompt:,}) leaves no room in max_model_len {limit:,} for an "
            "output token: every vLLM version refuses it"
        )
    if output > limit:
        return f"max_tokens {output:,} > max_model_len {limit:,}: every vLLM version refuses it"
    return f"{rule.server} refuses prompt + output > max_model_len (as every vLLM < 0.32 does)"


def _engine_state() -> type[EngineState]:
    # Imported when a live sample exists (it was built from it): the samples' module is not
    # on the path of a budget without --endpoint.
    from sparktop.model import EngineState

    return EngineState


def _kv(
    live: int, concurrency: int, pool: Figure, seqs: Figure, sample: EngineSample | None
) -> KvFit:
    total = live * concurrency
    if is_num(pool.value):
        pool_tokens = float(pool.value)
        pct = _here(total * 100.0 / pool_tokens)
        fits: bool | None = total <= pool_tokens
        by_pool = _here(int(pool_tokens // live))
    else:
        reason = "KV pool unknown (why: see KV pool)"  # said once, not in every figure
        pct, fits, by_pool = _here(NA(reason)), None, _here(NA(reason))
    if sample is None:
        free = Figure(NA("no live server; pass --endpoint"), Origin.SERVER)
    elif sample.state is _engine_state().UNREACHABLE or not sample.ok:
        what = sample.message or sample.state.value
        free = Figure(NA(f"endpoint {sample.engine} {sample.state.value}: {what}"), Origin.SERVER)
    else:
        free = Figure(sample.kv_free_tokens, Origin.SERVER)
    if is_num(free.value) and free.value > 0:
        free_pct = _here(total * 100.0 / free.value)
        fits_now: bool | None = total <= free.value
    else:
        free_pct, fits_now = (
            _here(NA(f"free pool unknown: {getattr(free.value, 'reason', 0)}")),
            None,
        )
        if is_num(free.value):  # 0 tokens free
            free_pct, fits_now = _here(NA("no free KV tokens right now")), False
    return KvFit(pool, _here(total), pct, fits, by_pool, seqs, free, free_pct, fits_now)


def _batched(prompt: int, concurrency: int, limit: Figure) -> Batched:
    batched = prompt * concurrency
    if not is_num(limit.value):
        reason = f"max_num_batched_tokens unknown ({getattr(limit.value, 'reason', '')})"
        return Batched(limit, _here(batched), _here(NA(reason)), None, _here(NA(reason)))
    cap = int(limit.value)
    chunks = _here(math.ceil(prompt / cap))
    if prompt > cap:
        fit = _here(NA("one prompt alone exceeds the limit: chunked prefill at any concurrency"))
    else:
        fit = _here(cap // prompt)
    return Batched(limit, _here(batched), chunks, batched > cap, fit)


REFUSED = "the server rejects this request (see the ceiling)"


def _timing(est: Estimate, output: int, ceiling: Ceiling) -> Timing:
    figures = [est.ttft_s, est.prefill_tps, est.decode_tps, est.aggregate_tps]
    if ceiling.rejected:
        reason = REFUSED
        figures = [Estimated(NA(reason), f"no data: {reason}", Basis.NO_DATA)] * 4
    ttft, prefill, decode, aggregate = figures
    if is_num(ttft.value) and is_num(decode.value):
        total = _here(ttft.value + output / decode.value)
    else:
        missing = "TTFT" if not is_num(ttft.value) else "decode"
        total = _here(NA(f"no {missing} figure"))
    return Timing(ttft, prefill, decode, aggregate, est.aggregate_kind, total)


def _caveats(profile: Profile, tokens: TokenCount) -> tuple[str, ...]:
    out = []
    if tokens.method == "estimated":
        out.append(
            "real tokenisation: the prompt is estimated from characters (CJK 1:1, other "
            f"characters ÷ {tokens.chars_per_token}); --endpoint or --tokenizer count exactly"
        )
    else:
        out.append("the chat template and special tokens the server adds to the prompt")
    if not isinstance(profile.output_tokens, int):
        out.append(
            "the profile does not state its output tokens per request, which its "
            f"{profile.aggregate_kind} aggregate depends on"
        )
    out += [
        "prefix caching: a repeated prefix (the next turn of a conversation) prefills far "
        "cheaper; sweeps measure cold prompts",
        "speculative-decoding acceptance: it varies with the content, and decode with it",
        "the interconnect: tensor parallelism all-reduces every layer; another network or "
        "another image invalidates the profile's figures",
        "other load on the server, scheduling overhead and KV fragmentation",
    ]
    if isinstance(profile.output_tokens, int):
        out.append(
            f"the profile measured {profile.output_tokens:,} output tokens per request; its "
            f"aggregate is {profile.aggregate_kind}"
        )
    return tuple(out)


def compute_budget(
    tokens: TokenCount | int,
    concurrency: int,
    profile: Profile,
    output_tokens: int | None = None,
    *,
    kv_pool_tokens: int | None = None,
    max_model_len: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    live: EngineSample | None = None,
    profile_limits: bool = True,
) -> Budget:
    """The budget for ``concurrency`` requests of ``tokens`` prompt tokens each.

    ``output_tokens`` defaults to 2,048 (the seed script's default). Keyword limits (from the
    command line or the inventory) beat the live server, which beats the profile. ``live`` is
    a scraped sample: its ``kv_free_tokens``, ``max_model_len`` and ``kv_pool_tokens`` (the
    latter only when the server reported it); a failed one yields "no data" for the free
    pool; its ``max_num_seqs`` and ``max_num_batched_tokens`` only when the server exported
    them (``cache_config_info`` labels where a version has them, SGLang's gauges).
    ``profile_limits`` False: the profile does not describe the live server (the default
    profile beside ``--endpoint``, as the plan rules), so its limits are not used and a limit
    neither the caller nor the server gives is unknown; its figures still give the times.
    Over ``max_model_len``, the verdict follows the live server's version
    (``live.server_version``, :mod:`sparktop.sweep.budget.ceiling`); without one it gives both.
    Raises ``ValueError`` for a prompt, concurrency or output below the minimum (callers
    validate user input first).
    """
    count = tokens if isinstance(tokens, TokenCount) else TokenCount(tokens, "given")
    if count.tokens < 1 or concurrency < 1 or (output_tokens is not None and output_tokens < 0):
        raise ValueError("prompt tokens and concurrency must be >= 1, output tokens >= 0")
    output = DEFAULT_OUTPUT_TOKENS if output_tokens is None else output_tokens
    ok = live if live is not None and live.ok else None
    # A server whose page was not read is not one that "does not export" a limit.
    unread = (
        None
        if live is None or live.ok
        else NA(f"the server's metrics were not read ({live.state.value})")
    )
    server_mml = ok.max_model_len if ok else unread
    if not is_num(server_mml) and isinstance(count.max_model_len, int):
        server_mml = count.max_model_len
    # A pool the scrape itself filled in from an inventory or profile is not the server's.
    server_pool = (
        ok.kv_pool_tokens
        if ok and ok.kv_pool_source not in ("inventory", "profile")
        else None
        if ok
        else unread
    )

    def own(name: str) -> int | NA | None:
        return getattr(profile, name) if profile_limits else None

    mml = _limit(max_model_len, server_mml, own("max_model_len"), "--max-model-len")
    pool = _limit(kv_pool_tokens, server_pool, own("kv_pool_tokens"), "--kv-pool")
    batch = _limit(
        max_num_batched_tokens,
        _told(ok, "max_num_batched_tokens") if ok else unread,
        own("max_num_batched_tokens"),
        "--max-batched",
    )
    told_seqs = _told(ok, "max_num_seqs") if ok else unread
    seqs = _limit(max_num_seqs, told_seqs, own("max_num_seqs"), "--max-num-seqs")
    rule = rule_for(ok.kind, ok.server_version) if ok else UNKNOWN_RULE
    ceiling = _ceiling(count.tokens, output, mml, rule)
    served = ceiling.served_output_tokens
    kv = _kv(count.tokens + served, concurrency, pool, seqs, live)
    est = estimate(profile, count.tokens, concurrency)
    warnings = []
    if count.note:
        warnings.append(count.note)
    if not profile_limits:
        short = (profile.cluster.split(",")[0], profile.model.split(" (")[0])
        setup = ", ".join(x for x in short if x) or "its cluster"
        warnings.append(
            f"the times are profile {profile.name}'s, measured on another setup ({setup}), "
            "not on this server: name this server's profile with --profile, or measure one "
            "with 'sparktop sweep'"
        )
    if ceiling.verdict is Verdict.DEPENDS:
        warnings.append(
            f"prompt + output > max_model_len and the server's version is not known: "
            f"{ceiling.why}; the KV and times are for the shortened request "
            f"({ceiling.served_output_tokens:,} output tokens)"
        )
    if is_num(seqs.value) and concurrency > seqs.value:
        warnings.append(
            f"concurrency {concurrency:,} > max_num_seqs {int(seqs.value):,}: only "
            f"{int(seqs.value):,} run at once, the rest wait"
        )
    return Budget(
        profile=profile,
        tokens=count,
        concurrency=concurrency,
        output_tokens=output,
        output_origin=Origin.GIVEN if output_tokens is not None else Origin.DEFAULT,
        ceiling=ceiling,
        kv=kv,
        batched=_batched(count.tokens, concurrency, batch),
        timing=_timing(est, served, ceiling),
        estimate=est,
        warnings=tuple(warnings),
        not_accounted_for=_caveats(profile, count),
        send_now=send_now(
            profile,
            count.tokens,
            served,
            live,
            seqs.value,
            refused=REFUSED if ceiling.rejected else "",
        ),
        lesson=lesson(profile, count.tokens, concurrency, output),
        describes_server=profile_limits,
    )
