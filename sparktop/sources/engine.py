"""An inference server as a poll source: ``GET {url}/metrics`` → :class:`EngineSample`.

One ``httpx.AsyncClient`` per engine (keep-alive, timeouts, redirects followed so
``/metrics`` → ``/metrics/`` works, ``Accept: text/plain``), an optional bearer token read from
the environment variable the inventory names (never logged, never put in a message), and
``GET /v1/models`` once per connection for ``max_model_len`` (the entry with ``parent: null``).

Failures are values, never exceptions: timeout or refused connection → UNREACHABLE; 404 →
METRICS_DISABLED; 5xx, an HTML page, a body cut off mid-way or a page without engine metrics
→ UNAVAILABLE, each with the reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import httpx

from sparktop.model import NA, EngineSample, EngineState, Num
from sparktop.sources.metrics import MetricsDeriver
from sparktop.sources.pool import Limits
from sparktop.sources.vllm import parse_engine_page

METRICS_PATH = "/metrics"
MODELS_PATH = "/v1/models"
MAX_BODY_BYTES = 32 * 1024 * 1024
"""A /metrics page larger than this is refused (a mis-pointed URL streaming something else)."""


class EngineConfigLike(Protocol):
    """What :class:`EngineSource` reads from an inventory engine entry."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def api_key_env(self) -> str | None: ...


class _Failure(Exception):
    """A scrape outcome that is not a page: carries the engine state and the reason."""

    def __init__(self, state: EngineState, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


class EngineSource:
    """Polls one engine's ``/metrics``; ``sample()`` never raises.

    ``profile_limits``: the profile's ``kv_pool_tokens``, ``max_num_seqs``,
    ``max_num_batched_tokens``, ``max_model_len`` (used when the server and the inventory are
    silent). ``window_s``/``stale_after_s`` go to :class:`MetricsDeriver`. ``api_key``
    overrides the token from ``config.api_key_env``. ``clock`` (monotonic seconds) times the
    rate window; tests pass a fake one.
    """

    kind = "engine"

    def __init__(
        self,
        config: EngineConfigLike,
        *,
        profile_limits: Mapping[str, int] | None = None,
        timeout_s: float = 5.0,
        window_s: float = 30.0,
        stale_after_s: float = 60.0,
        api_key: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = config.name
        self.url = config.url.rstrip("/")
        self.engine_kind = getattr(config, "kind", "vllm") or "vllm"
        self._key_env = getattr(config, "api_key_env", None)
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._client: httpx.AsyncClient | None = None
        self._models: tuple[Num, str] | None = None
        self._since: float | None = None
        self._clock = clock
        self.deriver = MetricsDeriver(
            self.name,
            kind=self.engine_kind,
            inventory=Limits.from_config(config),
            profile=Limits.from_mapping(profile_limits),
            window_s=window_s,
            stale_after_s=stale_after_s,
        )

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/plain;version=0.0.4;q=1.0, */*;q=0.1"}
        token = self._api_key or (os.environ.get(self._key_env) if self._key_env else None)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _ensure_client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.url,
                timeout=httpx.Timeout(self._timeout_s),
                follow_redirects=True,
                headers=self._headers(),
                trust_env=False,
            )
        return self._client

    async def sample(self) -> EngineSample:
        """Scrape once and derive a sample (rates over the deriver's window)."""
        wall, started = time.time(), time.perf_counter()
        try:
            text = await self._fetch_metrics()
            if self._models is None:
                self._models = await self._fetch_models()
        except _Failure as failure:
            return await self._failed(wall, started, failure.state, failure.reason)
        except Exception as exc:  # a bug here must not take the poller down
            return await self._failed(
                wall, started, EngineState.UNAVAILABLE, f"{type(exc).__name__}: {exc}"
            )
        page = parse_engine_page(text)
        max_model_len, model = self._models
        sample = self.deriver.derive(
            page,
            now_s=self._clock(),
            wall_s=wall,
            max_model_len=max_model_len,
            model=model,
            latency_s=time.perf_counter() - started,
        )
        if sample.restarted:
            self._models = None  # a new server may serve another model or length
        if sample.state in (EngineState.OK, EngineState.STALE):
            self._since = None
        else:
            self._since = self._since or wall
            sample = replace(sample, since_s=self._since)
        return sample

    async def _failed(
        self, wall: float, started: float, state: EngineState, reason: str
    ) -> EngineSample:
        self._since = self._since or wall
        if state is EngineState.UNREACHABLE:
            await self._drop_connection()
        if state is EngineState.METRICS_DISABLED and self.engine_kind == "sglang":
            reason = "metrics disabled: start SGLang with --enable-metrics"
        return EngineSample(
            engine=self.name,
            time_s=wall,
            state=state,
            message=reason,
            since_s=self._since,
            kind=self.engine_kind,
            latency_s=time.perf_counter() - started,
        )

    async def _drop_connection(self) -> None:
        """A new connection later means a fresh ``/v1/models`` and a fresh baseline."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self._models = None
        self.deriver.reset()

    async def _fetch_metrics(self) -> str:
        client = self._ensure_client()
        try:
            async with client.stream("GET", METRICS_PATH) as response:
                await _check_status(response)
                chunks: list[bytes] = []
                size = 0
                try:
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > MAX_BODY_BYTES:
                            raise _Failure(
                                EngineState.UNAVAILABLE,
                                "metrics page over 32 MiB: not a /metrics page",
                            )
                        chunks.append(chunk)
                except httpx.TransportError as exc:
                    raise _Failure(
                        EngineState.UNAVAILABLE,
                        f"body cut off after {size} bytes ({_describe(exc)})",
                    ) from exc
        except httpx.TimeoutException as exc:
            raise _Failure(
                EngineState.UNREACHABLE, f"no answer within {self._timeout_s:g} s"
            ) from exc
        except httpx.TransportError as exc:
            raise _Failure(EngineState.UNREACHABLE, _describe(exc)) from exc
        body = b"".join(chunks)
        content_type = response.headers.get("content-type", "")
        text = body.decode(response.encoding or "utf-8", errors="replace")
        if "html" in content_type.lower() or text.lstrip()[:1] == "<":
            raise _Failure(
                EngineState.UNAVAILABLE, f"not a metrics page ({content_type or 'HTML'})"
            )
        return text

    async def _fetch_models(self) -> tuple[Num, str]:
        """``max_model_len`` and id of the base model (``parent: null``) from ``/v1/models``."""
        try:
            response = await self._ensure_client().get(
                MODELS_PATH, headers={"Accept": "application/json"}
            )
            if response.status_code != 200:
                return NA(f"GET {MODELS_PATH}: HTTP {response.status_code}"), ""
            entries: Any = response.json().get("data", [])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            return NA(f"GET {MODELS_PATH}: {_describe(exc)}"), ""
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("parent") is None:
                length = entry.get("max_model_len")
                model = str(entry.get("id", ""))
                if isinstance(length, int | float) and not isinstance(length, bool) and length > 0:
                    return float(length), model
                return NA(f"{MODELS_PATH} has no max_model_len"), model
        return NA(f"{MODELS_PATH} lists no base model"), ""

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def _check_status(response: httpx.Response) -> None:
    status = response.status_code
    if status == 200:
        return
    if status == 404:
        raise _Failure(EngineState.METRICS_DISABLED, "metrics disabled: GET /metrics returned 404")
    if status in (401, 403):
        raise _Failure(
            EngineState.UNAVAILABLE, f"HTTP {status}: check the bearer token (api_key_env)"
        )
    raise _Failure(EngineState.UNAVAILABLE, f"HTTP {status} {response.reason_phrase}".rstrip())


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _OneShotConfig:
    def __init__(self, url: str) -> None:
        self.name = url
        self.url = url
        self.kind = "vllm"
        self.api_key_env: str | None = None


async def scrape_once(
    url: str, *, api_key: str | None = None, timeout_s: float = 5.0
) -> EngineSample:
    """Scrape ``url`` once (``url`` is the server's base URL); never raises.

    Gauges (running, waiting, KV usage, pool, free tokens) and ``max_model_len`` are current;
    rates are NA (one scrape has no window) and quantiles cover the server's lifetime.
    """
    source = EngineSource(_OneShotConfig(url), timeout_s=timeout_s, api_key=api_key)
    try:
        return await source.sample()
    finally:
        await source.aclose()
