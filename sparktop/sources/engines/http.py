"""The two HTTP requests an engine source makes, with every failure turned into a reason.

``fetch_metrics``: ``GET /metrics`` streamed (so a body cut off mid-way is told from a server
that never answered), size-capped, status and content type checked. ``fetch_models``:
``GET /v1/models`` → ``max_model_len``, id and ``root`` of the base model (the entry with
``parent: null``; LoRA adapters name their parent). ``fetch_version``: ``GET /version`` →
the server's version (vLLM answers ``{"version": "0.32.0"}``), which decides how it treats
a request over ``max_model_len`` (:mod:`sparktop.sweep.budget.ceiling`). Redirects are followed
only within the engine's origin. Request headers (and so the bearer token) and bodies never
appear in a reason; what a server sends (content type, a redirect's host) is shown escaped.
"""

from __future__ import annotations

import os
import re
import socket
import textwrap
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

from sparktop import heap
from sparktop.jsontext import loads
from sparktop.model import NA, EngineState, Num
from sparktop.safe_text import clip_identity
from sparktop.sources.engines.kinds import DEFAULT
from sparktop.sources.engines.kinds.spec import Models
from sparktop.sources.engines.wire import (
    EngineClient,
    HTTPError,
    InvalidURL,
    ProtocolError,
    Response,
    TimeoutException,
    TLSError,
    TransportError,
    split_url,
)

METRICS_PATH = "/metrics"
DEFAULT_MODELS: Models = DEFAULT.models
"""The models endpoint's shape when the kind is not known (all kinds share OpenAI's)."""
MAX_BODY_BYTES = 32 * 1024 * 1024
"""A /metrics page larger than this is refused (a mis-pointed URL streaming something else)."""
MAX_MODELS_BYTES = 1024 * 1024
"""A ``/v1/models`` answer larger than this is not read (it lists a few models)."""
MAX_REDIRECTS = 3
"""Redirects followed, each within the engine's own origin (``/metrics`` → ``/metrics/``)."""


class ScrapeFailure(Exception):
    """A scrape outcome that is not a page: the engine state it means and the reason."""

    def __init__(
        self, state: EngineState, reason: str, *, refused: bool = False, no_response: bool = False
    ) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason
        self.refused = refused
        """A body over a cap: the same page will be refused again (it is backed off)."""
        self.no_response = no_response
        """The server took the request and sent no HTTP response (silence, or it hung up):
        it may speak another protocol (:mod:`sparktop.sources.engines.banner`)."""


def describe(exc: BaseException) -> str:
    """``TypeName: message`` (or just the type name when the message is empty); an HTTP
    protocol error as :func:`protocol_reason` says it."""
    if isinstance(exc, ProtocolError):
        return protocol_reason(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def protocol_reason(exc: ProtocolError) -> str:
    """``not an HTTP answer (illegal status line)``: h11's words before the bytes it quotes
    or the counts it adds in brackets (a Python bytes repr of whatever the port sent,
    hundreds of characters, is no reason), cut at a word with ``…`` past 80 characters;
    a server that hung up says so."""
    head = re.split(r":| \(", str(exc), maxsplit=1)[0].strip().rstrip(".")
    head = textwrap.shorten(head, 80, placeholder="…") or type(exc).__name__
    head = head[:1].lower() + head[1:]
    hung_up = "disconnected" in head or "closed" in head
    return head if hung_up else f"not an HTTP answer ({head})"


def transport_reason(exc: BaseException) -> str:
    """Why a connection failed, in the words the SSH nodes use (``connection refused``,
    ``cannot resolve host name (…)``, the OS's reason), found in the chain of causes
    under the client's ``ConnectError``; else :func:`describe`."""
    if isinstance(exc, TLSError):  # its own words, not OpenSSL's under it
        return str(exc)
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return f"cannot resolve host name ({cause.strerror})"
        if isinstance(cause, OSError) and cause.errno is not None and cause.strerror:
            return cause.strerror
        cause = cause.__cause__ or cause.__context__
    return describe(exc)


AUTH_HINT = "check the bearer token (api_key_env)"
"""The 401/403 reason's hint where the token's source is not known (:func:`auth_hint`)."""


def auth_hint(key_env: str | None, given: bool, named_on: str = "inventory", url: str = "") -> str:
    """What to fix when the server refuses the bearer token: the unset variable by name, the
    variable whose token was refused, or how to set one when the engine has none. An engine
    ``named_on`` the command line (``endpoint``: ``--endpoint``; ``local``: the server found
    at ``url`` without options) is told the flag, not the inventory key."""
    if given:
        return "the server refused the API key given"
    key = "api_key_env" if named_on == "inventory" else "--api-key-env"
    if not key_env:
        if named_on == "endpoint":
            return "the server wants a bearer token: export VAR=<token> and add --api-key-env VAR"
        if named_on == "local":
            return (
                "the server wants a bearer token: export VAR=<token> and run with "
                f"--endpoint {url} --api-key-env VAR"
            )
        return "the server wants a bearer token: set api_key_env: VAR on the engine and export VAR"
    if not os.environ.get(key_env):
        return f"environment variable {key_env} ({key}) is not set"
    return f"the server refused the token in {key_env} ({key})"


def _check_status(response: Response) -> None:
    status = response.status_code
    if status == 200:
        return
    if status == 404:
        raise ScrapeFailure(
            EngineState.METRICS_DISABLED, "metrics disabled: GET /metrics returned 404"
        )
    if status in (401, 403):
        raise ScrapeFailure(EngineState.UNAVAILABLE, f"HTTP {status}: {AUTH_HINT}")
    phrase = ascii(response.reason_phrase[:40])[1:-1]
    raise ScrapeFailure(EngineState.UNAVAILABLE, f"HTTP {status} {phrase}".rstrip())


@dataclass(slots=True)
class Progress:
    """How far a request got (for the reason when its deadline passes): status, bytes."""

    status: int | None = None
    size: int = 0
    connected: bool = False
    """The server accepted the connection and took the request."""
    ticket: heap.Ticket | None = None
    """Where a big page's bytes are counted in :data:`sparktop.heap.IN_FLIGHT` (None: not
    counted); the caller gives them back when it is done with the page."""

    def sent(self) -> None:
        """The request went out (the client's ``on_sent``)."""
        self.connected = True


ACCEPT_ENCODING = "gzip, deflate"
"""What a scrape accepts: what prometheus_client serves; inflated by :meth:`Body.decoded`."""
_INFLATE_STEP = 1 << 20


def inflate(
    data: bytes,
    coding: str,
    limit: int = MAX_BODY_BYTES,
    what: str = "page: not a /metrics page",
    ticket: heap.Ticket | None = None,
) -> bytes:
    """``data`` decompressed per its ``Content-Encoding`` (``gzip``, ``deflate``, none), at
    most ``limit`` bytes out, a MiB per call (a 32 KB gzip bomb inflates to 32 MiB).
    Raises :class:`ScrapeFailure` past ``limit`` (``what``: the noun, then after a colon what
    that means), for corrupt data, a stream cut off before its end (a gzip page without its
    trailer is refused, never read as if whole) or another encoding, or when the bytes it
    holds do not fit in :data:`sparktop.heap.IN_FLIGHT` (``ticket``: where they count)."""
    coding = coding.strip().lower()
    if coding in ("", "identity") or not data:
        return data
    if coding not in ("gzip", "x-gzip", "deflate"):
        reason = f"Content-Encoding {ascii(coding[:40])[1:-1]} not asked for and not read"
        raise ScrapeFailure(EngineState.UNAVAILABLE, reason)
    dec = zlib.decompressobj(wbits=47 if coding != "deflate" else 15)  # 47: gzip or zlib
    out: list[bytes] = []
    size = 0
    sent = len(data)
    try:
        while not dec.eof:
            piece = dec.decompress(data, _INFLATE_STEP)
            if not piece and not dec.eof:
                # Nothing more out (input left over comes only with a full step out), and
                # the stream's end (gzip's trailer with its CRC and length) never came: the
                # sender stopped mid-page. Never another turn without progress.
                raise ScrapeFailure(
                    EngineState.UNAVAILABLE,
                    f"{what.split(':')[0]} cut off: its {coding} stream stops short of its end "
                    f"({sent:,} bytes received)",
                )
            size += len(piece)
            if size > limit:
                raise ScrapeFailure(
                    EngineState.UNAVAILABLE,
                    f"{what.split(':')[0]} over {limit // (1024 * 1024)} MiB once decompressed "
                    f"({coding})" + (f":{what.split(':', 1)[1]}" if ":" in what else ""),
                    refused=True,
                )
            out.append(piece)
            if ticket is not None and size >= heap.BIG_BYTES:
                hold(ticket, sent + size)  # as sent, and inflated
            data = dec.unconsumed_tail
    except zlib.error as exc:
        raise ScrapeFailure(EngineState.UNAVAILABLE, f"corrupt {coding} body ({exc})") from None
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class Body:
    """A ``/metrics`` body as received: bytes (still compressed when ``coding`` says so),
    content type, declared charset, ``Content-Encoding``."""

    data: bytes
    content_type: str = ""
    encoding: str | None = None
    coding: str = ""
    ticket: heap.Ticket | None = None
    """Where the inflated page's bytes count (:data:`sparktop.heap.IN_FLIGHT`)."""

    def decoded(self) -> bytes:
        """The body inflated (bounded; CPU-bound: call it off the event loop). Raises
        :class:`ScrapeFailure` for a bomb, corrupt data or an HTML page."""
        data = inflate(self.data, self.coding, ticket=self.ticket)
        if self.coding and data.lstrip()[:1] == b"<":
            raise ScrapeFailure(EngineState.UNAVAILABLE, "not a metrics page (HTML)")
        return data

    @property
    def openmetrics(self) -> bool:
        """True when the server says the body is OpenMetrics (it is then parsed as such)."""
        return "application/openmetrics-text" in self.content_type.lower()

    def text(self) -> str:
        """The body inflated and decoded (its charset, else UTF-8; undecodable bytes
        replaced). Raises :class:`ScrapeFailure` like :meth:`decoded`."""
        data = self.decoded()
        try:
            return data.decode(self.encoding or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return data.decode("utf-8", errors="replace")


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the port spelled out), printable. Raises
    :class:`~sparktop.sources.engines.wire.InvalidURL`."""
    return ascii(str(split_url(url)[0]))[1:-1]


@asynccontextmanager
async def open_stream(
    client: EngineClient, path: str, progress: Progress, headers: dict[str, str] | None = None
) -> AsyncIterator[Response]:
    """``GET path`` streamed, following at most :data:`MAX_REDIRECTS` redirects and only
    within the engine's own origin (scheme, host, port): numbers from another server must
    never be shown as this engine's. Raises :class:`ScrapeFailure` for any other redirect."""
    # Under the base URL's path; ``sent`` tells a hung server from one never reached.
    url = client.url(path)
    first = origin(url)
    for _ in range(MAX_REDIRECTS + 1):
        async with client.stream(url, headers, progress.sent) as response:
            if not response.is_redirect:
                progress.status = response.status_code
                yield response
                return
            location = response.headers.get("location", "")
        try:
            target = urljoin(url, location)
            there = origin(target)
        except (InvalidURL, ValueError):
            raise ScrapeFailure(
                EngineState.UNAVAILABLE, f"GET {path}: redirected to an invalid URL; not followed"
            ) from None
        if there != first:
            raise ScrapeFailure(
                EngineState.UNAVAILABLE,
                f"GET {path}: redirected to another origin ({there}); not followed, "
                f"only redirects within {first} are",
            )
        url = target
    raise ScrapeFailure(
        EngineState.UNAVAILABLE, f"GET {path}: more than {MAX_REDIRECTS} redirects; not followed"
    )


async def read_capped(
    response: Response, limit: int, progress: Progress, *, raw: bool = False
) -> bytes:
    """The body, refused past ``limit`` bytes (as sent, and again once inflated). Raises
    :class:`ScrapeFailure`. ``raw``: as sent, not inflated (a ``/metrics`` page is inflated
    in a worker thread: on the event loop a gzip bomb held it for seconds)."""
    chunks: list[bytes] = []
    try:
        async for chunk in response.aiter_raw():
            progress.size += len(chunk)
            if progress.size > limit:
                raise ScrapeFailure(
                    EngineState.UNAVAILABLE,
                    f"page over {limit // (1024 * 1024)} MiB: not a /metrics page",
                    refused=True,
                )
            chunks.append(chunk)
            if progress.size >= heap.BIG_BYTES:
                heap.big_buffer()  # before the join: big pages' buffers are unmapped when freed
                if progress.ticket is not None:
                    hold(progress.ticket, progress.size)
    except TransportError as exc:
        # h11 says "(received N bytes, expected M)": M is the news, N is said already.
        expected = re.search(r"expected (\d+)\)", str(exc))
        of = f" of {expected[1]}" if expected else ""
        reason = f"body cut off after {progress.size}{of} bytes ({describe(exc)})"
        raise ScrapeFailure(EngineState.UNAVAILABLE, reason) from exc
    data = b"".join(chunks)
    return data if raw else inflate(data, response.headers.get("content-encoding", ""), limit)


def hold(ticket: heap.Ticket, size: int) -> None:
    """Count ``size`` bytes of a big page in :data:`sparktop.heap.IN_FLIGHT` for
    ``ticket``. Raises :class:`ScrapeFailure` when other scrapes' big pages leave no room."""
    if not heap.IN_FLIGHT.grow(ticket, size):
        mib = 1024 * 1024
        raise ScrapeFailure(
            EngineState.UNAVAILABLE,
            f"page not read: past {size // mib} MiB while other engines' big pages hold "
            f"{(heap.IN_FLIGHT.held - ticket.held) // mib} MiB "
            f"(at most {heap.IN_FLIGHT.limit // mib} MiB in flight)",
        )


def no_answer(progress: Progress, timeout_s: float) -> tuple[EngineState, str]:
    """The state and reason for a request with no HTTP answer within ``timeout_s``: a server
    that took the connection and the request but says nothing is not unreachable."""
    if progress.connected:
        return EngineState.NOT_ANSWERING, (
            f"accepted the connection, no HTTP response within {timeout_s:g} s"
        )
    return EngineState.UNREACHABLE, f"no connection within {timeout_s:g} s (connect timed out)"


async def fetch_metrics(
    client: EngineClient, timeout_s: float, progress: Progress | None = None
) -> Body:
    """The ``/metrics`` body. Raises :class:`ScrapeFailure` (never anything else from
    the client): no answer or refused → UNREACHABLE; 404 → METRICS_DISABLED; other status, HTML,
    oversized or cut-off body, a redirect off the engine's origin, a plain-HTTP answer to
    ``https``, no room in :data:`sparktop.heap.IN_FLIGHT` (``progress.ticket``) → UNAVAILABLE.
    The caller sets the whole-response deadline (``timeout_s`` bounds each network step)."""
    progress = progress or Progress()
    try:
        async with open_stream(
            client, METRICS_PATH, progress, headers={"Accept-Encoding": ACCEPT_ENCODING}
        ) as response:
            _check_status(response)
            data = await read_capped(response, MAX_BODY_BYTES, progress, raw=True)
    except TLSError as exc:  # a port answering in plain HTTP is reachable, with no page
        state = EngineState.UNAVAILABLE if exc.answered else EngineState.UNREACHABLE
        raise ScrapeFailure(state, str(exc)) from exc
    except TimeoutException as exc:
        state, reason = no_answer(progress, timeout_s)
        silent = state is EngineState.NOT_ANSWERING
        raise ScrapeFailure(state, reason, no_response=silent) from exc
    except ProtocolError as exc:  # it answered, not in HTTP: reachable, no page
        hung_up = progress.status is None and not protocol_reason(exc).startswith("not an")
        raise ScrapeFailure(
            EngineState.UNAVAILABLE, protocol_reason(exc), no_response=hung_up
        ) from exc
    except TransportError as exc:
        raise ScrapeFailure(EngineState.UNREACHABLE, transport_reason(exc)) from exc
    content_type = response.headers.get("content-type", "")
    if "html" in content_type.lower() or data.lstrip()[:1] == b"<":
        printable = ascii(content_type[:60])[1:-1]
        raise ScrapeFailure(EngineState.UNAVAILABLE, f"not a metrics page ({printable or 'HTML'})")
    coding = response.headers.get("content-encoding", "")
    return Body(data, content_type, response.charset_encoding, coding, progress.ticket)


MAX_MODEL_LEN = 1e9
"""Longer than any context a model serves (the seeds run 1M): past it, or non-finite, the
answer is broken."""


async def fetch_models(
    client: EngineClient, shape: Models = DEFAULT_MODELS
) -> tuple[Num, str, str]:
    """``max_model_len`` (or NA with the reason), the base model's id (its served name) and
    its ``root`` (the checkpoint it was loaded from: vLLM's model path or hub name, "" when
    the server gives none), read from ``GET shape.path`` with the keys ``shape`` names (the
    kind's :class:`~sparktop.sources.engines.kinds.Models`); never raises (the caller's
    deadline may cancel it). The answer is read up to 1 MiB."""
    progress = Progress()
    path = shape.path
    try:
        headers = {"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
        async with open_stream(client, path, progress, headers=headers) as response:
            if response.status_code != 200:
                return NA(f"GET {path}: HTTP {response.status_code}"), "", ""
            raw = await read_capped(response, MAX_MODELS_BYTES, progress, raw=True)
            coding = response.headers.get("content-encoding", "")
            entries: Any = loads(inflate(raw, coding, MAX_MODELS_BYTES, "answer"))  # ≤ 1 MiB
            entries = entries.get("data", [])
    except ScrapeFailure as failure:
        return NA(failure.reason), "", ""
    except (HTTPError, ValueError, AttributeError) as exc:
        return NA(f"GET {path}: {describe(exc)}"), "", ""
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get(shape.parent_field) is None:
            length = entry.get(shape.length_field)
            model = clip_identity(str(entry.get(shape.id_field, "")))
            root = entry.get(shape.root_field)
            root = clip_identity(root) if isinstance(root, str) else ""
            root = "" if root == model else root
            if isinstance(length, int | float) and not isinstance(length, bool):
                if 0 < length <= MAX_MODEL_LEN:
                    return float(length), model, root
                return (
                    NA(f"{path} says {shape.length_field} {length:.3g}: not plausible"),
                    model,
                    root,
                )
            return NA(f"{path} has no {shape.length_field}"), model, root
    return NA(f"{path} lists no base model"), "", ""


MAX_VERSION_BYTES = 4096
"""A ``/version`` answer is one short JSON object."""


async def fetch_json(
    client: EngineClient,
    path: str,
    cap_bytes: int,
    *,
    status_hint: str = "",
    json_hint: str = "",
) -> Any | NA:
    """``GET path`` read up to ``cap_bytes`` and parsed as JSON, or an ``NA`` naming the
    request and why (HTTP status plus ``status_hint``, transport failure, no JSON plus
    ``json_hint``); never raises (the caller's deadline may cancel it). llama-server's
    ``/props`` and ``/slots`` are read this way."""
    progress = Progress()
    try:
        headers = {"Accept": "application/json"}
        async with open_stream(client, path, progress, headers=headers) as response:
            data = await read_capped(response, cap_bytes, progress)
            if response.status_code != 200:
                return NA(f"GET {path}: HTTP {response.status_code}{status_hint}")
            return loads(data)
    except ScrapeFailure as failure:
        return NA(f"GET {path}: {failure.reason}")
    except ValueError:
        return NA(f"GET {path} answered no JSON{json_hint}")
    except HTTPError as exc:
        return NA(f"GET {path}: {describe(exc)}")


async def fetch_version(client: EngineClient, path: str) -> str:
    """The server's version string from ``GET path`` (``{"version": "0.32.0"}``), printable
    and at most 60 characters; "" when it has none (404, not JSON, no ``version``). Never
    raises (the caller's deadline may cancel it)."""
    progress = Progress()
    try:
        async with open_stream(
            client, path, progress, headers={"Accept": "application/json"}
        ) as response:
            # Read whatever the status (a 404 page too): an unread body closes the connection.
            data = await read_capped(response, MAX_VERSION_BYTES, progress)
            if response.status_code != 200:
                return ""
            answer: Any = loads(data)
    except (ScrapeFailure, HTTPError, ValueError):
        return ""
    version = answer.get("version") if isinstance(answer, dict) else None
    if not isinstance(version, str):
        return ""
    return ascii(version.strip()[:60])[1:-1]
