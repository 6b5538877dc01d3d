"""An engine's HTTP/1.1 client: h11 (the protocol library httpx itself speaks HTTP/1.1
through) over asyncio's streams, for the few ``GET`` requests a scrape makes.

Why not httpx here: its import brings ``urllib.request``, ``email``, ``http.cookiejar``,
idna and zstandard, its transport anyio's event-loop backend and httpcore, and every client
an ``ssl.SSLContext`` even for a plain ``http`` origin: ~4.8 MB of a monitor's memory
(docs/performance.md, "Memory at start") for features a scrape never uses (cookies,
proxies, HTTP/2, redirects followed for it, authentication flows, decoders).

What it keeps: keep-alive (an idle connection reused for up to :data:`KEEPALIVE_S`, and
dropped when the server has closed it; a request the server hung up on as it arrived on a
reused connection, with no byte of an answer, sent again once on a fresh one, as httpcore
and urllib3 do), ``timeout_s`` on each network step (connect, the TLS handshake, each
write, each read), TLS verified against certifi's CA bundle for ``https`` (a plain-HTTP
port is named as such: :mod:`sparktop.sources.engines.tls`), the bearer token and default
headers on every request, a note when a request's headers have gone out (``on_sent``: a
hung server is told from one never reached). Failures are the exceptions below, named as
httpx names them (the reasons read the same).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import SplitResult, unquote, urlsplit

import h11

KEEPALIVE_S = 5.0
"""An idle connection older than this is closed, not reused (httpx's default): servers
close theirs after about as long (uvicorn: 5 s), and a request sent as they do fails."""
READ_BYTES = 64 * 1024
MAX_HEADER_BYTES = 100 * 1024
"""A response whose status line and headers are longer is a protocol error (h11's bound,
httpcore's figure)."""
REDIRECTS = frozenset({301, 302, 303, 307, 308})


class HTTPError(Exception):
    """Any failure of a request (httpx's name)."""


class InvalidURL(HTTPError):
    """A URL that cannot be requested (no host, a bad port, another scheme)."""


class TransportError(HTTPError):
    """The request did not complete: connection, timeout or protocol."""


class TimeoutException(TransportError):
    """A network step took longer than the client's ``timeout_s``."""


class ConnectTimeout(TimeoutException):
    pass


class ReadTimeout(TimeoutException):
    pass


class WriteTimeout(TimeoutException):
    pass


class NetworkError(TransportError):
    pass


class ConnectError(NetworkError):
    pass


class TLSError(ConnectError):
    """The TLS handshake failed; the message says how (a plain-HTTP server, a certificate
    not trusted, no answer). ``answered``: the port answered, in plain HTTP."""

    def __init__(self, message: str, *, answered: bool = False) -> None:
        super().__init__(message)
        self.answered = answered


class ReadError(NetworkError):
    pass


class WriteError(NetworkError):
    pass


class ProtocolError(TransportError):
    pass


class LocalProtocolError(ProtocolError):
    """A request h11 will not send (a header value with a line break, say)."""


class RemoteProtocolError(ProtocolError):
    """The server's bytes are not HTTP/1.1 (h11's words), or it hung up mid-answer."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Scheme, host and port of a URL (the port spelled out)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def split_url(url: str) -> tuple[Origin, str]:
    """``url``'s origin and its request target (path and query, ``/`` at least). Raises
    :class:`InvalidURL`."""
    try:
        parts: SplitResult = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(str(exc)) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise InvalidURL(f"not an http(s) URL with a host: {url[:80]!r}")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Origin(scheme, parts.hostname, port or (443 if scheme == "https" else 80)), target


USER_AGENT = "sparktop"


def basic_auth(url: str) -> dict[str, str]:
    """``Authorization: Basic`` from ``url``'s user and password (percent-decoded, as
    httpx sends them), or no header. An explicit header (a bearer token) replaces it."""
    parts = urlsplit(url)
    if parts.username is None:
        return {}
    import base64  # only for a URL with a user: most monitors never load it

    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return {"authorization": "Basic " + base64.b64encode(pair.encode()).decode("ascii")}


@dataclass(slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    h11: h11.Connection
    idle_since: float = field(default_factory=time.monotonic)
    reused: bool = False
    """Taken from the idle pool for this request (the server may close it as it arrives)."""
    received: int = 0
    """Bytes of this request's answer read so far."""
    first: bytes = b""
    """The answer's first bytes (a TLS record there: the port speaks https)."""

    def reusable(self) -> bool:
        """Idle, not expired, and not closed or written to by the server meanwhile: bytes
        that came unasked (a ``408`` before a close, another response) would be read as the
        next request's answer. The transport reads into the stream's buffer on its own, so
        that buffer is where they are (asyncio has no public call for its length)."""
        fresh = time.monotonic() - self.idle_since < KEEPALIVE_S
        unasked = bool(self.reader._buffer)  # type: ignore[attr-defined]  # private: see above
        quiet = not unasked and not self.reader.at_eof() and not self.writer.transport.is_closing()
        return fresh and quiet

    def close(self) -> None:
        self.writer.close()


@dataclass(slots=True)
class Response:
    """A response whose body is read with :meth:`aiter_raw` (as sent: not inflated)."""

    status_code: int
    reason_phrase: str
    headers: dict[str, str]
    """Lower-case names; a repeated header's values joined by ``, ``."""
    _chunks: AsyncIterator[bytes]

    @property
    def is_redirect(self) -> bool:
        return self.status_code in REDIRECTS and "location" in self.headers

    @property
    def charset_encoding(self) -> str | None:
        """The ``charset`` of ``Content-Type``, if it names one."""
        for param in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "charset" and value.strip().strip("\"'"):
                return value.strip().strip("\"'")
        return None

    def aiter_raw(self) -> AsyncIterator[bytes]:
        return self._chunks


class EngineClient:
    """Requests to one engine at ``base_url`` (its path a prefix of every request's);
    ``headers`` go on each request. Use :meth:`stream`, then :meth:`aclose`."""

    def __init__(
        self, base_url: str, *, timeout_s: float, headers: Mapping[str, str] | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.origin, prefix = split_url(self.base_url)
        self._prefix = prefix.rstrip("/")
        self.timeout_s = timeout_s
        self.headers = {"user-agent": USER_AGENT, **basic_auth(self.base_url)}
        self.headers |= {k.lower(): v for k, v in (headers or {}).items()}
        self._idle: list[_Connection] = []
        self._tls: ssl.SSLContext | None = None

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` under the base URL (an absolute URL as it is)."""
        if "://" in path:
            return path
        return f"{self.origin}{self._prefix}/{path.lstrip('/')}"

    @asynccontextmanager
    async def stream(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        on_sent: Callable[[], None] | None = None,
    ) -> AsyncIterator[Response]:
        """``GET url`` (absolute, on this client's origin); the response's body is read
        within the block. Raises the :class:`TransportError` kinds or :class:`InvalidURL`."""
        origin, target = split_url(url)
        if origin != self.origin:
            raise InvalidURL(f"{origin} is not this client's origin {self.origin}")
        host = f"[{origin.host}]" if ":" in origin.host else origin.host
        default = 443 if origin.scheme == "https" else 80
        wanted = {"host": host if origin.port == default else f"{host}:{origin.port}"}
        wanted |= {k.lower(): v for k, v in {**self.headers, **(headers or {})}.items()}
        try:
            request = h11.Request(method="GET", target=target, headers=list(wanted.items()))
        except h11.LocalProtocolError as exc:
            raise LocalProtocolError(str(exc)) from None
        conn = await self._connection()
        done = False
        try:
            try:
                event = await self._ask(conn, request, on_sent)
            except (ReadError, WriteError, RemoteProtocolError):
                # A kept-alive connection the server closed as the request arrived (its
                # idle timer ran out): nothing of an answer came, and a GET may be sent
                # again, once, on a fresh connection (as urllib3 and httpcore do).
                if not conn.reused or conn.received:
                    raise
                conn.close()
                conn = await self._open()
                event = await self._ask(conn, request, on_sent)
            fields: dict[str, str] = {}
            for name, value in event.headers:
                key, text = name.decode("latin-1"), value.decode("latin-1")
                fields[key] = f"{fields[key]}, {text}" if key in fields else text
            ended = False

            async def body() -> AsyncGenerator[bytes, None]:
                nonlocal ended
                while True:
                    part = await self._next(conn)
                    if isinstance(part, h11.Data):
                        yield bytes(part.data)
                    elif isinstance(part, h11.EndOfMessage):
                        ended = True
                        return

            reason = event.reason.decode("latin-1", "replace")
            chunks = body()
            try:
                yield Response(event.status_code, reason, fields, chunks)
            finally:
                await chunks.aclose()
            done = ended
        finally:
            self._release(conn, done)

    async def _ask(
        self, conn: _Connection, request: h11.Request, on_sent: Callable[[], None] | None
    ) -> h11.Response:
        """Send ``request`` on ``conn``; the response's head (informational ones skipped)."""
        try:
            data = conn.h11.send(request) + (conn.h11.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError as exc:
            raise LocalProtocolError(str(exc)) from None
        await self._write(conn, data)
        if on_sent is not None:
            on_sent()
        event = await self._next(conn)
        while isinstance(event, h11.InformationalResponse):
            event = await self._next(conn)
        if not isinstance(event, h11.Response):  # h11 gives nothing else in this state
            raise RemoteProtocolError(f"unexpected {type(event).__name__}")
        return event

    async def _connection(self) -> _Connection:
        """An idle connection still usable, else a new one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable():
                conn.reused, conn.received, conn.first = True, 0, b""
                return conn
            conn.close()
        return await self._open()

    async def _open(self) -> _Connection:
        try:
            async with asyncio.timeout(self.timeout_s):
                reader, writer = await asyncio.open_connection(
                    self.origin.host, self.origin.port, limit=READ_BYTES
                )
        except TimeoutError:
            raise ConnectTimeout(f"no connection within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise ConnectError(str(exc) or type(exc).__name__) from exc
        if self.origin.scheme == "https":
            # https only: a plain-http monitor never loads the bundle nor these modules.
            import certifi

            from sparktop.sources.engines.tls import handshake

            if self._tls is None:
                self._tls = ssl.create_default_context(cafile=certifi.where())
            await handshake(writer, self._tls, self.origin, self.timeout_s)
        return _Connection(reader, writer, h11.Connection(h11.CLIENT, MAX_HEADER_BYTES))

    async def _write(self, conn: _Connection, data: bytes) -> None:
        try:
            conn.writer.write(data)
            async with asyncio.timeout(self.timeout_s):
                await conn.writer.drain()
        except TimeoutError:
            raise WriteTimeout(f"request not sent within {self.timeout_s:g} s") from None
        except OSError as exc:
            raise WriteError(str(exc) or type(exc).__name__) from exc

    async def _next(self, conn: _Connection) -> h11.Event:
        """The next event of the response, reading as much as it needs."""
        parser = conn.h11
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                if conn.first[1:2] == b"\x03" and conn.first[:1] in (b"\x15", b"\x16"):
                    # A TLS record (an alert, a handshake) in answer to a plain request.
                    raise RemoteProtocolError("a TLS record; this port speaks https") from exc
                raise RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                if isinstance(event, h11.ConnectionClosed):
                    raise RemoteProtocolError("Server disconnected without sending a response.")
                return event  # type: ignore[return-value]
            try:
                async with asyncio.timeout(self.timeout_s):
                    data = await conn.reader.read(READ_BYTES)
            except TimeoutError:
                raise ReadTimeout(f"no data within {self.timeout_s:g} s") from None
            except OSError as exc:
                raise ReadError(str(exc) or type(exc).__name__) from exc
            if not conn.received:
                conn.first = data[:2]
            conn.received += len(data)
            if not data and parser.their_state is h11.SEND_RESPONSE:
                raise RemoteProtocolError("Server disconnected without sending a response.")
            parser.receive_data(data)

    def _release(self, conn: _Connection, complete: bool) -> None:
        parser = conn.h11
        # Bytes past the end of the answer (a body longer than its Content-Length, a
        # second response in the same write) are nobody's answer: the connection goes.
        leftover = bool(parser.trailing_data[0])
        done = parser.our_state is h11.DONE and parser.their_state is h11.DONE
        if complete and done and not leftover:
            parser.start_next_cycle()
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    async def aclose(self) -> None:
        """Close every idle connection."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
