"""An inference server as a poll source: ``GET {url}/metrics`` → :class:`EngineSample`.

One :class:`~sparktop.sources.engines.wire.EngineClient` per engine (keep-alive, timeouts,
redirects followed only within the engine's origin so ``/metrics`` → ``/metrics/`` works,
``Accept: text/plain``, no proxy from the environment: one meant for the internet must not
catch a 10.x engine), an optional
bearer token read from the environment variable the inventory names (never logged, and
redacted from every message), and ``GET /v1/models`` once per connection for
``max_model_len`` (the entry with ``parent: null``), with the kind's version path (vLLM's
``GET /version``) for ``EngineSample.server_version``.

Bounded: each network step has ``timeout_s`` and the whole scrape (both requests, headers and
body) one deadline (``deadline_s``, default twice that), so a server that trickles its answer
is given up on; the body is inflated (gzip, at most 32 MiB out), decoded and parsed in a
worker thread within :class:`~sparktop.sources.exposition.text.ParseBounds`, so a huge page or a
gzip bomb never blocks the event loop. A page refused as over a cap is asked for again after
2, 4, 8 … up to :data:`BACKOFF_MAX_S` s, not every tick (the row keeps saying why).

Failures are values, never exceptions: no answer within the deadline or refused connection →
UNREACHABLE; 404 → METRICS_DISABLED; 5xx, an HTML page, an answer started but not finished
in time, a body cut off mid-way, a redirect elsewhere, a page that is invalid or over a bound
or without engine metrics → UNAVAILABLE, each with the reason.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from sparktop import heap
from sparktop.model import NA, EngineSample, EngineState, Num, is_num
from sparktop.safe_text import without_credentials
from sparktop.sources.engines.banner import spoke_first
from sparktop.sources.engines.http import (
    ACCEPT_ENCODING,
    AUTH_HINT,
    Body,
    Progress,
    ScrapeFailure,
    auth_hint,
    describe,
    fetch_metrics,
    fetch_models,
    fetch_version,
    no_answer,
)
from sparktop.sources.engines.kinds import DEFAULT, spec_for
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.pool import Limits, for_command_line
from sparktop.sources.engines.props import Props, fetch_props
from sparktop.sources.engines.reading import parse_engine_page
from sparktop.sources.engines.slots import fetch_slot_prompts
from sparktop.sources.engines.wire import EngineClient, split_url
from sparktop.sources.exposition.page import PromPage

ACCEPT = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"


class EngineConfigLike(Protocol):
    """What :class:`EngineSource` reads from an inventory engine entry (``EngineConfig``)."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def api_key_env(self) -> str | None: ...


BACKOFF_MAX_S = 60.0
"""Longest wait before scraping again a page refused as over a cap."""
FIRST_WINDOW_STEP_S = 1.0
"""Scrape period across a one-shot command's window (the monitor's default interval)."""
SCRAPE_TIMEOUT_S = 5.0
"""Default bound on each network step of a scrape (connect, each read), seconds."""
SCRAPE_DEADLINE_S = 2 * SCRAPE_TIMEOUT_S
"""Default bound on one whole scrape (``/metrics``, and ``/v1/models`` and the version on
the first), seconds."""


class EngineSource:
    """Polls one engine's ``/metrics``; ``sample()`` never raises.

    ``inventory_limits`` (default: the entry's own) and ``profile_limits`` (from the plan) are
    used when the server is silent, in that order. ``window_s``/``stale_after_s`` go to
    :class:`MetricsDeriver`. ``api_key`` overrides the token from ``config.api_key_env``.
    ``first_window_s`` > 0 makes a sample without earlier history scrape across that long
    a window (every :data:`FIRST_WINDOW_STEP_S`), so one-shot users (``snapshot``) get rates
    and the window's load as the monitor sees it; ``clock`` (monotonic seconds) times
    the rate window, tests pass a fake one. ``named_on``: ``inventory``, or where an engine
    without one was named (``endpoint``: ``--endpoint``; ``local``: the server found on the
    usual port): its hints then name the flags (``--api-key-env``), not inventory keys.
    """

    kind = "engine"

    def __init__(
        self,
        config: EngineConfigLike,
        *,
        inventory_limits: Limits | None = None,
        profile_limits: Limits | None = None,
        timeout_s: float = SCRAPE_TIMEOUT_S,
        deadline_s: float | None = None,
        window_s: float = 30.0,
        stale_after_s: float = 60.0,
        first_window_s: float = 0.0,
        api_key: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        named_on: str = "inventory",
    ) -> None:
        self.name = config.name
        self._named_on = named_on
        self.url = config.url.rstrip("/")
        self.engine_kind = config.kind or DEFAULT.kind
        # A kind the inventory or --kind states is read as stated; otherwise the page says.
        declared = "kind" in getattr(config, "model_fields_set", ())
        self.first_window_s = first_window_s
        self._key_env = config.api_key_env
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._deadline_s = deadline_s or 2 * timeout_s
        self._client: EngineClient | None = None
        self._models: tuple[Num, str, str] | None = None
        self._version: str | None = None
        self._props: Props | None = None
        self._slot_prompt = 0.0  # the last mean prompt length read on /slots
        self._since: float | None = None
        self._clock = clock
        self._refused = False  # the last scrape's page was over a cap
        self._backoff_s = 0.0
        self._held: EngineSample | None = None  # the refusal repeated until ``_retry_at``
        self._retry_at = 0.0
        self.deriver = MetricsDeriver(
            self.name,
            kind=self.engine_kind,
            declared=declared,
            inventory=inventory_limits or Limits.from_config(config),
            profile=profile_limits or Limits(),
            # The whole one-shot window stays in the rate window, however long it is.
            window_s=max(window_s, first_window_s + FIRST_WINDOW_STEP_S),
            stale_after_s=stale_after_s,
        )

    def _client_now(self) -> EngineClient:
        if self._client is None:
            headers = {"Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}
            token = self._token()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self._client = EngineClient(self.url, timeout_s=self._timeout_s, headers=headers)
        return self._client

    async def sample(self) -> EngineSample:
        """Scrape once; without history yet and with ``first_window_s``, every
        :data:`FIRST_WINDOW_STEP_S` across that window, the last sample returned."""
        if self.first_window_s <= 0 or self.deriver.has_history:
            return await self._scrape()
        first = last = await self._scrape()
        if not first.answered:
            return first
        # Every second across the window, as the monitor scrapes: the window's load (the
        # running counts it held, the waiting peak) is read from the scrapes in it, not
        # from its two ends.
        loop = asyncio.get_running_loop()
        end = loop.time() + self.first_window_s
        while (left := end - loop.time()) > 0:
            await asyncio.sleep(min(FIRST_WINDOW_STEP_S, left))
            last = await self._scrape()
            if not last.answered:
                return last
        return last

    def _token(self) -> str | None:
        return self._api_key or (os.environ.get(self._key_env) if self._key_env else None)

    def _redact(self, sample: EngineSample) -> EngineSample:
        """The sample with the bearer token replaced wherever a server put it (a message
        quoting a redirect, a model name): a secret never reaches output or recordings."""
        token = self._token()
        if not token or len(token) < 4:
            return sample
        fields = {
            k: getattr(sample, k).replace(token, "<redacted>")
            for k in ("message", "model")
            if token in getattr(sample, k)
        }
        return replace(sample, **fields) if fields else sample

    async def _scrape(self) -> EngineSample:
        now = self._clock()
        if self._held is not None and now < self._retry_at:
            return replace(self._held, time_s=time.time())
        self._refused = False
        # A big page's bytes count in the process's budget until it is parsed or given up.
        ticket = heap.Ticket()
        try:
            sample = self._redact(await self._scrape_raw(Progress(ticket=ticket)))
        finally:
            heap.IN_FLIGHT.release(ticket)
        if self._named_on != "inventory":
            sample = for_command_line(sample)
        if not self._refused:
            self._held, self._backoff_s = None, 0.0
            return sample
        # The same oversized page would be fetched and refused every tick (0.4 CPU s/s
        # for a 31 MB page): ask again later, doubling the wait.
        self._backoff_s = min(BACKOFF_MAX_S, 2 * self._backoff_s or 2.0)
        self._retry_at = now + self._backoff_s
        # The refusal itself promises nothing (a one-shot command never asks again); the
        # repeats carry the pause, not a countdown that an event log would freeze.
        note = f"; backing off up to {self._backoff_s:g} s"
        self._held = replace(sample, message=sample.message + note)
        return sample

    async def _scrape_raw(self, progress: Progress) -> EngineSample:
        wall, started = time.time(), time.perf_counter()
        try:
            client = self._client_now()
            async with asyncio.timeout(self._deadline_s):
                body = await fetch_metrics(client, self._timeout_s, progress)
                # When the page was read: /v1/models and /version after it (first scrape)
                # must not shorten the rate window the page's counters are divided by.
                read_at = self._clock()
                spec = spec_for(self.engine_kind)
                if self._models is None:
                    self._models = await fetch_models(client, spec.models)
                if self._version is None:
                    path = spec.version_path
                    self._version = await fetch_version(client, path) if path else ""
        except ScrapeFailure as failure:
            self._refused = failure.refused
            reason = failure.reason
            if reason.endswith(AUTH_HINT):
                hint = auth_hint(
                    self._key_env, self._api_key is not None, self._named_on,
                    without_credentials(self.url),
                )  # fmt: skip
                reason = reason.removesuffix(AUTH_HINT) + hint
            state = failure.state
            if failure.no_response:
                state, reason = await _not_http(self.url, state, reason)
            return await self._failed(wall, started, state, reason)
        except TimeoutError:
            state, reason = _overdue(progress, self._deadline_s)
            await self._drop_connection()  # the half-read answer is not reused
            if state is EngineState.NOT_ANSWERING:
                state, reason = await _not_http(self.url, state, reason)
            return await self._failed(wall, started, state, reason)
        except Exception as exc:  # a bug here must not take the poller down
            return await self._failed(wall, started, EngineState.UNAVAILABLE, describe(exc))
        max_model_len, model, root = self._models
        # Decoding and parsing are CPU-bound (bounded by ParseBounds): off the event loop.
        try:
            page = await asyncio.to_thread(read_engine_body, body)
        except ScrapeFailure as failure:  # a bomb or corrupt body, found while inflating
            self._refused = failure.refused
            return await self._failed(wall, started, failure.state, failure.reason)
        self._refused = page.refused
        props_path = spec_for(self.deriver.kind_of(page)).props_path
        if props_path and self._props is None:
            # The kind is known only from the page: llama.cpp's limits are on /props.
            try:
                async with asyncio.timeout(self._deadline_s):
                    self._props = await fetch_props(self._client_now(), props_path)
            except TimeoutError:
                self._props = Props()
            if not self._version:
                self._version = self._props.version
        sample = self.deriver.derive(
            page,
            now_s=read_at,
            wall_s=wall,
            max_model_len=max_model_len,
            model=model,
            model_root=root,
            latency_s=time.perf_counter() - started,
            server_version=self._version or "",
            props=self._props.limits if self._props else None,
        )
        slots_path = spec_for(self.deriver.kind_of(page)).slots_path
        if slots_path and sample.answered:
            sample = await self._slot_prompts(sample, slots_path)
        if sample.restarted:
            self._models = None  # a new server may serve another model or length
            self._version = None
            self._props = None
            self._slot_prompt = 0.0
        if sample.answered:
            self._since = None
            return sample
        self._since = self._since or wall
        return replace(sample, since_s=self._since)

    async def _slot_prompts(self, sample: EngineSample, path: str) -> EngineSample:
        """``sample`` with ``mean_prompt_tokens`` from the busy slots now (llama.cpp exports
        no prompt lengths on ``/metrics``); while every busy slot is still in prefill, the
        last mean read; its reason when ``path`` does not say."""
        try:
            async with asyncio.timeout(self._deadline_s):
                mean = await fetch_slot_prompts(self._client_now(), path)
        except TimeoutError:
            mean = NA(f"GET {path}: no answer in {self._deadline_s:g} s")
        if is_num(mean):
            self._slot_prompt = mean
        elif isinstance(mean, NA) and mean.reason.startswith(path) and self._slot_prompt:
            # Every busy slot is in prefill (or just finished): the last prompts read stand.
            mean = self._slot_prompt
        if not is_num(mean) and is_num(sample.mean_prompt_tokens):
            return sample
        since = tuple(f for f in sample.since_start if f != "mean_prompt_tokens")
        return replace(sample, mean_prompt_tokens=mean, since_start=since)

    async def _failed(
        self, wall: float, started: float, state: EngineState, reason: str
    ) -> EngineSample:
        self._since = self._since or wall
        if state in (EngineState.UNREACHABLE, EngineState.NOT_ANSWERING):
            await self._drop_connection()
        if state is EngineState.METRICS_DISABLED:
            # SGLang and llama.cpp serve /metrics only when asked to; vLLM always does, so
            # there a 404 means the URL is not the server's base URL.
            spec = spec_for(self.engine_kind)
            if spec.metrics_hint:
                reason = spec.metrics_404.format(reason=reason, hint=spec.metrics_hint)
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
        await self.aclose()
        self._models = None
        self._version = None
        self._props = None
        self._slot_prompt = 0.0
        self.deriver.reset()

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def read_engine_body(body: Body) -> PromPage:
    """Inflate, decode and parse one ``/metrics`` body (OpenMetrics when its content type
    says so). CPU-bound and bounded; :class:`EngineSource` runs it in a worker thread.
    Raises :class:`ScrapeFailure` for a body that does not inflate within the cap."""
    return parse_engine_page(body.text(), openmetrics=body.openmetrics)


async def _not_http(url: str, state: EngineState, reason: str) -> tuple[EngineState, str]:
    """A server that took the request and sent no HTTP response: if it speaks unasked (an
    SSH banner), or completes a TLS handshake on an ``http`` URL, it answered, in another
    protocol (UNAVAILABLE, saying so); else as it was."""
    other = await spoke_first(url)
    if other is None and url.startswith("http:"):
        # Only for a server already found not to answer HTTP (this module stays off the
        # monitor's start-up path).
        from sparktop.sources.engines.tls import speaks_tls

        if await speaks_tls(split_url(url)[0]):
            other = "not an HTTP server: it speaks TLS (use https:// for this engine)"
    return (EngineState.UNAVAILABLE, other) if other is not None else (state, reason)


def _overdue(progress: Progress, deadline_s: float) -> tuple[EngineState, str]:
    """The state and reason for a scrape whose whole-response deadline passed."""
    if progress.status is None:
        return no_answer(progress, deadline_s)
    return EngineState.UNAVAILABLE, (
        f"answer not complete within {deadline_s:g} s ({progress.size:,} bytes of the page "
        "received): server too slow, given up"
    )


class _OneShotConfig:
    def __init__(self, url: str) -> None:
        self.name = url
        self.url = url
        self.kind = DEFAULT.kind
        self.api_key_env: str | None = None


async def scrape_once(
    url: str, *, api_key: str | None = None, timeout_s: float = 5.0
) -> EngineSample:
    """Scrape ``url`` (the server's base URL) once; never raises.

    Gauges (running, waiting, KV usage, pool, free tokens) and ``max_model_len`` are current;
    rates are NA (one scrape has no window) and quantiles cover the server's lifetime.
    """
    source = EngineSource(_OneShotConfig(url), timeout_s=timeout_s, api_key=api_key)
    try:
        return await source.sample()
    finally:
        await source.aclose()
