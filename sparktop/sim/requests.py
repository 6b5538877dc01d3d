"""A request inside a simulated engine, and the background load that sends them."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass


class Phase(enum.StrEnum):
    WAITING = "waiting"
    PREFILL = "prefill"
    DECODE = "decode"
    DONE = "done"


@dataclass(slots=True, eq=False)
class SimRequest:
    """One request inside the engine. ``cached_tokens`` hit the prefix cache on admission;
    ``computed`` prompt tokens have KV; ``event`` (optional) is set whenever tokens appear or
    the request ends, for streaming responses."""

    id: str
    prompt_tokens: int
    max_tokens: int
    arrival_s: float
    cached_tokens: int = 0
    tag: str = ""
    client: int | None = None
    phase: Phase = Phase.WAITING
    computed: float = 0.0
    generated: int = 0
    gen_frac: float = 0.0
    blocks: int = 0
    prefill_rate: float = 0.0
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    finish_reason: str | None = None
    preemptions: int = 0
    event: asyncio.Event | None = None

    @property
    def live_tokens(self) -> int:
        """Tokens whose KV this request holds now."""
        if self.phase is Phase.DECODE:
            return self.prompt_tokens + self.generated
        return int(self.computed) if self.phase is Phase.PREFILL else 0

    def _notify(self) -> None:
        if self.event is not None:
            self.event.set()


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """Background load: ``clients`` closed-loop users, each sending a request, waiting for
    it, thinking ``think_s`` on average (exponential), and sending the next. Prompt lengths
    are drawn from ``prompt_tokens`` with ±``jitter``; ``output_tokens`` None = profile's."""

    clients: int = 6
    prompt_tokens: tuple[int, ...] = (1004, 3800, 7513, 14955)
    output_tokens: int | None = None
    think_s: float = 1.5
    jitter: float = 0.1
