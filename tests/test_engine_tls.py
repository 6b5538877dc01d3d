"""The wrong scheme for an engine, on 127.0.0.1: ``https://`` to a plain-HTTP server and
``http://`` to a TLS one each read as what happened, within a second or two, never as
``connect timed out`` (:mod:`sparktop.sources.engines.tls`)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sparktop.model import EngineSample, EngineState
from sparktop.sources.engines.source import EngineSource
from sparktop.sources.engines.tls import PLAIN
from sparktop.sources.engines.wire import EngineClient
from sparktop.testing.vllm_page import FakeVllm
from tests.test_engine_hostile import Cfg
from tests.test_engine_source import _self_signed

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
PAGE = FakeVllm().page()
OK = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(PAGE) + PAGE
TIMEOUT_S = 30.0
"""Each network step's bound: the wrong scheme must be told long before it."""


@contextlib.asynccontextmanager
async def serving(handle: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, EOFError, asyncio.IncompleteReadError):
            await handle(reader, writer)
        writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def scrape(url: str, timeout_s: float = TIMEOUT_S) -> EngineSample:
    # The whole exchange's deadline (2 x timeout_s by default) far off: a 1 s step's
    # handshake and plain-HTTP check take ~1 s, and a loaded machine must not make the
    # deadline's reason the one read.
    source = EngineSource(Cfg("e", url), timeout_s=timeout_s, deadline_s=2 * TIMEOUT_S)
    try:
        return await source.sample()
    finally:
        await source.aclose()


async def waits_for_a_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A plain-HTTP server that reads until a blank line (a ClientHello has none)."""
    while await reader.readuntil(b"\r\n\r\n"):
        writer.write(OK)
        await writer.drain()


async def answers_400_to_garbage(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """As vLLM's uvicorn (httptools) does: a bad first byte is a 400 at once."""
    first = await reader.read(1)
    if first != b"H":  # HEAD or GET
        writer.write(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        return
    await waits_for_a_request(reader, writer)


async def hangs_up_on_garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    if await reader.read(1) == b"H":
        await waits_for_a_request(reader, writer)


@pytest.mark.parametrize(
    "handle",
    [waits_for_a_request, answers_400_to_garbage, hangs_up_on_garbage],
    ids=["silent", "answers-400", "hangs-up"],
)
async def test_https_to_a_plain_http_server_says_so_before_the_timeout(handle: Handler) -> None:
    async with serving(handle) as port:
        sample = await scrape(f"https://127.0.0.1:{port}")
    assert sample.state is EngineState.UNAVAILABLE
    assert sample.message == PLAIN
    assert sample.latency_s < TIMEOUT_S / 2  # told after a round trip or two, not the bound


async def test_https_to_a_port_that_never_answers_names_the_handshake() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads everything, says nothing, until the client goes

    async with serving(silent) as port:
        sample = await scrape(f"https://127.0.0.1:{port}", timeout_s=1.0)
    assert sample.state is EngineState.UNREACHABLE
    assert sample.message == (
        "TLS handshake: no answer within 1 s (the port took the connection; not a TLS server?)"
    )


@pytest.fixture
def tls_server_context(tmp_path: Path) -> tuple[ssl.SSLContext, Path]:
    cert, key = _self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    return served, cert


async def never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read()  # a server too busy to answer any request in time


@pytest.mark.parametrize("handle", [waits_for_a_request, never_answers], ids=["answers", "busy"])
async def test_http_to_a_tls_server_says_it_speaks_tls(
    tls_server_context: tuple[ssl.SSLContext, Path], handle: Handler
) -> None:
    """A Python (uvicorn) TLS server hangs up on a plain request without a word; the
    handshake alone tells it speaks TLS (a busy one answers no request in time)."""
    served, _ = tls_server_context
    async with serving(handle, served) as port:
        sample = await scrape(f"http://127.0.0.1:{port}")
    assert sample.state is EngineState.UNAVAILABLE
    assert sample.message == "not an HTTP server: it speaks TLS (use https:// for this engine)"


async def test_http_to_a_server_answering_with_a_tls_alert_says_so() -> None:
    async def alert(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"\x15\x03\x03\x00\x02\x02\x46")  # TLS 1.2 record: fatal alert
        await writer.drain()

    async with serving(alert) as port:
        sample = await scrape(f"http://127.0.0.1:{port}")
    assert sample.state is EngineState.UNAVAILABLE
    assert sample.message == "not an HTTP answer (a TLS record; this port speaks https)"


async def test_https_to_a_trusted_tls_server_reads_the_page(
    tls_server_context: tuple[ssl.SSLContext, Path],
) -> None:
    """The handshake is made on the open connection (TCP, then TLS): the page is read."""
    served, cert = tls_server_context
    async with serving(waits_for_a_request, served) as port:
        client = EngineClient(f"https://127.0.0.1:{port}", timeout_s=TIMEOUT_S)
        client._tls = ssl.create_default_context(cafile=str(cert))  # trust this one
        try:
            for _ in range(2):  # the second on the same kept-alive connection
                async with client.stream(client.url("/metrics")) as response:
                    body = b"".join([c async for c in response.aiter_raw()])
                assert response.status_code == 200 and body == PAGE
            assert len(client._idle) == 1
        finally:
            await client.aclose()


NGINX_400 = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 46\r\nConnection: close\r\n\r\n"
    b"The plain HTTP request was sent to HTTPS port\n"
)
"""What nginx answers a plain request on its TLS port (Caddy and Go's servers: a 400 too)."""


async def test_a_slow_handshake_behind_a_proxy_answering_plain_requests_is_waited_for(
    tls_server_context: tuple[ssl.SSLContext, Path],
) -> None:
    """A TLS port in front of the engine (nginx) answers a plain request with a 400: a
    handshake slower than the 0.5 s the ClientHello is given alone (a far link, a loaded
    host) must not read as ``use http://``. The proxy holds the ClientHello until the plain
    probe came, so the handshake is slow on any machine."""
    served, cert = tls_server_context
    probed = asyncio.Event()

    async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        sink.close()

    async with serving(waits_for_a_request, served) as tls_port:

        async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            first = await reader.read(1)
            if first != b"\x16":  # not a TLS handshake record
                writer.write(NGINX_400)
                await writer.drain()
                probed.set()
                return
            await probed.wait()
            upstream_reader, upstream = await asyncio.open_connection("127.0.0.1", tls_port)
            upstream.write(first)
            await asyncio.gather(pump(reader, upstream), pump(upstream_reader, writer))

        async with serving(proxy) as port:
            client = EngineClient(f"https://127.0.0.1:{port}", timeout_s=TIMEOUT_S)
            client._tls = ssl.create_default_context(cafile=str(cert))  # trust this one
            try:
                async with client.stream(client.url("/metrics")) as response:
                    body = b"".join([c async for c in response.aiter_raw()])
            finally:
                await client.aclose()
    assert probed.is_set()  # the port was asked in plain HTTP, and its 400 not taken as plain
    assert response.status_code == 200 and body == PAGE
