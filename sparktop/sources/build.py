"""Build node sources (SSH nodes, this machine, Prometheus) and the Prometheus engines' sources;
:meth:`sparktop.plan.Plan.sources` is the one caller that builds a whole run's sources, and
adds the HTTP engines.

Nodes and engines with ``source: prometheus`` share one query hub.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sparktop.model import EngineState, Source

if TYPE_CHECKING:
    from sparktop.inventory import Inventory

LOCAL_ENGINE_URL = "http://127.0.0.1:8000"
LOCAL_PROBE_TIMEOUT_S = 1.0


def local_source(name: str) -> Source:
    """This machine: NVML + psutil (imported here: only needed when a node is this machine)."""
    from sparktop.sources.local import LocalSource

    return LocalSource(name)


def build_node_sources(
    inventory: Inventory, prometheus: Mapping[str, Source] | None = None, **ssh_options: Any
) -> list[Source]:
    """One source per node, in inventory order: this machine for ``local: true``, the given
    Prometheus source for ``source: prometheus`` (built here when not given), else SSH.

    ``ssh_options`` go to every :class:`SshSource` (e.g. ``backoff_cap_s``).
    """
    if prometheus is None:
        prometheus = prometheus_sources(inventory)[0]
    sources: list[Source] = []
    for node in inventory.nodes:
        if node.source == "prometheus":
            sources.append(prometheus[node.name])
        elif node.local:
            sources.append(local_source(node.name))
        else:
            # asyncssh and cryptography (~17 MB, ~190 modules) load only for SSH nodes
            from sparktop.sources.ssh.source import SshSource

            sources.append(SshSource(node, inventory.ssh_for(node), **ssh_options))
    return sources


def prometheus_sources(
    inventory: Inventory, profile_limits: Mapping[str, Mapping[str, int]] | None = None
) -> tuple[dict[str, Source], dict[str, Source]]:
    """The Prometheus node and engine sources (``{name: source}`` each; empty without a
    ``prometheus:`` server), sharing one hub; ``profile_limits``: engine → its profile's
    limits."""
    if inventory.prometheus is None:
        return {}, {}
    from sparktop.sources.prometheus.build import prometheus_sources as build

    return build(inventory, profile_limits)


def local_engine_answers(url: str = LOCAL_ENGINE_URL) -> bool:
    """True when something answers HTTP at ``url`` (one scrape, 1 s timeout): without an
    inventory the monitor watches the server there only when there is one."""
    from sparktop.sources.engines.source import scrape_once

    sample = asyncio.run(scrape_once(url, timeout_s=LOCAL_PROBE_TIMEOUT_S))
    return sample.state is not EngineState.UNREACHABLE
