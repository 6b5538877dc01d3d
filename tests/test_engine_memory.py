"""A large page refused for its CPU budget leaves no memory behind and is backed off: a
30 MiB /metrics page of 546,000 series kept the monitor's RSS climbing (444 → 501 MB), the
shared label-block and value tables holding every distinct series the refused page had."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import pytest
from aiohttp import web

from sparktop.sources.engines.source import EngineSource
from sparktop.sources.exposition import tables as prom_tables
from sparktop.sources.exposition import text as promtext
from sparktop.sources.exposition.text import ParseBounds
from tests.test_engine_hostile import Cfg, aiohttp_server

SERIES = 200_000


def big_page() -> bytes:
    """~9 MiB of distinct series an engine row does not read (each its own labels and value)."""
    lines = (f'go_thing{{h="/v{i % 50}",code="{i}",m="GET"}} {i}.5' for i in range(SERIES))
    return ("\n".join(lines) + "\n").encode()


LOOKS = 40
"""Looks at the clock before the page is refused: 40 x 256 lines, many times the caps."""


def short_budget(
    real: Callable[[ParseBounds], Callable[[], None]], traced: list[int]
) -> Callable[[ParseBounds], Callable[[], None]]:
    """The CPU guard, out of budget at its :data:`LOOKS`-th look (every ``CHECK_EVERY``
    lines), as at 2 s of CPU in the trial, whatever this machine's speed; each look records
    the traced memory."""

    def guard(bounds: ParseBounds) -> Callable[[], None]:
        spent = real(ParseBounds(max_cpu_s=0.0))

        def looked() -> None:
            traced.append(tracemalloc.get_traced_memory()[0])
            if len(traced) >= LOOKS:
                spent()

        return looked

    return guard


async def test_a_page_refused_for_cpu_keeps_no_tables_and_is_backed_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    traced: list[int] = []
    monkeypatch.setattr(promtext, "cpu_guard", short_budget(promtext.cpu_guard, traced))
    # Small caps and frequent looks, so the short budget reads many times past the caps.
    monkeypatch.setattr(promtext, "CHECK_EVERY", 256)
    monkeypatch.setattr(promtext, "MAX_BLOCKS", 512)
    monkeypatch.setattr(promtext, "MAX_VALUES", 512)
    monkeypatch.setattr(prom_tables, "MAX_BLOCKS", 512)
    monkeypatch.setattr(prom_tables, "MAX_VALUES", 512)
    body = big_page()
    hits = [0]

    async def handler(request: web.Request) -> web.Response:
        hits[0] += 1
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4"})

    now = [0.0]
    async with aiohttp_server({"/metrics": handler}) as url:
        source = EngineSource(Cfg("big", url), clock=lambda: now[0])
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            first = await source.sample()
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        messages = [first.message]
        for tick in range(1, 12):  # one poll a second
            now[0] = float(tick)
            messages.append((await source.sample()).message)
        await source.aclose()
    assert first.message.startswith("parsing took over 0 s of CPU; page refused"), first
    assert len(traced) >= LOOKS
    # Read well past the tables' caps before the budget ran out ...
    assert promtext.CHECK_EVERY < SERIES
    # ... and none of it kept: the tables are back within their caps.
    assert len(prom_tables._PASSED.get(ParseBounds().max_labels, ())) <= prom_tables.MAX_BLOCKS
    assert len(prom_tables._VALUES[0]) <= prom_tables.MAX_VALUES
    assert kept < 2 << 20, f"{kept / 2**20:.1f} MiB kept after a refused page"
    # While it was read, memory stayed within the tables' caps: no entry kept per line (it
    # grew by ~600 bytes a line, 6 MiB over these 10,240 lines).
    growth = max(traced[:LOOKS]) - traced[0]
    assert growth < 1 << 20, f"{growth / 2**20:.1f} MiB while reading"
    assert hits[0] == 3  # at 0, then after 2 and 4 s (0, 2, 6), not 12 times
    assert messages[-1].endswith("backing off up to 8 s")
