"""Whether the port behind an engine URL that gave no HTTP answer speaks first.

An HTTP server waits for the request; an SSH server (an SSH port put in the inventory as an
engine URL) sends its ``SSH-2.0-…`` banner as soon as the connection opens, and then waits for
the client's banner, so the scrape only times out. When a scrape saw no HTTP response, one
short connection listens for what the server says unasked, so the reason can name it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar
from urllib.parse import urlsplit

from sparktop.safe_text import printable

LISTEN_S = 0.5
"""How long the check waits for the server to speak first (a banner is sent on accept)."""
READ_BYTES = 256
T = TypeVar("T")


async def spoke_first(url: str, listen_s: float = LISTEN_S) -> str | None:
    """``not an HTTP server (it sent an SSH banner: SSH-2.0-OpenSSH_9.6)``, ``not an HTTP
    server (it spoke first: …)`` when the server at ``url``'s host and port sends bytes
    before any request within ``listen_s`` seconds; None when it stays silent, cannot be
    reached, or the URL has no host. Never raises; bounded by ``2 × listen_s``."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(listen_s):
            reader, writer = await asyncio.open_connection(parts.hostname, port)
        async with asyncio.timeout(listen_s):
            data = await reader.read(READ_BYTES)
    except (OSError, TimeoutError):
        return None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    if not data:
        return None
    line = printable(data.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1"))[:60]
    if data.startswith(b"SSH-"):
        return f"not an HTTP server (it sent an SSH banner: {line})"
    return f"not an HTTP server (it spoke first: {line})"


class OtherProtocol(Exception):
    """The server spoke first (an SSH banner): it is no HTTP server; ``reason`` says what
    it sent, as :func:`spoke_first` words it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def unless_spoke_first(url: str, work: Awaitable[T]) -> T:
    """``work``'s result, with :func:`spoke_first` listening beside it: raises
    :class:`OtherProtocol` as soon as the server at ``url`` turns out to speak first. An
    HTTP client waits for a whole header block, so a port sending an SSH banner held
    ``budget`` and ``sweep`` until their 30 s deadlines; an HTTP server costs one extra
    connection, closed when ``work`` ends or after ``2 × LISTEN_S``."""
    task = asyncio.ensure_future(work)
    probe = asyncio.ensure_future(spoke_first(url))
    try:
        await asyncio.wait((task, probe), return_when=asyncio.FIRST_COMPLETED)
        if not task.done() and (other := probe.result()) is not None:
            raise OtherProtocol(other)
        return await task
    finally:
        for pending in (task, probe):
            pending.cancel()
        await asyncio.gather(task, probe, return_exceptions=True)
