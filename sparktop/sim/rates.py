"""How fast the simulated engine prefills and decodes: the sweep profile, through the estimator.

The simulator takes TTFT and per-stream decode rates from
:func:`sparktop.sweep.estimator.estimator.estimate` for the current prompt length and concurrency,
so the demo and the integration tests behave like the sweep the profile recorded. Where the
estimator has no data the simulator still needs *some* physics, and says what it assumes:

- between two measured concurrencies: the estimator's own interpolation;
- beyond the highest measured concurrency: the batch is saturated (aggregate decode stays
  at the last column's, so per-stream decode falls as 1/concurrency; TTFT grows with it);
- beyond a column's longest prompt: prefill continues at that row's rate (TTFT scales with
  the prompt), decode stays at that row's per-stream rate;
- below half the table's shortest prompt (where the estimator stops): the figures at that
  length (a shorter prompt is not slower).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from sparktop.errors import UserError
from sparktop.model import is_num
from sparktop.sweep.estimator.estimator import estimate
from sparktop.sweep.profiles.profile import Profile

BLOCK_SIZE = 256
"""KV block size of the simulated server (the 2-Spark seed's boot log: block size 256)."""


@dataclass(frozen=True, slots=True)
class ServingLimits:
    """The simulated server's limits, tokens. ``kv_pool_tokens`` is what
    ``cache_config_info{kv_cache_size_tokens}`` reports; ``num_gpu_blocks`` = pool // block."""

    kv_pool_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    output_tokens: int
    block_size: int = BLOCK_SIZE

    @property
    def num_gpu_blocks(self) -> int:
        return self.kv_pool_tokens // self.block_size


def _int(value: object, what: str, profile: Profile) -> int:
    if not is_num(value):
        raise UserError(
            f"profile {profile.name} does not state {what}; the simulator needs it "
            f"(limits.{what} in the profile file)"
        )
    return int(value)


def default_max_num_seqs(profile_seqs: int, pool: int, max_model_len: int) -> int:
    """The simulated server's ``max_num_seqs``: the profile's, doubled until the pool can fill.

    With the 4-Spark profile 8 × 1,048,576 tokens is less than the 11,434,628-token pool, so
    its pool could never run out; the simulator then runs with 32 (twice the pool in
    sequences of ``max_model_len``; the generated inventory says so) so the pool-exhaustion
    scenario is reachable next to the background load.
    """
    seqs = profile_seqs
    while seqs * max_model_len <= pool * 2:
        seqs *= 2
    return seqs


class ProfileRates:
    """TTFT and per-stream decode rate of a sweep profile, by prompt length and concurrency.

    ``max_num_seqs`` and ``kv_pool_tokens`` override the simulated server's limits (tests use
    a small pool); rates always come from the profile.
    """

    def __init__(
        self,
        profile: Profile,
        max_num_seqs: int | None = None,
        kv_pool_tokens: int | None = None,
    ) -> None:
        self.profile = profile
        pool = kv_pool_tokens or _int(profile.kv_pool_tokens, "kv_pool_tokens", profile)
        max_len = _int(profile.max_model_len, "max_model_len", profile)
        seqs = _int(profile.max_num_seqs, "max_num_seqs", profile)
        self.limits = ServingLimits(
            kv_pool_tokens=pool,
            max_num_seqs=max_num_seqs or default_max_num_seqs(seqs, pool, max_len),
            max_num_batched_tokens=_int(
                profile.max_num_batched_tokens, "max_num_batched_tokens", profile
            ),
            max_model_len=max_len,
            output_tokens=int(profile.output_tokens) if is_num(profile.output_tokens) else 128,
        )
        self.concurrencies = profile.concurrencies
        if not self.concurrencies:
            raise ValueError(f"profile {profile.name} has no rows")
        self._max_prompt = {c: profile.column(c)[-1].prompt_tokens for c in self.concurrencies}
        # The estimator extrapolates down to half the table's shortest prompt; the simulator
        # follows it there (so the expected row agrees with the demo) and holds below.
        self._min_prompt = math.ceil(min(r.prompt_tokens for r in profile.rows) / 2)
        clocks = profile.baseline_sm_clock_mhz
        self.baseline_clocks_mhz: tuple[float, ...] = tuple(clocks) or (2509.0,)

    @classmethod
    def load(
        cls, name: str, max_num_seqs: int | None = None, kv_pool_tokens: int | None = None
    ) -> ProfileRates:
        from sparktop.plan import load_named  # the one loader (the plan's; lazily: it is big)

        return cls(load_named(name), max_num_seqs, kv_pool_tokens)

    def ttft_s(self, prompt_tokens: int, concurrency: int) -> float:
        """Time to first token for a prompt at this many running requests, s (> 0)."""
        return self._lookup(max(1, prompt_tokens), max(1, concurrency))[0]

    def decode_tps(self, prompt_tokens: int, concurrency: int) -> float:
        """Per-stream decode rate at this prompt length and concurrency, tok/s (> 0)."""
        return self._lookup(max(1, prompt_tokens), max(1, concurrency))[1]

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - bounded; one instance per simulator
    def _lookup(self, prompt: int, concurrency: int) -> tuple[float, float]:
        cs = self.concurrencies
        saturation = max(1.0, concurrency / cs[-1])
        c = min(max(concurrency, cs[0]), cs[-1])
        lo = max(x for x in cs if x <= c)
        hi = min(x for x in cs if x >= c)
        top = min(self._max_prompt[lo], self._max_prompt[hi])
        at = max(min(prompt, top), self._min_prompt)
        est = estimate(self.profile, at, c)
        ttft, decode = est.ttft_s.value, est.decode_tps.value
        if not (is_num(ttft) and is_num(decode)) or ttft <= 0 or decode <= 0:
            raise ValueError(f"profile {self.profile.name}: no estimate at {at} tokens × {c}")
        if prompt > top:
            ttft = ttft * prompt / top
        return float(ttft) * saturation, float(decode) / saturation


def blocks_for(tokens: int, block_size: int = BLOCK_SIZE) -> int:
    """KV blocks holding ``tokens`` tokens."""
    return math.ceil(tokens / block_size) if tokens > 0 else 0
