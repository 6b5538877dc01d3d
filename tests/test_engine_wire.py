"""The engine client's connections: one kept alive across requests, none reused that the
server said it would close (:mod:`sparktop.sources.engines.wire`)."""

from __future__ import annotations

import asyncio
import base64
import contextlib

import pytest

from sparktop.sources.engines.wire import EngineClient, InvalidURL


async def _serve(close: bool) -> tuple[asyncio.Server, list[int]]:
    """A loopback server answering every request on a connection with ``ok``; the list
    counts requests per connection."""
    per_connection: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        per_connection.append(0)
        mine = len(per_connection) - 1
        while await reader.readuntil(b"\r\n\r\n"):
            per_connection[mine] += 1
            extra = b"Connection: close\r\n" if close else b""
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" + extra + b"\r\nok")
            await writer.drain()
            if close:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, per_connection


async def _get_three(url: str) -> list[bytes]:
    client = EngineClient(url, timeout_s=5.0)
    bodies = []
    try:
        for _ in range(3):
            async with client.stream(client.url("/metrics")) as response:
                bodies.append(b"".join([c async for c in response.aiter_raw()]))
    finally:
        await client.aclose()
    return bodies


@pytest.mark.parametrize(("close", "connections"), [(False, [3]), (True, [1, 1, 1])])
async def test_a_connection_is_kept_alive_unless_the_server_closes_it(
    close: bool, connections: list[int]
) -> None:
    server, per_connection = await _serve(close)
    port = server.sockets[0].getsockname()[1]
    try:
        bodies = await _get_three(f"http://127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()
    assert bodies == [b"ok"] * 3
    assert per_connection == connections


def test_a_url_without_a_host_or_of_another_scheme_is_refused() -> None:
    for url in ("ftp://10.0.0.1/", "http:///metrics", "http://10.0.0.1:99999"):
        with pytest.raises(InvalidURL):
            EngineClient(url, timeout_s=1.0)


async def _serve_then(
    after: bytes, go: asyncio.Event | None = None
) -> tuple[asyncio.Server, asyncio.Event, list[bytes]]:
    """A server that answers ``running 3`` and then, once ``go`` is set, writes ``after`` on
    the same connection, unasked (the event returned is set when written); the list keeps
    each request's head."""
    written = asyncio.Event()
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                heads.append(head)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nrunning 3")
                await writer.drain()
                if after and not written.is_set():
                    if go is not None:
                        await go.wait()
                    writer.write(after)
                    await writer.drain()
                    written.set()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, written, heads


async def _body(client: EngineClient) -> bytes:
    async with client.stream(client.url("/metrics")) as response:
        return b"".join([c async for c in response.aiter_raw()])


INJECTED = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nrunning 999"
TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


@pytest.mark.parametrize("after", [INJECTED, TIMEOUT_408], ids=["injected", "408"])
async def test_bytes_a_server_sends_unasked_on_an_idle_connection_are_never_an_answer(
    after: bytes,
) -> None:
    """An idle kept-alive connection the server wrote to (another response; a ``408`` as
    servers send before closing an idle one) is not reused: the next scrape's answer was
    those bytes (``running 999`` shown as the engine's, or every other scrape a 408)."""
    go = asyncio.Event()
    server, written, _ = await _serve_then(after, go)
    port = server.sockets[0].getsockname()[1]
    client = EngineClient(f"http://127.0.0.1:{port}", timeout_s=5.0)
    try:
        assert await _body(client) == b"running 3"
        assert client._idle  # kept alive, idle
        go.set()
        await written.wait()
        idle = client._idle[0]
        while not idle.reader._buffer and not idle.reader.at_eof():
            await asyncio.sleep(0.01)  # the loop's transport hands the bytes to the stream
        assert await _body(client) == b"running 3"
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


async def test_bytes_past_the_end_of_an_answer_close_the_connection() -> None:
    """A second response in the same write as the first (or a body longer than its
    Content-Length) stays in h11's buffer: the next request read it as its answer."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nrunning 3" + INJECTED)
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = EngineClient(f"http://127.0.0.1:{port}", timeout_s=5.0)
    try:
        assert [await _body(client) for _ in range(2)] == [b"running 3"] * 2
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()


async def test_a_user_and_password_in_the_url_are_sent_as_basic_auth() -> None:
    """As httpx sent them (an engine behind basic auth got 401 without); a bearer token
    given as a header replaces them."""
    server, _, heads = await _serve_then(b"")
    port = server.sockets[0].getsockname()[1]
    try:
        client = EngineClient(f"http://alice:s3cr%40t@127.0.0.1:{port}", timeout_s=5.0)
        bearer = EngineClient(
            f"http://alice:x@127.0.0.1:{port}",
            timeout_s=5.0,
            headers={"Authorization": "Bearer tok"},
        )
        for c in (client, bearer):
            assert await _body(c) == b"running 3"
            await c.aclose()
    finally:
        server.close()
        await server.wait_closed()
    expected = base64.b64encode(b"alice:s3cr@t").decode()
    assert f"Basic {expected}".encode() in heads[0]
    assert b"Bearer tok" in heads[1] and b"Basic" not in heads[1]
    assert b"user-agent: sparktop" in heads[0].lower()
