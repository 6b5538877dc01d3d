"""A tiny HTTP/1.1 server on 127.0.0.1 for engine-source tests (asyncio streams, keep-alive).

Each route maps a path to a function returning a :class:`Reply`; a reply can also misbehave:
``hang`` (never answers), ``cut`` (sends half the body announced by Content-Length and closes).
The server counts connections and keeps every request's headers, so tests can check
connection reuse, ``Accept`` and ``Authorization``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    mode: str = "normal"  # normal | hang | cut


Route = Callable[[], Reply]

REASONS = {200: "OK", 307: "Temporary Redirect", 404: "Not Found", 500: "Internal Server Error"}


class StubServer:
    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str]]] = []
        self._server: asyncio.Server | None = None
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)

    async def __aenter__(self) -> StubServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()  # idle keep-alive handlers see EOF and return
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections += 1
        try:
            while not await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; True when the connection is done."""
        line = await reader.readline()
        if not line:
            return True
        _method, path, _version = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
            key, _, value = raw.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        self.requests.append((path, headers))
        route = self.routes.get(path)
        reply = route() if route else Reply(404, b"Not Found")
        if reply.mode == "hang":
            await self._stop.wait()
            return True
        head = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}"]
        head += [f"Content-Type: {reply.content_type}", f"Content-Length: {len(reply.body)}"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        if reply.mode == "cut":
            writer.write(reply.body[: len(reply.body) // 2])
            await writer.drain()
            return True
        writer.write(reply.body)
        await writer.drain()
        return False


def text(body: bytes | str, content_type: str = Reply.content_type) -> Route:
    """A route that always answers ``body``."""
    data = body.encode() if isinstance(body, str) else body
    return lambda: Reply(body=data, content_type=content_type)


def models_route(model: str = "dsv4-flash", max_model_len: int = 1_048_576) -> Route:
    """``/v1/models`` like vLLM's: the base model (``parent: null``) and a LoRA adapter."""
    import json

    data = {
        "object": "list",
        "data": [
            {
                "id": "my-lora",
                "object": "model",
                "parent": model,
                "max_model_len": 4096,
                "root": "/lora",
            },
            {
                "id": model,
                "object": "model",
                "parent": None,
                "max_model_len": max_model_len,
                "root": model,
            },
        ],
    }
    return text(json.dumps(data), content_type="application/json")


@contextlib.contextmanager
def serve_threaded(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A stdlib HTTP server for ``handler`` on 127.0.0.1 in a thread; yields its base URL.

    For code under test that runs its own event loop (the CLI, blocking httpx calls)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def metrics_handler(page: str, other: bytes = b"not found") -> type[BaseHTTPRequestHandler]:
    """A handler for :func:`serve_threaded` that serves ``page`` at ``/metrics`` (Prometheus
    text 0.0.4) and ``other`` with a 404 on every other path."""

    class _Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/metrics"
            body = page.encode() if found else other
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return _Metrics
