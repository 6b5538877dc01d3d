"""A load generator and a headless monitor for the long real-vLLM tests.

- :class:`LoadDriver`: up to ``slots`` clients, each sending completions of the current
  prompt length back to back while its slot is below the current running count; prompts
  are random token ids (no two alike: the prefix cache never answers for the engine).
- :class:`Monitor`: the monitor's own loop without a screen, as the exporter runs it: the
  plan's sources on a :class:`~sparktop.poller.Poller` at the inventory's interval, the
  plan's alert engine (default window and hold) judging the state every interval on the
  wall clock, every event kept with its time, and each tick's live-vs-expected deficit.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sparktop.alerts import Event
from sparktop.alerts.expected_rules import Deficit, deficit
from sparktop.cluster import ClusterState
from sparktop.inventory import load_inventory
from sparktop.model import EngineSample, is_num
from sparktop.plan import Plan
from sparktop.poller import Poller


@dataclass
class LoadDriver:
    url: str
    model: str
    output_tokens: int
    slots: int = 4
    seed: int = 0
    clients: int = 0
    prompt_tokens: int = 128
    sent: int = 0
    failed: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def set(self, clients: int, prompt_tokens: int) -> None:
        """Run ``clients`` requests at a time of ``prompt_tokens`` each from now on (a
        request in flight finishes at its own length)."""
        self.clients, self.prompt_tokens = clients, prompt_tokens
        self._changed.set()
        self._changed = asyncio.Event()

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._slot(i)) for i in range(self.slots)]

    async def _slot(self, index: int) -> None:
        rng = random.Random(self.seed * 100 + index)
        async with httpx.AsyncClient(base_url=self.url, timeout=120, trust_env=False) as client:
            while True:
                if index >= self.clients:
                    await self._changed.wait()
                    continue
                body = {
                    "model": self.model,
                    "prompt": [rng.randrange(10, 4000) for _ in range(self.prompt_tokens)],
                    "max_tokens": self.output_tokens,
                    "ignore_eos": True,
                    "temperature": 0.0,
                }
                self.sent += 1
                try:
                    response = await client.post("/v1/completions", json=body)
                    self.failed += response.status_code != 200
                except httpx.HTTPError:
                    self.failed += 1

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass(frozen=True)
class Tick:
    """One judgement: wall time (s), the deficit figures then (None: nothing compared), the
    engine's running gauge at its last scrape (None: not read), and why nothing was compared
    (the expected row's own reason, its numbers blanked so alike reasons count as one)."""

    time_s: float
    deficit: Deficit | None
    running: float | None = None
    why_not: str = ""


class Monitor:
    """The plan's sources, poller and alert engine, judged every interval (see the module
    docstring). ``events``: ``(wall time, event)``; ``ticks``: every judgement."""

    def __init__(self, inventory: Path, engine: str) -> None:
        self.plan = Plan.from_inventory(load_inventory(inventory))
        self.engine = engine
        self.state = ClusterState()
        self.alerts = self.plan.alert_engine()
        self.poller = Poller(self.plan.sources(), self.plan.interval_s, self.state.apply)
        self.events: list[tuple[float, Event]] = []
        self.ticks: list[Tick] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def hold_s(self) -> float:
        return self.alerts.thresholds.hold_s

    def start(self) -> None:
        self.poller.start()
        self._task = asyncio.create_task(self._judge())

    async def _judge(self) -> None:
        while True:
            now = time.time()
            self.events += [(now, e) for e in self.alerts.update(self.state, now)]
            sample = self.state.engines.get(self.engine)
            ctx = self.alerts.last_context
            d = deficit(ctx, sample) if ctx is not None and sample is not None else None
            running = (
                float(sample.running) if sample is not None and is_num(sample.running) else None
            )
            self.ticks.append(Tick(now, d, running, "" if d is not None else self._why(sample)))
            await asyncio.sleep(self.plan.interval_s)  # the monitor's tick period

    def _why(self, sample: EngineSample | None) -> str:
        if sample is None:
            return "no sample yet"
        if not sample.ok:
            return f"engine {sample.state}"
        row = self.plan.matched(sample) if self.plan.matched is not None else "no profile"
        return (
            re.sub(r"\d[\d,.]*", "N", row)
            if isinstance(row, str)
            else "a row, yet nothing compared"
        )

    def not_compared(self) -> str:
        """``"window N s: … ×5, too little load … ×2"``: each reason for the ticks that
        compared nothing, with its count, most frequent first ("" when every tick compared)."""
        counts = Counter(t.why_not for t in self.ticks if t.deficit is None)
        return ", ".join(f"{why[:60]} ×{n}" for why, n in counts.most_common())

    def fired(self, prefix: str, after_s: float = 0.0) -> list[tuple[float, Event]]:
        return [
            (t, e)
            for t, e in self.events
            if t >= after_s and e.kind.value == "fired" and e.alert.rule.startswith(prefix)
        ]

    def decode(self, since_s: float) -> list[tuple[float, float]]:
        """``(live, expected)`` per-stream decode (tok/s) of every tick since ``since_s``."""
        return [
            (t.deficit.decode_live_tps, t.deficit.decode_expected_tps)
            for t in self.ticks
            if t.time_s >= since_s
            and t.deficit is not None
            and t.deficit.decode_live_tps is not None
            and t.deficit.decode_expected_tps
        ]

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.poller.aclose()
