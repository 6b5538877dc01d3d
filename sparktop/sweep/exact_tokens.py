"""Exact token counters: a running server's ``POST {url}/tokenize`` or a local ``tokenizer.json``.

Used through :mod:`sparktop.sweep.tokens` (``count_via_endpoint``, ``count_via_tokenizer``) and
by ``sparktop budget`` as the ``exact`` counter of a file or directory scan.
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path

from sparktop.errors import RuntimeFailure, UserError
from sparktop.jsontext import loads
from sparktop.model import NA
from sparktop.sweep.tokens import Counter_, TokenCount, count_chars

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


class EndpointTokenizer:
    """Exact counts from a running server's ``POST {url}/tokenize`` (one HTTP/1.1 connection).

    Calling it returns the ``count`` field; ``max_model_len`` keeps what the server reported.
    Raises :class:`RuntimeFailure` when the server is unreachable or answers badly.
    """

    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = 30.0) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.max_model_len: int | NA = NA("not reported by /tokenize")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(base_url=self.url, timeout=timeout_s, headers=headers)

    def __call__(self, text: str) -> int:
        import httpx

        try:
            response = self._client.post("/tokenize", json={"prompt": text})
        except httpx.HTTPError as exc:
            raise RuntimeFailure(
                f"endpoint {self.url} unreachable ({connect_reason(exc)})"
            ) from None
        if response.status_code != 200:
            raise RuntimeFailure(
                f"{self.url}/tokenize answered HTTP {response.status_code}: "
                f"{response.text.strip()[:120]}"
            )
        try:
            data = loads(response.content)
            count = data["count"] if "count" in data else len(data["tokens"])
        except (ValueError, KeyError, TypeError):
            raise RuntimeFailure(f"{self.url}/tokenize returned no token count") from None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise RuntimeFailure(f"{self.url}/tokenize returned an invalid count {count!r}")
        mml = data.get("max_model_len")
        if isinstance(mml, int) and not isinstance(mml, bool) and mml > 0:
            self.max_model_len = mml
        return count

    def close(self) -> None:
        self._client.close()


def count_with_endpoint(url: str, text: str, api_key: str | None = None) -> TokenCount:
    """Exact token count of ``text`` from ``POST {url}/tokenize``; RuntimeFailure when down."""
    tokenizer = EndpointTokenizer(url, api_key)
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


def load_tokenizer(path: str | Path) -> Counter_:
    """A counter backed by a local ``tokenizer.json`` (HF ``tokenizers``; no special tokens).

    Raises :class:`UserError` when the library is missing or the file cannot be loaded.
    """
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
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # the library raises a bare Exception for bad JSON
        raise UserError(f"cannot load tokenizer {file}: {str(exc)[:160]}") from None
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
