"""Engine pages that are not what they seem, served on 127.0.0.1: a gzip page cut off before
its end (with a Content-Length that matches what was sent), a label value of megabytes, big
pages from many engines at once. Each degrades its own row with a reason."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import re
import tracemalloc
import zlib

import pytest
from aiohttp import web

from sparktop import heap
from sparktop.model import EngineState
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.engines.source import EngineSource
from sparktop.sources.exposition.page import parse_page
from sparktop.sources.exposition.text import LABEL_PAIR
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
    at_bound = parse_page(with_model_name(65_536, library=library), WANTED)
    assert not at_bound.error
    assert at_bound.parser == ("prometheus_client" if library else "fast")
    over = parse_page(with_model_name(65_537, library=library), WANTED)
    assert over.error == ("line 3: label model_name has a value of 65,537 characters; limit 65,536")
    assert over.refused


def test_a_lora_list_past_4096_characters_reads() -> None:
    """vLLM lists every LoRA adapter with waiting requests in one label value of
    ``vllm:lora_requests_info``: 300 adapters are ~6,000 characters, and the page was
    refused (the engine's row unavailable) at a 4,096-character bound."""
    adapters = ",".join(f"tenant-{i:03d}-sft-2026" for i in range(300))
    line = (
        f'vllm:lora_requests_info{{max_lora="8",running_lora_adapters="tenant-000-sft-2026",'
        f'waiting_lora_adapters="{adapters}"}} 1.7e9\n'
    )
    assert len(adapters) > 4096
    page = parse_page(full_page().decode() + line, WANTED)
    assert not page.error and page.sample_count > 0


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


@pytest.mark.parametrize("wanted", [WANTED, None], ids=["vllm-names", "every-name"])
def test_a_line_with_a_megabyte_run_of_name_characters_is_read_in_one_pass(
    wanted: frozenset[str] | None,
) -> None:
    """Label pairs are searched from a name's first character only: searched from inside a
    long run of name characters (``aaaa…a=b"``), each start read the run again to its end (a
    40,000-character run: 6 CPU s; a megabyte: hours, past the parse's CPU bound, which is
    checked between lines). The page is refused at once."""
    line = 'vllm:num_requests_running{a="1"} ' + "a" * (1 << 20) + '=b"\n'
    refused = parse_page(full_page().decode() + line, wanted)
    assert refused.error is not None
    assert refused.error.startswith("page is not valid Prometheus text")
    pairs = LABEL_PAIR.findall('{ab="1",cd="x=\\"y"} zz="2"')
    assert [name for name, _ in pairs] == ["ab", "cd", "zz"]


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
        "line 3: label model_name has a value of 20,971,520 characters; limit 65,536"
    )


# -- big pages from many engines at once --------------------------------------------------------

MIB = 1 << 20


def test_big_pages_in_flight_are_bounded_but_one_alone_may_grow() -> None:
    budget = heap.InFlight(limit=4 * MIB)
    first, second = heap.Ticket(), heap.Ticket()
    assert budget.grow(first, 5 * MIB)  # alone: past the limit, up to its own page cap
    assert not budget.grow(second, 2 * MIB) and second.held == 0
    budget.release(first)
    assert budget.grow(second, 2 * MIB) and budget.grow(first, 2 * MIB)
    assert not budget.grow(first, 3 * MIB) and first.held == 2 * MIB  # nothing taken
    budget.release(first)
    budget.release(second)
    assert budget.held == 0


class Watched(heap.InFlight):
    """The budget, saying when what it holds reaches ``mark`` bytes."""

    def __init__(self, limit: int, mark: int) -> None:
        super().__init__(limit)
        self.mark = mark
        self.reached = asyncio.Event()

    def grow(self, ticket: heap.Ticket, size: int) -> bool:
        taken = super().grow(ticket, size)
        if self.held >= self.mark:
            self.reached.set()
        return taken


def big_page(size: int) -> bytes:
    """A valid page of ``size`` bytes or a little more (comment lines after the metrics)."""
    page = full_page(kv=0.5, waiting=2)
    line = b"# padding " + b"x" * 89 + b"\n"
    return page + line * ((size - len(page)) // len(line) + 1)


async def test_a_big_page_past_the_process_budget_degrades_only_its_own_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One engine's big page is half sent and held (3.5 MiB of it read); another engine's
    4 MiB page would put the process past the 4 MiB budget, so that scrape gives its page
    up with the reason; the first page, once sent, reads whole; then the second fits."""
    budget = Watched(limit=4 * MIB, mark=int(3.5 * MIB))
    monkeypatch.setattr(heap, "IN_FLIGHT", budget)
    page = big_page(4 * MIB)
    split = int(3.5 * MIB)
    go = asyncio.Event()

    async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while head := await reader.readuntil(b"\r\n\r\n"):
                if not head.startswith(b"GET /metrics "):
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(page))
                writer.write(page[:split])
                await writer.drain()
                await go.wait()
                writer.write(page[split:])
        writer.close()

    async def whole(request: web.Request) -> web.Response:
        return web.Response(body=page, headers={"Content-Type": "text/plain"})

    server = await asyncio.start_server(held, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    first = EngineSource(Cfg("big", f"http://127.0.0.1:{port}"), timeout_s=30)
    try:
        async with aiohttp_server({"/metrics": whole}) as url:
            second = EngineSource(Cfg("other", url), timeout_s=30)
            scraping = asyncio.ensure_future(first.sample())
            await budget.reached.wait()
            refused = await second.sample()
            go.set()
            read = await scraping
            assert budget.held == 0
            again = await second.sample()
            await second.aclose()
    finally:
        await first.aclose()
        server.close()
        await server.wait_closed()
    assert refused.state is EngineState.UNAVAILABLE
    assert refused.message == (
        "page not read: past 1 MiB while other engines' big pages hold 3 MiB "
        "(at most 4 MiB in flight)"
    )
    assert read.ok and read.waiting == 2, read.message
    assert again.ok, again.message
