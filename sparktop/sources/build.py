"""Build the sources an inventory describes: SSH nodes, the local machine, inference servers,
and nodes and engines read from Prometheus (``source: prometheus``, one shared query hub).

Nodes come out in inventory order, then engines. Engine sources come from
:mod:`sparktop.sources.engine`: its ``build_engine_sources(inventory)`` when it provides one
(the hook for profile limits and per-engine options), else one ``EngineSource(config)`` per
engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sparktop.model import Source
from sparktop.sources.ssh import SshSource

if TYPE_CHECKING:
    from sparktop.inventory import Inventory


def build_node_sources(
    inventory: Inventory, prometheus: Mapping[str, Source] | None = None, **ssh_options: Any
) -> list[Source]:
    """One source per node: :class:`LocalSource` for ``local: true``, the given Prometheus
    source for ``source: prometheus`` (built here when not given), else :class:`SshSource`.

    ``ssh_options`` go to every :class:`SshSource` (e.g. ``backoff_cap_s``).
    """
    if prometheus is None:
        prometheus = _prometheus(inventory)[0]
    sources: list[Source] = []
    for node in inventory.nodes:
        if node.source == "prometheus":
            sources.append(prometheus[node.name])
        elif node.local:
            # Imported here: NVML and psutil are only needed when a node is this machine.
            from sparktop.sources.local import LocalSource

            sources.append(LocalSource(node.name))
        else:
            sources.append(SshSource(node, inventory.ssh_for(node), **ssh_options))
    return sources


def build_engine_sources(
    inventory: Inventory, prometheus: Mapping[str, Source] | None = None, **engine_options: Any
) -> list[Source]:
    """One source per engine, in inventory order: the given Prometheus source for
    ``source: prometheus`` (built here when not given), else from
    :mod:`sparktop.sources.engine` (empty without engines).

    ``engine_options`` go to the hook (e.g. ``first_window_s`` for one-shot commands).
    """
    if not inventory.engines:
        return []
    if prometheus is None:
        prometheus = _prometheus(inventory)[1]
    http = [e for e in inventory.engines if e.source != "prometheus"]
    module: Any = importlib.import_module("sparktop.sources.engine")
    hook = getattr(module, "build_engine_sources", None)
    if not http:
        built: dict[str, Source] = {}
    elif hook is not None:
        only_http = inventory.model_copy(update={"engines": tuple(http)})
        built = {s.name: s for s in hook(only_http, **engine_options)}
    else:
        built = {e.name: module.EngineSource(e) for e in http}
    return [
        prometheus[e.name] if e.source == "prometheus" else built[e.name] for e in inventory.engines
    ]


def _prometheus(inventory: Inventory) -> tuple[dict[str, Source], dict[str, Source]]:
    if inventory.prometheus is None:
        return {}, {}
    from sparktop.sources.engine import profile_limits
    from sparktop.sources.prombuild import prometheus_sources

    return prometheus_sources(inventory, profile_limits(inventory.profile))


def build_sources(
    inventory: Inventory, *, engine_options: Mapping[str, Any] | None = None, **ssh_options: Any
) -> list[Source]:
    """Every source the inventory describes: nodes (in order), then engines. Prometheus
    nodes and engines share one query hub."""
    nodes, engines = _prometheus(inventory)
    engine_sources = build_engine_sources(inventory, engines, **(engine_options or {}))
    return build_node_sources(inventory, nodes, **ssh_options) + engine_sources
