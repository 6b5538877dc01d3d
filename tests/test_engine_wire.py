"""The engine client's connections: one kept alive across requests, none reused that the
server said it would close (:mod:`sparktop.sources.engines.wire`)."""

from __future__ import annotations

import asyncio

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
