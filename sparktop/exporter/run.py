"""``sparktop exporter``'s loop: poll the inventory, keep the cluster state and the alert
engine (with hold times, as the monitor does), serve the judgements until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from sparktop.alerts.engine import AlertEngine
from sparktop.cluster import ClusterState
from sparktop.errors import UserError
from sparktop.exporter.judgements import Judgements, SourceStats
from sparktop.exporter.server import MetricsEndpoint
from sparktop.inventory import Inventory
from sparktop.model import Sample, Source
from sparktop.poller import Poller
from sparktop.sources.build import build_sources


def alert_engine_for(inventory: Inventory) -> AlertEngine:
    """The alert engine the inventory describes: thresholds, profile, TP groups, limits."""
    from sparktop.sweep.profile import load_profile

    profile = None
    if inventory.profile:
        try:
            profile = load_profile(inventory.profile)
        except UserError:
            profile = None  # no expected row; the rest still works
    return AlertEngine(
        inventory.alerts,
        profile,
        {e.name: tuple(e.nodes) for e in inventory.engines},
        max_num_seqs={e.name: float(e.max_num_seqs) for e in inventory.engines if e.max_num_seqs},
    )


class Exporter:
    """Polls ``sources`` every ``interval_s`` into a state that ``endpoint`` serves."""

    def __init__(
        self,
        inventory: Inventory,
        endpoint: MetricsEndpoint,
        *,
        interval_s: float | None = None,
        sources: Sequence[Source] | None = None,
    ) -> None:
        self.interval_s = interval_s or inventory.interval_s
        self.state = ClusterState()
        self.stats = SourceStats()
        self.alerts = alert_engine_for(inventory)
        self.endpoint = endpoint
        endpoint.register(Judgements(self.state, lambda: self.alerts, self.stats))
        self.poller = Poller(
            sources if sources is not None else build_sources(inventory),
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
