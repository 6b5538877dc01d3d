"""A headless monitor on the simulator, for the alert end-to-end tests.

Polls sparktop's own sources (SSH nodes, the HTTP engine) once per simulated second, feeds
the cluster state and the alert engine (or a whole :class:`AlertPipeline`), and keeps every
event with the poll it came in. Alert time is counted in polls (1 s each), so "within
``hold_s`` + 2 polls" is exact whatever the machine's speed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from sparktop.alerts import AlertEngine, Event, EventKind
from sparktop.alerts.pipeline import AlertPipeline
from sparktop.cluster import ClusterState
from sparktop.inventory import load_inventory
from sparktop.model import EngineSample, GpuSample, Sample, Source
from sparktop.plan import Plan
from sparktop.sim.runner import SimHandle

HOLD_S = 3.0
"""Hold in the end-to-end tests (s = polls): short, so a fault that lasts 16 s fires."""


@dataclass
class Harness:
    sim: SimHandle
    sources: list[Source]
    alerts: AlertEngine
    t0: float
    pipeline: AlertPipeline | None = None
    state: ClusterState = field(default_factory=ClusterState)
    polls: int = 0
    events: list[tuple[int, Event]] = field(default_factory=list)

    @classmethod
    def start(cls, sim: SimHandle, hold_s: float = HOLD_S, window_s: float = 10.0) -> Harness:
        plan = Plan.from_inventory(load_inventory(sim.inventory_path))
        # The host files on every poll (not every SLOW_TIER_S): "hold_s + 2 polls" stays
        # exact for the host rules too.
        nodes = plan.node_sources(backoff_base_s=0.05, backoff_cap_s=0.2, host_every_s=0.0)
        # Rates in simulated seconds, so live decode compares with the profile's.
        engines = plan.engine_sources(window_s=window_s, clock=sim.clock.now)
        alerts = plan.alert_engine(hold_s=hold_s)
        return cls(sim, [*nodes, *engines], alerts, t0=sim.clock.now())

    async def poll(self) -> list[Event]:
        """Poll every source, update the alerts at ``now`` = poll number, wait for the next
        simulated second."""
        due = self.t0 + self.polls + 1.0
        samples: list[Sample] = await asyncio.gather(*(s.sample() for s in self.sources))
        for sample in samples:
            self.state.apply(sample)
        self.polls += 1
        updater = self.pipeline if self.pipeline is not None else self.alerts
        events = updater.update(self.state, float(self.polls))
        self.events += [(self.polls, e) for e in events]
        # One poll per simulated second, so the simulated load evolves at its own pace.
        while self.sim.clock.now() < due:
            await asyncio.sleep(0.01)
        return events

    async def run(self, polls: int) -> None:
        for _ in range(polls):
            await self.poll()

    async def until(self, ok: Callable[[Harness], bool], limit: int, what: str) -> int:
        """Poll until ``ok``; the poll number; fail (with the events so far) after ``limit``."""
        for _ in range(limit):
            await self.poll()
            if ok(self):
                return self.polls
        raise AssertionError(
            f"{what}: not within {limit} polls; events: {self.describe()}; "
            f"engines now: {self.describe_engines()}"
        )

    def gpu(self, node: str) -> GpuSample | None:
        sample = self.state.nodes.get(node)
        return sample.gpus[0] if sample is not None and sample.ok and sample.gpus else None

    def engine(self, name: str) -> EngineSample | None:
        return self.state.engines.get(name)

    def first(self, rule: str, kind: EventKind, after: int = 0) -> tuple[int, Event] | None:
        for poll, event in self.events:
            if poll > after and event.alert.rule == rule and event.kind is kind:
                return poll, event
        return None

    def active_rules(self) -> set[str]:
        return {a.rule for a in self.alerts.active()}

    def describe(self) -> list[str]:
        return [f"{p}:{e.kind.value}:{e.alert.rule}:{e.subject}" for p, e in self.events]

    def describe_engines(self) -> list[str]:
        """Each engine's newest sample in one line (state, load, stillness clocks), for
        failure messages."""
        return [
            f"{name}: {s.state.value} at sim {self.sim.clock.now():.0f} s, running {s.running}, "
            f"waiting {s.waiting}, no token {s.no_tokens_s} s, KV still {s.kv_still_s} s"
            for name, s in self.state.engines.items()
        ]

    async def aclose(self) -> None:
        await asyncio.gather(*(s.aclose() for s in self.sources), return_exceptions=True)
