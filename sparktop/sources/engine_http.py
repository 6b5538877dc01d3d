"""The two HTTP requests an engine source makes, with every failure turned into a reason.

``fetch_metrics``: ``GET /metrics`` streamed (so a body cut off mid-way is told from a server
that never answered), status and content type checked. ``fetch_models``: ``GET /v1/models`` →
``max_model_len`` and id of the base model (the entry with ``parent: null``; LoRA adapters
name their parent). Request headers (and so the bearer token) never appear in a reason.
"""

from __future__ import annotations

import socket
from typing import Any

import httpx

from sparktop.jsontext import loads
from sparktop.model import NA, EngineState, Num

METRICS_PATH = "/metrics"
MODELS_PATH = "/v1/models"
MAX_BODY_BYTES = 32 * 1024 * 1024
"""A /metrics page larger than this is refused (a mis-pointed URL streaming something else)."""


class ScrapeFailure(Exception):
    """A scrape outcome that is not a page: the engine state it means and the reason."""

    def __init__(self, state: EngineState, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


def describe(exc: BaseException) -> str:
    """``TypeName: message`` (or just the type name when the message is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def transport_reason(exc: BaseException) -> str:
    """Why a connection failed, in the words the SSH nodes use (``connection refused``,
    ``cannot resolve host name (…)``, the OS's reason), found in the chain of causes
    under httpx's ``ConnectError: All connection attempts failed``; else :func:`describe`."""
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


def _check_status(response: httpx.Response) -> None:
    status = response.status_code
    if status == 200:
        return
    if status == 404:
        raise ScrapeFailure(
            EngineState.METRICS_DISABLED, "metrics disabled: GET /metrics returned 404"
        )
    if status in (401, 403):
        raise ScrapeFailure(
            EngineState.UNAVAILABLE, f"HTTP {status}: check the bearer token (api_key_env)"
        )
    raise ScrapeFailure(EngineState.UNAVAILABLE, f"HTTP {status} {response.reason_phrase}".rstrip())


async def fetch_metrics(client: httpx.AsyncClient, timeout_s: float) -> str:
    """The ``/metrics`` body as text. Raises :class:`ScrapeFailure` (never anything else
    from httpx): no answer or refused → UNREACHABLE; 404 → METRICS_DISABLED; other status,
    HTML, oversized or cut-off body → UNAVAILABLE."""
    chunks: list[bytes] = []
    try:
        async with client.stream("GET", METRICS_PATH) as response:
            _check_status(response)
            size = 0
            try:
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise ScrapeFailure(
                            EngineState.UNAVAILABLE, "page over 32 MiB: not a /metrics page"
                        )
                    chunks.append(chunk)
            except httpx.TransportError as exc:
                reason = f"body cut off after {size} bytes ({describe(exc)})"
                raise ScrapeFailure(EngineState.UNAVAILABLE, reason) from exc
    except httpx.TimeoutException as exc:
        raise ScrapeFailure(EngineState.UNREACHABLE, f"no answer within {timeout_s:g} s") from exc
    except httpx.TransportError as exc:
        raise ScrapeFailure(EngineState.UNREACHABLE, transport_reason(exc)) from exc
    content_type = response.headers.get("content-type", "")
    text = b"".join(chunks).decode(response.encoding or "utf-8", errors="replace")
    if "html" in content_type.lower() or text.lstrip()[:1] == "<":
        raise ScrapeFailure(
            EngineState.UNAVAILABLE, f"not a metrics page ({content_type or 'HTML'})"
        )
    return text


async def fetch_models(client: httpx.AsyncClient) -> tuple[Num, str]:
    """``max_model_len`` (or NA with the reason) and the base model's id; never raises."""
    try:
        response = await client.get(MODELS_PATH, headers={"Accept": "application/json"})
        if response.status_code != 200:
            return NA(f"GET {MODELS_PATH}: HTTP {response.status_code}"), ""
        entries: Any = loads(response.content).get("data", [])
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return NA(f"GET {MODELS_PATH}: {describe(exc)}"), ""
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("parent") is None:
            length = entry.get("max_model_len")
            model = str(entry.get("id", ""))
            if isinstance(length, int | float) and not isinstance(length, bool) and length > 0:
                return float(length), model
            return NA(f"{MODELS_PATH} has no max_model_len"), model
    return NA(f"{MODELS_PATH} lists no base model"), ""
