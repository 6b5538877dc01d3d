"""Engine pages that are not what they seem, served on 127.0.0.1: a gzip page cut off before
its end (with a Content-Length that matches what was sent). Each degrades its own row with
a reason, as other truncations do."""

from __future__ import annotations

import gzip
import zlib

import pytest
from aiohttp import web

from sparktop.model import EngineState
from sparktop.sources.engines.source import EngineSource
from tests.test_engine_hostile import Cfg, aiohttp_server, full_page


@pytest.mark.parametrize(
    ("coding", "cut"),
    [("gzip", 8), ("gzip", 0.5), ("deflate", 4)],
    ids=["gzip-no-trailer", "gzip-half", "deflate-no-checksum"],
)
async def test_a_compressed_page_cut_off_before_its_end_is_refused(coding: str, cut: float) -> None:
    """The server's framing is whole (Content-Length says what was sent) but the gzip
    stream stops early: without its trailer (CRC and length) every line may even inflate,
    so only the missing end tells a truncated page, whose counters must not be read."""
    page = full_page(kv=0.5, waiting=2)
    packed = gzip.compress(page) if coding == "gzip" else zlib.compress(page)
    body = packed[: -int(cut)] if cut >= 1 else packed[: int(len(packed) * cut)]

    async def handler(request: web.Request) -> web.Response:
        return web.Response(
            body=body, headers={"Content-Type": "text/plain", "Content-Encoding": coding}
        )

    async with aiohttp_server({"/metrics": handler}) as url:
        source = EngineSource(Cfg("cut", url))
        sample = await source.sample()
        await source.aclose()
    assert sample.state is EngineState.UNAVAILABLE
    assert sample.message == (
        f"page cut off: its {coding} stream stops short of its end ({len(body):,} bytes received)"
    )
