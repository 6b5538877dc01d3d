"""A kept-alive connection the server closes as the next request arrives: the request is
sent again, once, on a fresh connection, when nothing of an answer came
(:meth:`sparktop.sources.engines.wire.EngineClient.stream`)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

import pytest

from sparktop.sources.engines.wire import EngineClient, RemoteProtocolError, TransportError

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nrunning 3"


def _hang_up(writer: asyncio.StreamWriter, reset: bool) -> None:
    """Close the connection: a FIN, or (``reset``) an RST, as a server closing a socket
    with the request unread does."""
    if reset:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.close()


async def _server(
    answers: int, reset: bool = False, partial: bytes = b""
) -> tuple[asyncio.Server, list[int]]:
    """A server that answers ``answers`` requests on each connection, then hangs up on the
    next one as it arrives (after writing ``partial`` of an answer); the list counts the
    requests each connection got."""
    requests: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(0)
        mine = len(requests) - 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"\r\n\r\n"):
                requests[mine] += 1
                if requests[mine] > answers:
                    writer.write(partial)
                    await writer.drain()
                    break
                writer.write(OK)
                await writer.drain()
        _hang_up(writer, reset)

    return await asyncio.start_server(handle, "127.0.0.1", 0), requests


async def _get(client: EngineClient) -> bytes:
    async with client.stream(client.url("/metrics")) as response:
        return b"".join([c async for c in response.aiter_raw()])


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
async def test_a_request_on_a_connection_closed_as_it_arrived_is_sent_again_once(
    reset: bool,
) -> None:
    server, requests = await _server(answers=1, reset=reset)
    port = server.sockets[0].getsockname()[1]
    client = EngineClient(f"http://127.0.0.1:{port}", timeout_s=5.0)
    try:
        bodies = [await _get(client) for _ in range(3)]
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert bodies == [b"running 3"] * 3
    # Each kept-alive connection's second request was hung up on, then sent on a new one.
    assert requests == [2, 2, 1]


async def test_a_new_connection_that_hangs_up_is_not_asked_again() -> None:
    server, requests = await _server(answers=0)
    port = server.sockets[0].getsockname()[1]
    client = EngineClient(f"http://127.0.0.1:{port}", timeout_s=5.0)
    try:
        with pytest.raises(RemoteProtocolError, match="disconnected"):
            await _get(client)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert requests == [1]


async def test_a_connection_that_hung_up_mid_answer_is_not_asked_again() -> None:
    """Part of an answer came: the server took the request, which is not sent twice."""
    server, requests = await _server(answers=1, partial=b"HTTP/1.1 200 OK\r\nContent-Le")
    port = server.sockets[0].getsockname()[1]
    client = EngineClient(f"http://127.0.0.1:{port}", timeout_s=5.0)
    try:
        assert await _get(client) == b"running 3"
        with pytest.raises(TransportError):
            await _get(client)
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert requests == [2]


async def test_scrapes_at_the_servers_idle_timeout_all_succeed() -> None:
    """The race as it happens: the server closes a connection idle for ``idle_s`` (its
    timer starts once an answer is sent, as uvicorn's keep-alive timeout does) and the
    client asks at about that interval, so some requests meet the close."""
    idle_s = 0.02
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            await reader.readuntil(b"\r\n\r\n")  # a new connection waits for its request
            while True:
                writer.write(OK)
                await writer.drain()
                async with asyncio.timeout(idle_s):
                    await reader.readuntil(b"\r\n\r\n")
        _hang_up(writer, reset=False)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = EngineClient(f"http://127.0.0.1:{port}", timeout_s=5.0)
    bodies = []
    try:
        for i in range(40):
            bodies.append(await _get(client))
            await asyncio.sleep(idle_s * (0.8 + 0.4 * (i % 5) / 4))  # the scrape interval
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    assert bodies == [b"running 3"] * 40
    assert connections > 1  # the server did close idle connections
