"""Engine pages that are not what they seem, served on 127.0.0.1: a gzip page cut off before
its end (with a Content-Length that matches what was sent), a label value of megabytes, big
pages from many engines at once. Each degrades its own row with a reason."""

from __future__ import annotations

import gzip
import re
import tracemalloc
import zlib

import pytest
from aiohttp import web

from sparktop.model import EngineState
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.engines.source import EngineSource
from sparktop.sources.exposition.page import parse_page
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


# -- a label value of megabytes ------------------------------------------------------------------


def with_model_name(chars: int, *, library: bool = False) -> str:
    """A vLLM page whose first ``model_name`` value is ``chars`` long; ``library``: with a
    line the fast reader does not take (a timestamp), so prometheus_client reads the page."""
    value = b'model_name="' + b"m" * chars + b'"'
    page = re.sub(rb'model_name="[^"]*"', value, full_page(), count=1)
    return (page + (b"vllm:extra 1 1700000000000\n" if library else b"")).decode()


@pytest.mark.parametrize("library", [False, True], ids=["fast-reader", "library"])
def test_a_label_value_over_the_bound_is_refused_before_it_is_read(library: bool) -> None:
    """As Prometheus's ``label_value_length_limit`` fails a scrape: the page is refused, with
    the line, the label and its length; a value at the bound reads."""
    at_bound = parse_page(with_model_name(4096, library=library), WANTED)
    assert not at_bound.error
    assert at_bound.parser == ("prometheus_client" if library else "fast")
    over = parse_page(with_model_name(4097, library=library), WANTED)
    assert over.error == "line 3: label model_name has a value of 4,097 characters; limit 4,096"
    assert over.refused


def test_a_20_mb_label_value_is_refused_without_a_copy_of_it() -> None:
    """It was matched, copied and unescaped whole (~130 MB more RSS for the scrape, the
    model name then clipped to 256 characters)."""
    page = with_model_name(20 << 20)
    tracemalloc.start()
    try:
        refused = parse_page(page, WANTED)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert refused.error is not None and "has a value of 20,971,520 characters" in refused.error
    assert peak < 1 << 20, f"{peak:,} bytes allocated to refuse it"


async def test_a_scrape_with_a_20_mb_model_name_degrades_its_row() -> None:
    page = with_model_name(20 << 20).encode()

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=page, headers={"Content-Type": "text/plain"})

    async with aiohttp_server({"/metrics": handler}) as url:
        source = EngineSource(Cfg("long", url))
        sample = await source.sample()
        await source.aclose()
    assert sample.state is EngineState.UNAVAILABLE
    assert sample.message == (
        "line 3: label model_name has a value of 20,971,520 characters; limit 4,096"
    )
