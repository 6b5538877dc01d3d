"""The Prometheus sources of an inventory: one shared :class:`PromHub`, one source per node
and engine with ``source: prometheus``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sparktop.model import Source
from sparktop.sources.prometheus.api import PromClient
from sparktop.sources.prometheus.engine import PromEngineSource
from sparktop.sources.prometheus.hub import PromHub, bearer_token
from sparktop.sources.prometheus.node import PromNodeBatch, PromNodeSource
from sparktop.sources.prometheus.promql import Target

if TYPE_CHECKING:
    from sparktop.inventory import Inventory

ENGINE_WINDOW_S = 30.0
"""Span of engine rates and quantiles: the HTTP source's window (``MetricsDeriver``)."""


def prometheus_sources(
    inventory: Inventory, profile_limits: Mapping[str, Mapping[str, int]] | None = None
) -> tuple[dict[str, Source], dict[str, Source]]:
    """Node and engine sources (``{name: source}`` each) for the inventory's Prometheus nodes
    and engines (empty without), all sharing one hub; ``profile_limits``: engine → the limits
    its profile declares."""
    nodes = [n for n in inventory.nodes if n.source == "prometheus"]
    engines = [e for e in inventory.engines if e.source == "prometheus"]
    settings = inventory.prometheus
    if settings is None or not (nodes or engines):
        return {}, {}
    client = PromClient(
        settings.url, token=bearer_token(settings.bearer_token_env), timeout_s=settings.timeout_s
    )
    hub = PromHub(
        client,
        [Target.of(n) for n in nodes],
        [Target.of(e) for e in engines],
        interval_s=inventory.interval_s,
        window_s=ENGINE_WINDOW_S,
    )
    batch = PromNodeBatch(hub)  # one read of the nodes' answer a tick, however many nodes
    node_sources: dict[str, Source] = {
        n.name: PromNodeSource(hub, Target.of(n), batch) for n in nodes
    }
    engine_sources: dict[str, Source] = {
        e.name: PromEngineSource(hub, Target.of(e), e, (profile_limits or {}).get(e.name))
        for e in engines
    }
    return node_sources, engine_sources
