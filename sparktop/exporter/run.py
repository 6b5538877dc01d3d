"""``sparktop exporter``'s loop: poll the inventory, keep the cluster state and the alert
engine (with hold times, as the monitor does), serve the judgements until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from sparktop.cluster import ClusterState
from sparktop.exporter.judgements import Judgements, SourceStats
from sparktop.exporter.server import MetricsEndpoint
from sparktop.model import Sample, Source
from sparktop.plan import Plan
from sparktop.poller import Poller


class Exporter:
    """Polls the plan's sources (or ``sources``) every ``plan.interval_s`` into a state that
    ``endpoint`` serves, judged by the plan's alert engine (the monitor's, hold times too)."""

    def __init__(
        self, plan: Plan, endpoint: MetricsEndpoint, *, sources: Sequence[Source] | None = None
    ) -> None:
        self.interval_s = plan.interval_s
        self.state = ClusterState()
        self.stats = SourceStats()
        self.alerts = plan.alert_engine()
        self.endpoint = endpoint
        endpoint.register(Judgements(self.state, lambda: self.alerts, self.stats))
        self.poller = Poller(
            sources if sources is not None else plan.sources(),
            self.interval_s,
            self._record,
        )

    def _record(self, sample: Sample) -> None:
        self.state.apply(sample)
        self.stats.observe(sample)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; then stop polling, close sources and the socket."""
        await self.endpoint.start()
        self.poller.start()
        try:
            while not stop.is_set():
                self.alerts.update(self.state, time.time())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.interval_s)
        finally:
            await self.poller.aclose()
            await self.endpoint.close()
