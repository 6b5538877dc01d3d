"""Servers that take the TCP connection and never answer, on loopback: an engine whose HTTP
server accepts and says nothing, and a node whose sshd accepts and sends no SSH banner, are
"not answering" with what happened ("accepted the connection, no … within N s"), not
"unreachable"; a port nobody listens on stays unreachable ("connection refused"). A node's
port that sends something else than an SSH version line (an HTTP answer, a greeting) is "not
an SSH server", naming its first line, whether it then hangs up or holds the connection."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktop.model import EngineState, NodeSample, NodeState
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
        (
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            'it sent "HTTP/1.1 400 Bad Request" and closed the connection',
        ),
        # Nothing at all, then it hangs up.
        (b"", "it closed the connection without an SSH version line"),
        # A version line, then bytes that are no SSH packet.
        (b"SSH-2.0-x\r\n" + b"\x00\x00\x00\x05garbage-not-a-packet" * 4, "garbled SSH answer"),
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

    sample = await _sample_from(talk, tmp_path, connect_timeout_s=5.0)
    assert sample.state is NodeState.ERROR, sample
    assert sample.message.startswith(f"not an SSH server ({why}"), sample
    assert "settings" not in sample.message and sample.message.isprintable()


@pytest.mark.parametrize(
    ("words", "named"),
    [
        # A greeting with a terminal escape sequence, then the connection is held.
        (
            b"\x1b[2J\x1b]0;owned\x07Welcome to the console\r\n> ",
            "␛[2J␛]0;owned␇Welcome to the console",
        ),
        # One long line without an end: cut.
        (b"x" * 300, "x" * 60 + "…"),
    ],
)
async def test_a_port_that_sends_words_but_no_ssh_version_line_is_not_an_ssh_server(
    tmp_path: Path, words: bytes, named: str
) -> None:
    async def greet_and_hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(words)
        await writer.drain()
        while await reader.read(4096):
            pass

    sample = await _sample_from(greet_and_hold, tmp_path, connect_timeout_s=0.5)
    assert sample.state is NodeState.ERROR, sample
    assert sample.message == (
        f'not an SSH server (it sent "{named}" and no SSH version line within 0.5 s)'
    )


async def test_an_ssh_version_line_and_then_nothing_is_an_sshd_not_answering(
    tmp_path: Path,
) -> None:
    async def version_then_hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await writer.drain()
        while await reader.read(4096):
            pass

    sample = await _sample_from(version_then_hold, tmp_path, connect_timeout_s=0.5)
    assert sample.state is NodeState.SSH_NOT_ANSWERING, sample
    assert sample.message == "accepted the connection, no SSH answer within 0.5 s"


async def _sample_from(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    tmp_path: Path,
    connect_timeout_s: float,
) -> NodeSample:
    """One SSH poll of a loopback server running ``serve`` on each connection."""
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(OSError):
            await serve(reader, writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    files = client_files(tmp_path / "client")
    source = ssh_source(files, node("spark-7", port), connect_timeout_s=connect_timeout_s)
    try:
        return await asyncio.wait_for(source.sample(), 10)
    finally:
        await source.aclose()
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()
