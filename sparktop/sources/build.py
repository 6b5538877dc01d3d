"""Build the sources an inventory describes: SSH nodes, the local machine, inference servers.

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


def build_node_sources(inventory: Inventory, **ssh_options: Any) -> list[Source]:
    """One source per node: :class:`LocalSource` for ``local: true``, else :class:`SshSource`.

    ``ssh_options`` go to every :class:`SshSource` (e.g. ``backoff_cap_s``).
    """
    sources: list[Source] = []
    for node in inventory.nodes:
        if node.local:
            # Imported here: NVML and psutil are only needed when a node is this machine.
            from sparktop.sources.local import LocalSource

            sources.append(LocalSource(node.name))
        else:
            sources.append(SshSource(node, inventory.ssh_for(node), **ssh_options))
    return sources


def build_engine_sources(inventory: Inventory, **engine_options: Any) -> list[Source]:
    """One source per engine, from :mod:`sparktop.sources.engine` (empty without engines).

    ``engine_options`` go to the hook (e.g. ``first_window_s`` for one-shot commands).
    """
    if not inventory.engines:
        return []
    module: Any = importlib.import_module("sparktop.sources.engine")
    hook = getattr(module, "build_engine_sources", None)
    if hook is not None:
        return list(hook(inventory, **engine_options))
    return [module.EngineSource(engine) for engine in inventory.engines]


def build_sources(
    inventory: Inventory, *, engine_options: Mapping[str, Any] | None = None, **ssh_options: Any
) -> list[Source]:
    """Every source the inventory describes: nodes (in order), then engines."""
    engines = build_engine_sources(inventory, **(engine_options or {}))
    return build_node_sources(inventory, **ssh_options) + engines
