"""A scrape runs no import machinery: nothing it calls looks a module up on the path.

httpcore imports ``sniffio`` on every request to tell asyncio from trio; when it is not
installed each request pays a failed import's search of ``sys.path`` (four a scrape), which
the scrape benchmark's per-sample cost counted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

from sparktop.sources.engines.source import EngineSource
from sparktop.testing.http_stub import StubServer, text
from sparktop.testing.vllm_page import FakeVllm


class _Spy:
    """A meta-path finder that only records what is looked up."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.names.append(name)
        return None


class _Config:
    name = "e"
    kind = "vllm"
    api_key_env: str | None = None

    def __init__(self, url: str) -> None:
        self.url = url


async def test_a_scrape_looks_no_module_up() -> None:
    routes = {"/metrics": text(FakeVllm(engines=2).page())}
    async with StubServer(routes) as server:
        source = EngineSource(_Config(server.url))
        try:
            await source.sample()  # the first scrape may import what it needs once
            spy = _Spy()
            sys.meta_path.insert(0, spy)
            try:
                sample = await source.sample()
            finally:
                sys.meta_path.remove(spy)
        finally:
            await source.aclose()
    assert sample.answered, sample.message
    assert spy.names == []
