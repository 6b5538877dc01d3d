"""Servers that take the TCP connection and never answer, on loopback: an engine whose HTTP
server accepts and says nothing, and a node whose sshd accepts and sends no SSH banner, are
"not answering" with what happened ("accepted the connection, no … within N s"), not
"unreachable"; a port nobody listens on stays unreachable ("connection refused")."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktop.model import EngineState, NodeState
from sparktop.sources.engines.source import EngineSource
from sparktop.testing.sshclient import client_files, node, ssh_source
from sparktop.ui.engine_views import engine_lines
from sparktop.ui.views import ViewConfig


@dataclass(frozen=True)
class Cfg:
    name: str
    url: str
    kind: str = "vllm"
    api_key_env: str | None = None


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A loopback port that accepts connections, reads whatever comes, and never writes."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        while await reader.read(4096):
            pass

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_engine_that_accepts_and_never_answers_is_not_answering(
    silent_port: int,
) -> None:
    source = EngineSource(Cfg("hung", f"http://127.0.0.1:{silent_port}"), timeout_s=0.5)
    try:
        sample = await asyncio.wait_for(source.sample(), 10)
    finally:
        await source.aclose()
    assert sample.state is EngineState.NOT_ANSWERING, sample
    assert sample.message.startswith("accepted the connection, no HTTP response within")
    block = "".join(t for line in engine_lines(sample, sample.time_s, ViewConfig(), None)
                    for t, _ in line)  # fmt: skip
    assert "not answering since" in block and "unreachable" not in block


async def test_an_engine_port_nobody_listens_on_is_unreachable() -> None:
    source = EngineSource(Cfg("gone", f"http://127.0.0.1:{closed_port()}"), timeout_s=0.5)
    try:
        sample = await source.sample()
    finally:
        await source.aclose()
    assert sample.state is EngineState.UNREACHABLE and sample.message == "connection refused"


async def test_a_node_that_accepts_and_sends_no_ssh_banner_is_not_answering(
    silent_port: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    files = client_files(tmp_path / "client")
    source = ssh_source(files, node("spark-9", silent_port), connect_timeout_s=0.5)
    try:
        sample = await asyncio.wait_for(source.sample(), 10)
    finally:
        await source.aclose()
    assert sample.state is NodeState.SSH_NOT_ANSWERING, sample
    assert sample.message == "accepted the connection, no SSH answer within 0.5 s"
    gone = ssh_source(files, node("spark-8", closed_port()), connect_timeout_s=0.5)
    try:
        refused = await gone.sample()
    finally:
        await gone.aclose()
    assert refused.state is NodeState.UNREACHABLE and refused.message == "connection refused"


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        # What an HTTP server says to an SSH client's version line, then it hangs up.
        (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", "closed"),
        # A version line, then bytes that are no SSH packet.
        (b"SSH-2.0-x\r\n" + b"\x00\x00\x00\x05garbage-not-a-packet" * 4, "garbled"),
    ],
)
async def test_a_port_that_does_not_speak_ssh_is_named_not_the_settings(
    tmp_path: Path, answer: bytes, why: str
) -> None:
    async def talk(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # the client's version line
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(talk, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    source = ssh_source(client_files(tmp_path / "client"), node("spark-7", port))
    try:
        sample = await asyncio.wait_for(source.sample(), 10)
    finally:
        await source.aclose()
        server.close()
        await server.wait_closed()
    assert sample.message.startswith("not an SSH server (") and why in sample.message, sample
    assert "settings" not in sample.message and sample.message.isprintable()
