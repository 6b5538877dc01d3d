"""A small async client for Prometheus's HTTP API: ``POST /api/v1/query`` (instant queries).

httpx does the HTTP; a pydantic TypeAdapter checks the JSON answer (``status``, ``data.resultType``,
``data.result[].metric`` / ``value``, ``warnings``), so a proxy's HTML page, a cut-off body or
a ``"status": "error"`` answer becomes one :class:`PromFailure` with the reason, never an
exception from deep inside the parser. The query goes in a form body, so a long batched
query never hits a URL length limit. The bearer token is sent as a header and never appears
in a reason. An answer is refused while it is read, before any parsing, past 64 MiB or
:data:`MAX_SERIES` series (a query matching far more than intended); the whole query has one
deadline (``timeout_s``), not one per read, so a server trickling its answer is cut off; and
the answer is parsed in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, NoReturn, NotRequired

import httpx
import orjson
from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json
from typing_extensions import TypedDict

from sparktop import heap
from sparktop.sources.engines.http import ACCEPT_ENCODING, ScrapeFailure, describe, inflate

QUERY_PATH = "/api/v1/query"
MAX_BODY_BYTES = 64 * 1024 * 1024
MAX_SERIES = 50_000
"""Series one answer may hold. A 256-node inventory's answers hold ~5,000 and ~13,000; an
answer of hundreds of thousands (a label filter gone wrong) took seconds to parse and
hundreds of MB, so it is refused while it is read."""
DERIVED_LABEL = "sparktop_series"
"""A series sparktop's query derived carries its name here; it is read as ``sparktop:NAME``."""


class PromFailure(Exception):
    """A query that gave no usable answer. ``unreachable``: no connection or no answer in
    time; otherwise Prometheus (or something in front of it) answered with an error."""

    def __init__(
        self, reason: str, *, unreachable: bool = False, refused: bool = False, silent: bool = False
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.unreachable = unreachable
        self.refused = refused
        """An answer over a cap: asking again at once would get the same (it is backed off)."""
        self.silent = silent
        """Connected, but no complete answer within the deadline (hung or trickling)."""

    def message(self, url: str) -> str:
        """The reason as a row shows it: ``Prometheus not answering (URL): …`` for a server
        that took the query and gave no complete answer in time, else ``Prometheus URL: …``."""
        if self.silent:
            return f"Prometheus not answering ({url}): {self.reason}"
        return f"Prometheus {url}: {self.reason}"


class _Data(TypedDict):
    resultType: Literal["vector", "scalar", "matrix", "string"]
    result: list[Any]


class _Answer(TypedDict):
    status: Literal["success", "error"]
    data: NotRequired[_Data]
    errorType: NotRequired[str]
    error: NotRequired[str]
    warnings: NotRequired[list[str]]


_ANSWER = TypeAdapter(_Answer)
"""The envelope, for the reason an answer that is not a vector is refused. A vector answer
is decoded and checked by hand in :func:`parse_answer`, its elements too: validating 4,000
of them per tick costs 2-3× the JSON decoding itself."""


class Series(NamedTuple):
    """One element of an instant vector: metric name (``""`` when a function dropped it),
    the other labels, the value (may be NaN) and the evaluation time (Unix seconds). A
    named tuple: thousands are made per tick, and a frozen dataclass costs 3× as much."""

    name: str
    labels: Mapping[str, str]
    value: float
    time_s: float

    @property
    def finite(self) -> bool:
        return math.isfinite(self.value)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """An instant vector, Prometheus's warnings (a partial answer), and the round trip, s."""

    series: tuple[Series, ...]
    warnings: tuple[str, ...]
    latency_s: float


_new_series = tuple.__new__
"""Builds a :class:`Series` without the named tuple's Python-level ``__new__`` (thousands a
tick)."""


def _vector(answer: object) -> tuple[list[Any], list[str]] | None:
    """(result, warnings) of a well-formed ``success`` vector answer, else None. Every check
    the envelope's TypeAdapter makes, by hand on the decoded object: the adapter builds the
    whole answer a second time, which cost 2-3× the decoding itself."""
    if type(answer) is not dict or answer.get("status") != "success":
        return None
    data, warnings = answer.get("data"), answer.get("warnings", [])
    if type(data) is not dict or data.get("resultType") != "vector":
        return None
    result = data.get("result")
    if type(result) is not list or type(warnings) is not list:
        return None
    if not all(type(w) is str for w in warnings) or not all(
        type(answer.get(key, "")) is str for key in ("errorType", "error")
    ):
        return None
    return result, warnings


def _lenient(body: bytes) -> object:
    """``body`` read by pydantic-core's JSON reader (None if it cannot): it takes what orjson
    refuses (``NaN``, ``Infinity``, numbers past a double), so such an answer reads as it did
    before orjson."""
    try:
        return from_json(body)
    except ValueError:
        return None


def parse_answer(body: bytes, status_code: int, latency_s: float = 0.0) -> QueryResult:
    """Check and convert one ``/api/v1/query`` answer; :class:`PromFailure` if unusable."""
    try:
        decoded: object = orjson.loads(body)  # 60 % of pydantic-core's time on an answer
    except ValueError:
        decoded = _lenient(body)
    vector = _vector(decoded)
    if vector is None:
        _refuse(body, status_code)
    result, warnings = vector
    series: list[Series] = []
    append = series.append
    try:
        for item in result:
            labels = item["metric"]  # a fresh dict from the decoder: ours to change
            at, text = item["value"]
            if type(labels) is not dict or type(text) is not str:
                raise TypeError
            name = labels.pop("__name__", "")
            if DERIVED_LABEL in labels:
                name = "sparktop:" + labels.pop(DERIVED_LABEL)
            try:
                value = float(text)  # Prometheus writes "NaN", "+Inf", "-Inf"; float() reads them
            except ValueError:
                value = math.nan
            append(_new_series(Series, (name, labels, value, float(at))))
    except (TypeError, KeyError, ValueError):
        raise PromFailure("malformed instant vector") from None
    return QueryResult(tuple(series), tuple(w[:200] for w in warnings), latency_s)


def _refuse(body: bytes, status_code: int) -> NoReturn:
    """Why an answer that is not a well-formed vector is unusable, as :class:`PromFailure`."""
    try:
        answer = _ANSWER.validate_json(body)
    except ValidationError:
        snippet = body[:80].decode("utf-8", "replace")
        looks = "an HTML page" if snippet.lstrip().startswith("<") else "not a Prometheus answer"
        raise PromFailure(f"HTTP {status_code}, {looks}") from None
    if answer["status"] == "error":
        kind = answer.get("errorType") or f"HTTP {status_code}"
        raise PromFailure(f"query refused ({kind}): {answer.get('error', '')[:200]}")
    data = answer.get("data")
    kind = data["resultType"] if data else "no data"
    raise PromFailure(f"expected an instant vector, got {kind}")


def _too_many(read_bytes: int) -> PromFailure:
    return PromFailure(
        f"answer refused: over {MAX_SERIES:,} series (the cap) in its first "
        f"{read_bytes / 1e6:.1f} MB: the query matches far more than the inventory's targets",
        refused=True,
    )


def _decode(body: bytes, coding: str, status_code: int, latency_s: float) -> QueryResult:
    """A compressed answer inflated (at most 64 MiB, a MiB per step) and its series counted
    before parsing; then :func:`parse_answer`. Run in a worker thread."""
    if coding:
        try:
            body = inflate(body, coding, MAX_BODY_BYTES, "answer: the query matches too much")
        except ScrapeFailure as failure:
            raise PromFailure(failure.reason, refused=failure.refused) from None
        if SeriesCounter().feed(body) > MAX_SERIES:
            raise _too_many(len(body))
    return parse_answer(body, status_code, latency_s)


_FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}


def is_loopback_url(url: str) -> bool:
    """True when ``url`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_VALUE_KEY = re.compile(rb'"value"[ \t\r\n]{0,8}:[ \t\r\n]{0,8}\[')
"""One per element of an instant vector: a label's value is a string, never an array."""


_VALUE_NAME = b'"value"'
"""In every ``"value": [``: counted by a C search at a third of the regex's cost."""


EXACT_FROM = 8192
"""``"value"`` strings after which :class:`SeriesCounter` counts series exactly: a 256-node
node answer holds ~2,800; searching the first 8,192 series' ~2 MB at once takes a few ms."""


def _count(pattern: bytes | None, data: bytes) -> int:
    """Non-overlapping ``"value"`` (``pattern``) or ``"value": [`` (None) in ``data``."""
    return data.count(pattern) if pattern else len(_VALUE_KEY.findall(data))


class SeriesCounter:
    """Counts the series of an instant-vector answer as its chunks arrive (``"value": [``,
    also when split across two chunks), so an oversized answer is refused before parsing.

    While the ``"value"`` strings seen (a bound: a label may be named ``value``) are within
    :data:`EXACT_FROM` (and ``cap``), so are the series, and only they are counted; past it,
    the chunks so far are searched for ``"value": [`` and so is every chunk after. So
    :meth:`feed` passes ``cap`` at the same chunk as an exact count, an answer of up to
    :data:`EXACT_FROM` series is never searched by the regex (a 256-node answer: 0.2 ms a
    tick instead of 0.6), and the one search of the chunks so far stays short (a few MB: it
    holds the event loop)."""

    __slots__ = ("_chunks", "_exact_from", "_pattern", "_seen", "_tail")

    def __init__(self, cap: int = MAX_SERIES) -> None:
        self._exact_from = min(cap, EXACT_FROM)
        self._seen = 0
        self._tail = b""
        self._pattern: bytes | None = _VALUE_NAME
        self._chunks: list[bytes] = []
        """What was fed while counting the bound (references to the caller's chunks)."""

    def feed(self, chunk: bytes) -> int:
        """Add ``chunk``; the series counted so far: exact once past :data:`EXACT_FROM`, else
        at most that (so ``feed(chunk) > cap`` exactly when the series are)."""
        tail = self._tail
        data = tail + chunk
        # a match inside the tail was counted with the previous chunk (matches never overlap:
        # each starts with a quote its predecessor's characters cannot hold)
        pattern = self._pattern
        self._seen += _count(pattern, data) - (_count(pattern, tail) if tail else 0)
        self._tail = data[-32:]
        if pattern is not None:
            self._chunks.append(chunk)
            if self._seen > self._exact_from:
                self._exact()
        return self._seen

    @property
    def count(self) -> int:
        """The series counted so far, exactly."""
        if self._pattern is not None:
            self._exact()
        return self._seen

    def _exact(self) -> None:
        data = b"".join(self._chunks)
        self._pattern, self._chunks = None, []
        self._seen = _count(None, data)
        self._tail = data[-32:]


@dataclass(slots=True)
class _Progress:
    """How far a query got, for the reason when its deadline passes."""

    answered: bool = False
    size: int = 0

    def overdue(self, timeout_s: float) -> str:
        if self.answered:
            return f"answer incomplete after {timeout_s:g} s ({self.size:,} bytes received)"
        return f"accepted the connection, no HTTP response within {timeout_s:g} s"


class PromClient:
    """One keep-alive connection pool to one Prometheus. ``token``: a bearer token."""

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        headers = {"Accept": "application/json"}
        # Over loopback compression saves nothing and costs both sides CPU: inflating a
        # 256-node answer was ~1 ms of the head node's tick, and Prometheus deflates it.
        # Elsewhere only what inflate() reads, and it inflates in the parsing thread.
        headers["Accept-Encoding"] = "identity" if is_loopback_url(self.url) else ACCEPT_ENCODING
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.AsyncClient(
            base_url=self.url,
            timeout=httpx.Timeout(timeout_s),
            headers=headers,
            trust_env=False,  # a proxy meant for the internet must not catch the LAN server
        )
        self._forms: dict[str, bytes] = {}

    def _form(self, expr: str) -> bytes:
        """``expr`` as a form body, encoded once: a batched query for 256 nodes is tens of KB
        and percent-encoding it every tick cost more than sending it."""
        body = self._forms.get(expr)
        if body is None:
            if len(self._forms) >= 16:  # a hub sends two fixed queries; bound it anyway
                self._forms.clear()
            body = self._forms[expr] = urllib.parse.urlencode({"query": expr}).encode()
        return body

    async def query(self, expr: str) -> QueryResult:
        """Evaluate ``expr`` now, within ``timeout_s`` overall; :class:`PromFailure` for every
        way it can fail."""
        started = time.perf_counter()
        progress = _Progress()
        try:
            async with asyncio.timeout(self.timeout_s):
                status, body, coding = await self._send(expr, progress)
        except TimeoutError:
            raise PromFailure(progress.overdue(self.timeout_s), silent=True) from None
        except httpx.ConnectTimeout as exc:
            reason = f"no connection within {self.timeout_s:g} s (connect timed out)"
            raise PromFailure(reason, unreachable=True) from exc
        except httpx.TimeoutException as exc:  # connected: a hung or overloaded Prometheus
            raise PromFailure(progress.overdue(self.timeout_s), silent=True) from exc
        except httpx.TransportError as exc:
            raise PromFailure(describe(exc), unreachable=True) from exc
        if status in (401, 403):
            raise PromFailure(f"HTTP {status}: check bearer_token_env")
        # Inflating and decoding are CPU-bound (bounded by the caps): off the event loop.
        latency_s = time.perf_counter() - started
        return await asyncio.to_thread(_decode, body, coding, status, latency_s)

    async def _send(self, expr: str, progress: _Progress) -> tuple[int, bytes, str]:
        """(status, body as sent, its Content-Encoding or ""), refused past the byte cap and,
        for an uncompressed body, the series cap, both while it is read."""
        async with self._client.stream(
            "POST", QUERY_PATH, content=self._form(expr), headers=_FORM_HEADERS
        ) as response:
            progress.answered = True
            coding = response.headers.get("content-encoding", "").strip().lower()
            plain = coding in ("", "identity")
            chunks: list[bytes] = []
            counter = SeriesCounter()
            async for chunk in response.aiter_raw():  # httpx would inflate on the event loop
                progress.size += len(chunk)
                if progress.size > MAX_BODY_BYTES:
                    raise PromFailure(
                        "answer over 64 MiB: the query matches too much", refused=True
                    )
                if plain and counter.feed(chunk) > MAX_SERIES:
                    raise _too_many(progress.size)
                chunks.append(chunk)
                if progress.size >= heap.BIG_BYTES:
                    heap.big_buffer()  # big answers' buffers unmapped when freed
        return response.status_code, b"".join(chunks), "" if plain else coding

    async def aclose(self) -> None:
        await self._client.aclose()
