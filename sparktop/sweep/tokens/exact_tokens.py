"""Exact token counters: a running server's ``POST {url}/tokenize`` or a local ``tokenizer.json``.

Text counted directly (:func:`count_with_endpoint`, :func:`count_with_tokenizer`), or a counter
passed as the ``exact`` counter of a :mod:`sparktop.sweep.tokens.tokens` file count or
:mod:`sparktop.sweep.tokens.scan` directory scan (``sparktop budget``, the budget pane).
"""

from __future__ import annotations

import errno
import socket
import threading
from pathlib import Path
from typing import Any

from sparktop.errors import RuntimeFailure, UserError
from sparktop.jsontext import loads
from sparktop.model import NA
from sparktop.safe_text import printable
from sparktop.sources.engines.kinds import DEFAULT, KINDS, KindSpec, spec_for
from sparktop.sweep.tokens.tokens import (
    DEFAULT_MAX_SEND_MB,
    CountCancelled,
    Counter_,
    SendCapReached,
    TokenCount,
    count_chars,
    send_cap_note,
)

_ERRNO_REASONS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ETIMEDOUT: "timed out",
    errno.EHOSTUNREACH: "no route to host",
    errno.ENETUNREACH: "network unreachable",
    errno.ECONNRESET: "connection reset",
}


def connect_reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words (``connection refused``, ``timed out``,
    ``host not found``…), from the first OS error in the exception's chain; else its text."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            return "host not found"
        if isinstance(current, TimeoutError) or "Timeout" in type(current).__name__:
            return "timed out"
        if isinstance(current, OSError) and current.errno in _ERRNO_REASONS:
            return _ERRNO_REASONS[current.errno]
        current = current.__cause__ or current.__context__
    return str(exc) or type(exc).__name__


TOKENIZE_DEADLINE_S = 30.0
"""The whole ``POST /tokenize`` exchange (connect, headers, body) must end within this."""
MAX_TOKENIZE_BYTES = 64 * 1024 * 1024
"""A ``/tokenize`` answer larger than this is refused (a token list of a huge prompt is less)."""


async def detect_kind(client: Any) -> KindSpec:
    """Which engine kind answers at ``client``'s base URL: the first kind whose probe path
    (llama.cpp ``GET /props``) answers 200 with a JSON object; else vLLM's (whose
    ``/tokenize`` SGLang shares). ``client`` is an ``httpx.AsyncClient``; never raises
    for a server that answers badly (the count itself then says what went wrong)."""
    import httpx

    for spec in KINDS.values():
        if spec is DEFAULT or not spec.probe_path:
            continue
        data = bytearray()
        try:
            headers = {"Accept": "application/json"}
            async with client.stream("GET", spec.probe_path, headers=headers) as response:
                if response.status_code != 200:
                    continue
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_PROBE_BYTES:
                        break
            if len(data) <= MAX_PROBE_BYTES and isinstance(loads(bytes(data)), dict):
                return spec
        except (httpx.HTTPError, ValueError):
            continue
    return DEFAULT


MAX_PROBE_BYTES = 1024 * 1024
"""A probe answer (llama.cpp's ``/props``, with its chat template) is a few KiB."""


class EndpointTokenizer:
    """Exact counts from a running server's ``POST {url}/tokenize`` (one HTTP/1.1 connection).

    ``kind`` (a key of :data:`~sparktop.sources.engines.kinds.KINDS`) says the request and answer
    shapes (vLLM ``{"prompt"}`` → ``{"count"}``, llama.cpp ``{"content"}`` →
    ``{"tokens"}``); None finds out on the first call (:func:`detect_kind`).
    Calling it returns the count; ``max_model_len`` keeps what the server reported.
    Raises :class:`RuntimeFailure` when the server is unreachable, answers badly, redirects
    (not followed), answers no tokens for non-empty text (a request of the wrong shape:
    llama.cpp answers ``{"tokens": []}`` to vLLM's), or has not finished answering within
    ``deadline_s``. A failure never quotes the server's body, and the bearer token is
    redacted from it. At most ``max_send_bytes`` of text (UTF-8) is sent over the counter's
    life: a call that would pass it raises :class:`SendCapReached` without sending; a call
    made once ``cancel`` is set raises :class:`CountCancelled`.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        deadline_s: float | None = None,
        kind: str | None = None,
        max_send_bytes: int = DEFAULT_MAX_SEND_MB * 1024 * 1024,
        cancel: threading.Event | None = None,
    ) -> None:
        import asyncio

        import httpx

        self.url = url.rstrip("/")
        self.max_model_len: int | NA = NA("not reported by /tokenize")
        self._api_key = api_key
        self.spec: KindSpec | None = spec_for(kind) if kind else None
        self._deadline_s = deadline_s or TOKENIZE_DEADLINE_S
        self._timeout_s = timeout_s
        self.max_send_bytes = max_send_bytes
        self.sent_bytes = 0
        self._listened = False  # whether the server was heard not to speak first
        self._cancel = cancel
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # One event loop kept across calls (a directory scan asks once per file), so the
        # whole exchange can have a deadline: a sync client only bounds each read.
        self._runner = asyncio.Runner()
        self._client = httpx.AsyncClient(
            base_url=self.url, timeout=timeout_s, headers=headers, follow_redirects=False
        )

    def _slow(self, seconds: float) -> str:
        return f"{self.url}/tokenize did not answer within {seconds:g} s"

    def _fail(self, text: str) -> RuntimeFailure:
        if self._api_key and len(self._api_key) >= 4:
            text = text.replace(self._api_key, "<redacted>")
        return RuntimeFailure(text)

    def __call__(self, text: str) -> int:
        if self._cancel is not None and self._cancel.is_set():
            raise CountCancelled(self.url)
        size = len(text.encode("utf-8", "surrogatepass"))
        if self.sent_bytes + size > self.max_send_bytes:
            raise SendCapReached(send_cap_note(self.max_send_bytes, flag=False))
        self.sent_bytes += size
        return self._runner.run(self._count(text))

    async def _post(self, text: str) -> tuple[int, bytes]:
        if self.spec is None:
            self.spec = await detect_kind(self._client)
        shape = self.spec.tokenize
        async with self._client.stream("POST", shape.path, json=shape.request(text)) as response:
            if response.status_code != 200:
                return response.status_code, b""
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > MAX_TOKENIZE_BYTES:
                    raise self._fail(f"{self.url}/tokenize answer over 64 MiB; refused")
            return 200, bytes(data)

    async def _count(self, text: str) -> int:
        import asyncio

        import httpx

        from sparktop.sources.engines.banner import OtherProtocol, unless_spoke_first

        try:
            async with asyncio.timeout(self._deadline_s):
                if self._listened:
                    status, body = await self._post(text)
                else:  # an SSH port is told at once, not after the deadline
                    status, body = await unless_spoke_first(self.url, self._post(text))
                    self._listened = True
        except OtherProtocol as other:
            raise self._fail(f"endpoint {self.url} is {other.reason}") from None
        except TimeoutError:
            raise self._fail(self._slow(self._deadline_s)) from None
        except httpx.TimeoutException as exc:
            # Connected (or connecting) but no answer in time: a slow server, not a dead one.
            if isinstance(exc, httpx.ConnectTimeout):
                raise self._fail(f"endpoint {self.url} unreachable (connect timed out)") from None
            raise self._fail(self._slow(self._timeout_s)) from None
        except httpx.HTTPError as exc:
            raise self._fail(f"endpoint {self.url} unreachable ({connect_reason(exc)})") from None
        if 300 <= status < 400:
            raise self._fail(
                f"{self.url}/tokenize answered HTTP {status} (a redirect): not followed; "
                "pass the server's own URL"
            )
        if status != 200:
            # Never the body: a server may echo the request, bearer token included.
            raise self._fail(f"{self.url}/tokenize answered HTTP {status}")
        shape = (self.spec or DEFAULT).tokenize
        try:
            data = loads(body)
            if shape.count_field and shape.count_field in data:
                count = data[shape.count_field]
            else:
                count = len(data[shape.tokens_field])
        except (ValueError, KeyError, TypeError):
            raise self._fail(f"{self.url}/tokenize returned no token count") from None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise self._fail(f"{self.url}/tokenize returned an invalid count")
        if count == 0 and text.strip():
            # No text tokenizes to nothing: the server did not read the text we sent.
            raise self._fail(
                f"the server's /tokenize returned no tokens for {len(text):,} characters: "
                f'wrong request shape? (sent {{"{shape.text_field}": …}} as '
                f"{(self.spec or DEFAULT).label}'s; pass --kind)"
            )
        mml = data.get("max_model_len")
        if isinstance(mml, int) and not isinstance(mml, bool) and mml > 0:
            self.max_model_len = mml
        return count

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


def count_with_endpoint(
    url: str,
    text: str,
    api_key: str | None = None,
    kind: str | None = None,
    max_send_bytes: int = DEFAULT_MAX_SEND_MB * 1024 * 1024,
) -> TokenCount:
    """Exact token count of ``text`` from ``POST {url}/tokenize`` (``kind``, ``max_send_bytes``:
    as :class:`EndpointTokenizer`); RuntimeFailure when down or answering no tokens,
    :class:`SendCapReached` when ``text`` is over the cap (nothing is sent)."""
    tokenizer = EndpointTokenizer(url, api_key, kind=kind, max_send_bytes=max_send_bytes)
    try:
        tokens = tokenizer(text)
    finally:
        tokenizer.close()
    cjk, other = count_chars(text)
    return TokenCount(
        tokens=tokens,
        method="exact (/tokenize)",
        source=url,
        cjk_chars=cjk,
        other_chars=other,
        chars_per_token=NA("exact count"),
        max_model_len=tokenizer.max_model_len,
    )


def open_tokenizer(path: str | Path) -> Any:
    """The HF ``tokenizers.Tokenizer`` of a local ``tokenizer.json`` (a folder means its
    ``tokenizer.json``). Raises :class:`UserError` when the library is missing or the file
    cannot be loaded; the library's message is made printable."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise UserError(
            "--tokenizer needs the 'tokenizers' library: pip install 'sparktop[tokenizers]'"
        ) from None
    file = Path(path).expanduser()
    if file.is_dir():
        file = file / "tokenizer.json"
    if not file.is_file():
        raise UserError(f"tokenizer file {file} not found")
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # the library raises a bare Exception for bad JSON
        raise UserError(f"cannot load tokenizer {file}: {printable(str(exc)[:160])}") from None


def load_tokenizer(path: str | Path) -> Counter_:
    """A counter backed by a local ``tokenizer.json`` (HF ``tokenizers``; no special tokens).

    Raises :class:`UserError` when the library is missing or the file cannot be loaded.
    """
    tokenizer = open_tokenizer(path)
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


def count_with_tokenizer(path: str | Path, text: str) -> TokenCount:
    """Exact token count of ``text`` with a local ``tokenizer.json``."""
    tokens = load_tokenizer(path)(text)
    cjk, other = count_chars(text)
    return TokenCount(
        tokens=tokens,
        method="exact (tokenizer.json)",
        source=str(path),
        cjk_chars=cjk,
        other_chars=other,
        chars_per_token=NA("exact count"),
    )
