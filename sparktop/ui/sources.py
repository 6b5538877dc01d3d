"""The sources the monitor polls when the caller does not inject its own."""

from __future__ import annotations

import asyncio
import socket

from sparktop.inventory import EngineConfig, Inventory
from sparktop.model import EngineState, Source

LOCAL_ENGINE_URL = "http://127.0.0.1:8000"
LOCAL_PROBE_TIMEOUT_S = 1.0


def local_engine_answers(url: str = LOCAL_ENGINE_URL) -> bool:
    """True when something answers HTTP at ``url`` (one scrape, 1 s timeout)."""
    from sparktop.sources.engine import scrape_once

    sample = asyncio.run(scrape_once(url, timeout_s=LOCAL_PROBE_TIMEOUT_S))
    return sample.state is not EngineState.UNREACHABLE


def default_sources(inventory: Inventory | None, local_url: str = LOCAL_ENGINE_URL) -> list[Source]:
    """The inventory's sources; without one, this machine (NVML + psutil) and the vLLM
    server at ``local_url`` (``http://127.0.0.1:8000``) when one answers."""
    if inventory is not None:
        from sparktop.sources.build import build_sources

        return build_sources(inventory)
    from sparktop.sources.local import LocalSource

    sources: list[Source] = [LocalSource(socket.gethostname() or "localhost")]
    if local_engine_answers(local_url):
        from sparktop.sources.engine import EngineSource

        sources.append(EngineSource(EngineConfig(name="local", url=local_url)))
    return sources
