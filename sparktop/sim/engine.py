"""One simulated vLLM engine: a scheduler bounded by ``max_num_seqs``, a KV pool in blocks
that fills, queues and preempts, and the counters/histograms vLLM exports.

Semantics follow vLLM V1: ``running`` counts requests in prefill and decode; a waiting
request is admitted first-come-first-served when a sequence slot is free and its blocks fit
(head-of-line blocking); a running request that cannot get a block for its next tokens
preempts the most recently admitted running request, which goes back to the front of the
queue and is recomputed (its computed full blocks hit the prefix cache). ``prompt_tokens``
is counted when a request produces its first token. Rates come from
:class:`~sparktop.sim.rates.ProfileRates`, slowed by ``pace`` (the TP group's slowest rank).

Background clients are closed loops: a client whose request finishes, or is aborted (a
restart drops every request; the client sees an error), thinks and sends the next one, so
load always resumes; after a restart the think time starts when the server is back.

A sweep row at concurrency *c* is *c* equal prompts prefilling together, so a request's TTFT
is read at its *prefill concurrency*: itself plus each other prefilling request weighted by
its prompt over this request's uncached tokens, at most 1 each (see :func:`prefill_concurrency`),
re-read at every step. Queueing at ``max_num_seqs`` and the pool adds to the TTFT a client
sees; chunking at ``max_num_batched_tokens`` is inside the profile's TTFT (the sweep ran with
chunked prefill at its own limit), which is why the rate is looked up, not computed from a
token budget.
Equal prompts give the sweep's *c*; one long prompt among short ones prefills at nearly the
concurrency-1 rate, as vLLM's chunked prefill gives it most of each step's token budget.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from dataclasses import dataclass, field

from sparktop.sim.rates import ProfileRates, ServingLimits, blocks_for
from sparktop.sim.requests import LoadSpec, Phase, SimRequest
from sparktop.sim.stats import SPEC_TOKENS, EngineStats

SPEC_ACCEPT = 0.8
"""Baseline MTP acceptance per position step: mean acceptance length 1 + Σ 0.8^k (k = 1…5)
≈ 3.7 tokens per draft. The profile's decode rates were measured with it."""


def spec_yield(accept: float) -> float:
    """Tokens one MTP step yields on average at acceptance ``accept``."""
    return 1.0 + sum(accept ** (k + 1) for k in range(SPEC_TOKENS))


__all__ = ["EngineModel", "LoadSpec", "Phase", "SimRequest", "prefill_concurrency"]


def prefill_concurrency(uncached_tokens: int, others_prompt_tokens: list[int]) -> int:
    """The sweep concurrency whose TTFT applies to a request prefilling ``uncached_tokens``
    next to running requests with these prompt lengths: ``1 + Σ min(1, other / uncached)``,
    rounded (≥ 1)."""
    work = max(1, uncached_tokens)
    return max(1, round(1 + sum(min(1.0, p / work) for p in others_prompt_tokens)))


@dataclass(slots=True)
class EngineModel:
    """Mutable state of one engine, advanced by :meth:`step` (single-threaded)."""

    name: str
    model_name: str
    rates: ProfileRates
    rng: random.Random
    load: LoadSpec = field(default_factory=LoadSpec)
    pace: float = 1.0
    spec_accept: float = SPEC_ACCEPT
    """MTP acceptance of a draft's first token (:meth:`EngineStats.draft`); a scenario lowers
    it to make acceptance collapse, and decode slows by the tokens each step yields."""
    slowdown: float = 1.0
    """The engine's own speed factor beside its nodes' pace (1 = as the profile says): a
    slowdown no node shows (a software regression, a changed setting), for the tests of an
    unexplained deficit."""
    stalled: bool = False
    """A deadlock (eugr/spark-vllm-docker#260): running requests stay running and produce
    nothing, new ones queue, ``/metrics`` and ``/health`` keep answering."""
    started_s: float = 0.0
    down_until_s: float = 0.0
    restarts: int = 0
    stats: EngineStats = field(init=False)
    limits: ServingLimits = field(init=False)
    waiting: deque[SimRequest] = field(default_factory=deque)
    running: list[SimRequest] = field(default_factory=list)
    used_blocks: int = 0
    _next_client_s: list[float | None] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.limits = self.rates.limits
        self.stats = EngineStats(self.limits.max_model_len)
        self.set_clients(self.load.clients, 0.0)

    # -- state -----------------------------------------------------------------------------

    def is_up(self, now: float) -> bool:
        return now >= self.down_until_s

    @property
    def free_blocks(self) -> int:
        return self.limits.num_gpu_blocks - self.used_blocks

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks in use (``vllm:kv_cache_usage_perc``)."""
        return self.used_blocks / self.limits.num_gpu_blocks

    def live_tokens(self) -> int:
        return sum(r.live_tokens for r in self.running)

    @property
    def spec_pace(self) -> float:
        """Decode speed relative to the profile's: tokens per MTP step now ÷ at baseline."""
        return spec_yield(self.spec_accept) / spec_yield(SPEC_ACCEPT)

    def decode_tps(self) -> float:
        """Sum of the per-stream decode rates of decoding requests right now, tok/s."""
        conc = len(self.running)
        return sum(
            self.rates.decode_tps(r.prompt_tokens, conc) * self.pace * self.spec_pace
            for r in self.running
            if r.phase is Phase.DECODE
        )

    # -- requests --------------------------------------------------------------------------

    def new_request(
        self, now: float, prompt_tokens: int, max_tokens: int, *, tag: str = "",
        cached_tokens: int = 0, client: int | None = None,
    ) -> SimRequest:  # fmt: skip
        """Create and queue a request (the caller checked it fits ``max_model_len``)."""
        req = SimRequest(
            id=f"{self.name}-{next(self._ids)}", prompt_tokens=max(1, prompt_tokens),
            max_tokens=max(1, max_tokens), arrival_s=now, tag=tag,
            cached_tokens=min(cached_tokens, prompt_tokens - 1), client=client,
        )  # fmt: skip
        self.waiting.append(req)
        return req

    def abort(self, req: SimRequest, now: float | None = None) -> None:
        """Drop a request (client went away); vLLM does not count aborts as successes.

        A background client's next request follows its think time from ``now`` (default:
        the request's arrival), so an aborted request never silences its client."""
        if req.phase is Phase.DONE:
            return
        if req in self.running:
            self.running.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        self._free(req)
        req.phase, req.finish_reason = Phase.DONE, "abort"
        self._client_done(req, req.arrival_s if now is None else now)
        req._notify()

    def abort_tagged(self, tag: str, now: float | None = None) -> int:
        victims = [r for r in (*self.running, *self.waiting) if r.tag == tag]
        for r in victims:
            self.abort(r, now)
        return len(victims)

    def restart(self, now: float, downtime_s: float) -> None:
        """The server restarts: every request is dropped, every counter starts from zero,
        and every background client sends again when the server is back (``now`` +
        ``downtime_s``)."""
        back = now + downtime_s
        for req in (*self.running, *self.waiting):
            self.abort(req, back)
        self.stats = EngineStats(self.limits.max_model_len)
        self.used_blocks = 0
        self.down_until_s = back
        self.started_s = back
        self.restarts += 1
        self._next_client_s = [
            back if due is None else max(due, back) for due in self._next_client_s
        ]

    def set_clients(self, clients: int, now: float) -> None:
        """Change the number of background clients (new ones start at ``now``)."""
        current = self._next_client_s[:clients]
        self._next_client_s = current + [now] * (clients - len(current))

    # -- the step --------------------------------------------------------------------------

    def step(self, now: float, dt: float) -> None:
        """Advance ``dt`` simulated seconds ending at ``now``."""
        if not self.is_up(now):
            return
        self._arrivals(now)
        if self.stalled:
            return
        self._admit(now)
        conc = len(self.running)
        if conc:
            s = self.stats
            s.decode_calls += 1
            s.busy_slot_steps += conc
            prefilling = sum(1 for r in self.running if r.phase is Phase.PREFILL)
            s.slot_prefill_s += prefilling * dt
            s.slot_decode_s += (conc - prefilling) * dt
        for req in list(self.running):
            if req.phase is Phase.PREFILL:
                self._prefill(req, now, dt)
            elif req.phase is Phase.DECODE:
                self._decode(req, now, dt, conc)

    def _arrivals(self, now: float) -> None:
        rng = self.rng
        spec = self.load
        for i, due in enumerate(self._next_client_s):
            if due is None or due > now:
                continue
            base = rng.choice(spec.prompt_tokens)
            prompt = int(base * rng.uniform(1 - spec.jitter, 1 + spec.jitter))
            out = spec.output_tokens or self.limits.output_tokens
            self.new_request(now, prompt, out, client=i, tag="load")
            self._next_client_s[i] = None

    def _admit(self, now: float) -> None:
        limits = self.limits
        while self.waiting and len(self.running) < limits.max_num_seqs:
            req = self.waiting[0]
            need = blocks_for(req.cached_tokens + 1, limits.block_size)
            if need > self.free_blocks:
                break  # head-of-line blocking, as vLLM's FCFS scheduler does
            self.waiting.popleft()
            self.running.append(req)
            req.phase = Phase.PREFILL
            req.computed = float(req.cached_tokens)
            req.blocks = need
            self.used_blocks += need
            if req.first_scheduled_s is None:
                req.first_scheduled_s = now
            self.stats.prefix_queries += req.prompt_tokens
            self.stats.prefix_hits += req.cached_tokens

    def _grow(self, req: SimRequest, tokens: int) -> bool:
        """Hold blocks for ``tokens``; preempt from the back of ``running`` if the pool is
        full. False when ``req`` itself was preempted."""
        need = blocks_for(tokens, self.limits.block_size) - req.blocks
        while need > self.free_blocks:
            victim = self.running[-1]
            self._preempt(victim)
            if victim is req:
                return False
        if need > 0:
            req.blocks += need
            self.used_blocks += need
        return True

    def _preempt(self, req: SimRequest) -> None:
        self.running.remove(req)
        bs = self.limits.block_size
        req.cached_tokens = min(req.prompt_tokens - 1, int(req.computed) // bs * bs)
        self._free(req)
        req.phase, req.computed, req.gen_frac = Phase.WAITING, 0.0, 0.0
        req.preemptions += 1
        self.stats.preemptions += 1
        self.waiting.appendleft(req)

    def _free(self, req: SimRequest) -> None:
        self.used_blocks -= req.blocks
        req.blocks = 0

    def _prefill(self, req: SimRequest, now: float, dt: float) -> None:
        # The rate is read at every step from who is prefilling now, so requests that
        # arrive together each see the whole batch (not only the ones admitted before
        # them), and a prefill slows when others join it and speeds up when they leave.
        # Decoding requests take one token of a step's budget each: they do not count.
        uncached = max(1, req.prompt_tokens - req.cached_tokens)
        others = [
            r.prompt_tokens for r in self.running if r is not req and r.phase is Phase.PREFILL
        ]
        ttft = self.rates.ttft_s(uncached, prefill_concurrency(uncached, others))
        req.prefill_rate = uncached / ttft
        target = min(float(req.prompt_tokens), req.computed + req.prefill_rate * dt * self.pace)
        if not self._grow(req, int(target)):
            return
        req.computed = target
        if req.computed < req.prompt_tokens:
            return
        if not self._grow(req, req.prompt_tokens + max(1, req.generated)):
            return
        req.phase = Phase.DECODE
        if req.first_token_s is None:
            req.first_token_s = now
            req.generated = 1
            self.stats.generation_tokens += 1
            self.stats.prompt_tokens += req.prompt_tokens
            self.stats.prompt_by_source["local_cache_hit"] += req.cached_tokens
            self.stats.prompt_by_source["local_compute"] += req.prompt_tokens - req.cached_tokens
            self.stats.ttft.observe(now - req.arrival_s)
        req._notify()
        if req.generated >= req.max_tokens:
            self._finish(req, now)

    def _decode(self, req: SimRequest, now: float, dt: float, conc: int) -> None:
        rate = self.rates.decode_tps(req.prompt_tokens, conc) * self.pace * self.spec_pace
        req.gen_frac += rate * dt
        n = min(int(req.gen_frac), req.max_tokens - req.generated)
        if n <= 0:
            return
        if not self._grow(req, req.prompt_tokens + req.generated + n):
            return
        req.gen_frac -= n
        req.generated += n
        self.stats.generation_tokens += n
        self.stats.itl.observe(1.0 / rate, n)
        self.stats.draft(n, self.spec_accept)
        req._notify()
        if req.generated >= req.max_tokens:
            self._finish(req, now)

    def _finish(self, req: SimRequest, now: float) -> None:
        self.running.remove(req)
        self._free(req)
        req.phase, req.finish_reason = Phase.DONE, "length"
        s = self.stats
        s.success["length"] += 1
        s.tokens_max = max(s.tokens_max, req.prompt_tokens + req.generated)
        scheduled = req.first_scheduled_s if req.first_scheduled_s is not None else now
        first = req.first_token_s if req.first_token_s is not None else now
        s.e2e.observe(now - req.arrival_s)
        s.queue.observe(scheduled - req.arrival_s)
        s.prefill.observe(first - scheduled)
        s.decode.observe(now - first)
        if req.generated > 1:
            s.tpot.observe((now - first) / (req.generated - 1))
        s.inference.observe(now - scheduled)
        s.prompt_len.observe(req.prompt_tokens)
        s.generation_len.observe(req.generated)
        s.max_tokens.observe(req.max_tokens)
        self._client_done(req, now)
        req._notify()

    def _client_done(self, req: SimRequest, now: float) -> None:
        """The background client that sent ``req`` thinks, then sends its next request."""
        if req.client is None or req.client >= len(self._next_client_s):
            return
        think = self.rng.expovariate(1.0 / self.load.think_s) if self.load.think_s > 0 else 0.0
        self._next_client_s[req.client] = now + think
