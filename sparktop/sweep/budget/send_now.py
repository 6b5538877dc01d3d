""" "If I send it now": TTFT for one more request on top of the live load, and the seed's
lesson for the chosen prompt (issue 13 item 5).

**Send now** (:class:`SendNow`). With ``running`` requests on the engine, one more request
makes ``running + 1``. The sweep's concurrency *c* is *c* equal prompts prefilling together,
so its TTFT is looked up at the *prefill concurrency* it meets, as the simulator models it:
``1 + running × share × min(1, mean prompt ÷ prompt)``, where ``share`` is the part of a
request's life spent prefilling (mean prefill time ÷ (prefill + decode time) over the window,
``vllm:request_prefill_time_seconds`` / ``request_decode_time_seconds``) — a decoding request
takes one token of a step's budget, a shorter prompt less than a whole share. Without those
figures every running request counts as prefilling (``running + 1``: the cautious figure).
It queues first when the scheduler
is full (``running ≥ max_num_seqs``), when requests already wait (vLLM admits first come,
first served), or when the prompt does not fit the pool's free tokens now. The wait is the
time for enough requests to finish: ``(waiting + 1)`` of them for a slot, or as many as free
the missing tokens (each frees its prompt + output), at the engine's measured finish rate
(``requests_finished_per_s`` over the window, *server*) or, without one, the profile's:
``running`` requests of the live mean prompt each last TTFT + output ÷ decode there, so
they finish at ``running ÷ that`` per second (*profile*). The idle figure (concurrency 1)
stands next to it.

**Lesson** (:class:`Lesson`): the chosen prompt against the profile's shortest, at the same
concurrency, from the estimator: decode keeps N % (per-request decode tok/s), end-to-end
throughput keeps M % (the profile's end-to-end aggregate when that is its aggregate column,
else per request: output ÷ (TTFT + output ÷ decode) with the profile's output tokens),
TTFT grows K×. The 2-Spark seed at concurrency 1 and 131,072 tokens: 86 %, 8.5 %, 125×.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparktop.sweep.estimator.estimator import Basis, Estimated, estimate
from sparktop.sweep.profiles.profile import Profile
from sparktop.values import NA, is_num

if TYPE_CHECKING:
    from sparktop.model import EngineSample


@dataclass(frozen=True, slots=True)
class Lesson:
    """The chosen prompt against the profile's shortest (same concurrency); NA with why."""

    prompt_tokens: int
    shortest_prompt_tokens: int
    concurrency: int
    decode_keep_pct: float | NA
    e2e_keep_pct: float | NA
    ttft_growth: float | NA
    e2e_how: str


def keeps(pct: float) -> tuple[str, float]:
    """How a lesson figure reads against the shortest prompt's: ``("keeps", 86.0)`` when it
    is at most as high, ``("gains", 34.0)`` (percent above) when higher. A per-request decode
    a little faster at a longer prompt (the sweep's cells differ by their noise) read
    "decode keeps 134 %", which looks like a bug."""
    return ("keeps", pct) if pct <= 100 else ("gains", pct - 100)


@dataclass(frozen=True, slots=True)
class SendNow:
    """One more request on the live load. ``origin`` of the wait: ``server`` (measured
    finish rate), ``profile`` (the estimator at the live load) or ``""`` (no wait / none).
    ``queued_because``: ``""`` (admitted at once), ``max_num_seqs``, ``waiting`` or ``pool``."""

    running: float | NA
    waiting: float | NA
    concurrency: int | NA
    prefill_concurrency: int | NA
    prefill_how: str
    queued_because: str
    queue_wait_s: float | NA
    wait_origin: str
    ttft_s: Estimated | None
    ttft_total_s: float | NA
    idle_ttft_s: Estimated
    refused: str = ""
    """Why the server refuses the request (then no TTFT is given, idle or now); "" when not."""

    @property
    def live(self) -> bool:
        return self.ttft_s is not None


def _e2e_tps(ttft: float | NA, decode: float | NA, output: int) -> float | NA:
    if not (is_num(ttft) and is_num(decode)) or decode <= 0:
        return NA("no TTFT or decode figure")
    return output / (ttft + output / decode)


def lesson(profile: Profile, prompt_tokens: int, concurrency: int, output_tokens: int) -> Lesson:
    """The seed's key lesson for ``prompt_tokens`` at ``concurrency`` (see the module doc)."""
    shortest = min(int(r.prompt_tokens) for r in profile.rows)
    here = estimate(profile, prompt_tokens, concurrency)
    base = estimate(profile, shortest, concurrency)

    def keep(a: float | NA, b: float | NA) -> float | NA:
        if not (is_num(a) and is_num(b)) or b <= 0:
            why = (
                a.reason
                if isinstance(a, NA)
                else b.reason
                if isinstance(b, NA)
                else "the shortest prompt's figure is 0"
            )
            # The reason alone: every output already says "no data (…)" around it.
            return NA(why.removeprefix("no data: "))
        return a / b * 100.0

    decode = keep(here.decode_tps.value, base.decode_tps.value)
    ttft = keep(here.ttft_s.value, base.ttft_s.value)
    growth = ttft / 100.0 if is_num(ttft) else ttft
    if profile.aggregate_kind == "end-to-end":
        e2e = keep(here.aggregate_tps.value, base.aggregate_tps.value)
        how = "the profile's end-to-end aggregate"
    else:
        out = profile.output_tokens if isinstance(profile.output_tokens, int) else output_tokens
        e2e = keep(
            _e2e_tps(here.ttft_s.value, here.decode_tps.value, out),
            _e2e_tps(base.ttft_s.value, base.decode_tps.value, out),
        )
        how = f"per request, {out:,} output tokens: output ÷ (TTFT + output ÷ decode)"
    return Lesson(prompt_tokens, shortest, concurrency, decode, e2e, growth, how)


def _finish_rate(profile: Profile, live: EngineSample, running: float) -> tuple[float | NA, str]:
    """Requests finished per second: measured over the window, else the profile's."""
    rate = live.requests_finished_per_s
    if is_num(rate) and rate > 0:
        return float(rate), "server"
    prompt = live.mean_prompt_tokens
    if not is_num(prompt) or running < 1:
        return NA("no finish rate measured and no live mean prompt to estimate one"), ""
    est = estimate(profile, float(prompt), max(1, round(running)))
    out = profile.output_tokens if isinstance(profile.output_tokens, int) else 0
    ttft, decode = est.ttft_s.value, est.decode_tps.value
    if not (is_num(ttft) and is_num(decode)) or decode <= 0 or out <= 0:
        return NA("the profile has no request duration at the live load"), ""
    return running / (ttft + out / decode), "profile"


def _prefill_concurrency(live: EngineSample, prompt_tokens: int, conc: int) -> tuple[int, str]:
    """The sweep concurrency whose TTFT applies (module doc), and how it was found."""
    others = conc - 1
    prefill, decode = live.prefill_time_mean_s, live.decode_time_mean_s
    if others <= 0:
        return 1, "alone on the engine"
    if not (is_num(prefill) and is_num(decode)) or prefill + decode <= 0:
        return conc, "every running request counted as prefilling (no prefill/decode times)"
    share = prefill / (prefill + decode)
    mean = live.mean_prompt_tokens
    weight = min(1.0, float(mean) / prompt_tokens) if is_num(mean) and mean > 0 else 1.0
    value = max(1, round(1 + others * share * weight))
    return value, (
        f"{others} others running with it, {share * 100:.0f}% of their time prefilling, prompts "
        f"{weight * 100:.0f}% of this one's"
    )


def send_now(
    profile: Profile,
    prompt_tokens: int,
    output_tokens: int,
    live: EngineSample | None,
    max_num_seqs: float | NA,
    *,
    refused: str = "",
) -> SendNow:
    """TTFT for one more request of ``prompt_tokens`` on ``live``'s load (module doc).

    ``output_tokens``: what the request will produce (shortened when the server cuts it).
    ``refused``: why the server refuses it (the budget's ceiling): no TTFT at all then."""
    if refused:
        none = NA(refused)
        no = Estimated(none, f"no data: {refused}", Basis.NO_DATA)
        running = live.running if live is not None and live.ok else none
        waiting = live.waiting if live is not None and live.ok else none
        return SendNow(running, waiting, none, none, "", "", none, "", None, none, no, refused)
    idle = estimate(profile, prompt_tokens, 1).ttft_s
    if live is None or not live.ok:
        why = NA(
            "no live server; pass --endpoint"
            if live is None
            else f"endpoint {live.engine} {live.state.value}: {live.message or 'no data'}"
        )
        return SendNow(why, why, why, why, "", "", why, "", None, why, idle)
    running, waiting = live.running, live.waiting
    if isinstance(running, NA):
        why = NA(f"running unknown ({running.reason})")
        return SendNow(running, waiting, why, why, "", "", why, "", None, why, idle)
    seqs = float(max_num_seqs) if is_num(max_num_seqs) else None
    conc = int(running) + 1 if seqs is None else int(min(running + 1, seqs))
    prefill_conc, how = _prefill_concurrency(live, prompt_tokens, conc)
    ttft = estimate(profile, prompt_tokens, prefill_conc).ttft_s
    queued = ""
    needed = 0
    free = live.kv_free_tokens
    if seqs is not None and running >= seqs:
        queued, needed = "max_num_seqs", int(waiting if is_num(waiting) else 0) + 1
    elif is_num(waiting) and waiting > 0:
        queued, needed = "waiting", int(waiting) + 1
    if is_num(free) and prompt_tokens > free:
        prompt = live.mean_prompt_tokens
        per = (float(prompt) if is_num(prompt) else float(prompt_tokens)) + output_tokens
        by_pool = math.ceil((prompt_tokens - free) / max(1.0, per))
        if by_pool > needed:
            queued, needed = "pool", by_pool
    wait: float | NA = 0.0
    origin = ""
    if queued:
        rate, origin = _finish_rate(profile, live, float(running))
        wait = needed / rate if is_num(rate) else rate
    total: float | NA
    if is_num(ttft.value) and is_num(wait):
        total = ttft.value + wait
    else:
        total = ttft.value if isinstance(ttft.value, NA) else wait
    return SendNow(
        running, waiting, conc, prefill_conc, how, queued, wait, origin, ttft, total, idle
    )
