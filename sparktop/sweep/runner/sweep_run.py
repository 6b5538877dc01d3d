"""Running a sweep: what the server says about itself, the plan's estimate, the cells.

``sparktop sweep`` (commands/sweep.py) calls :func:`discover` (model, limits, version,
current load), :func:`estimate_plan` (duration from the nearest existing profile) and then
:func:`run_cells`, which measures each cell not yet done and hands it to ``on_cell`` (which
writes it) before starting the next, so an interrupt loses at most the cell in flight.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from sparktop.errors import RuntimeFailure
from sparktop.jsontext import loads
from sparktop.model import NA, is_num
from sparktop.sources.engines.banner import OtherProtocol, unless_spoke_first
from sparktop.sources.engines.http import ScrapeFailure, fetch_metrics, fetch_models
from sparktop.sources.engines.kinds import DEFAULT, KINDS, spec_for
from sparktop.sources.engines.reading import read_page
from sparktop.sources.engines.source import read_engine_body, scrape_once
from sparktop.sweep.estimator.estimator import estimate
from sparktop.sweep.profiles.builtin import builtin_profile_names
from sparktop.sweep.profiles.loader import user_profile_paths
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE, Profile
from sparktop.sweep.runner.bench_client import RequestResult, clean, stream_completion
from sparktop.sweep.runner.bench_prompts import PromptMaker
from sparktop.sweep.runner.server_itl import itl_totals, run_itl_s, scrape_client, with_itl
from sparktop.sweep.runner.sweep_cells import CellRuns
from sparktop.sweep.runner.sweep_state import Plan

WARMUP_OUTPUT_TOKENS = 8
CACHE_INFO_KEYS = (
    "block_size",
    "num_gpu_blocks",
    "kv_cache_size_tokens",
    "gpu_memory_utilization",
    "cache_dtype",
    "enable_prefix_caching",
    "num_cpu_blocks",
)
"""``cache_config_info`` labels kept in the provenance (vLLM's names)."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server reports before the sweep. ``busy`` is running + waiting requests
    (None when /metrics could not tell, ``load_note`` says why)."""

    model: str
    version: str
    max_model_len: int | None
    kv_pool_tokens: int | None
    cache_config: dict[str, str]
    busy: int | None
    load_note: str
    engine: str = ""
    """The engine kind's name (``vLLM``, ``SGLang``, ``llama.cpp``) when /metrics told it."""


def client_for(url: str, headers: dict[str, str], timeout_s: float) -> httpx.AsyncClient:
    """One client for the sweep: generous read timeout (a long prefill sends nothing for
    minutes), which is also each request's overall deadline (``stream_completion``), and a
    pool large enough for the widest cell."""
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    limits = httpx.Limits(max_connections=512, max_keepalive_connections=64)
    return httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout, limits=limits)


DISCOVERY_STEP_S = 30.0
"""Deadline of each request that finds out what the server serves (``/v1/models``,
``/version``, ``/metrics``): the client's own timeout is ``--timeout`` per read (a long
prefill sends nothing for minutes), which would let a server trickling its answer hold the
sweep before it starts."""
MAX_VERSION_BYTES = 64 * 1024


async def _version(client: httpx.AsyncClient) -> str:
    try:
        async with asyncio.timeout(DISCOVERY_STEP_S), client.stream("GET", "/version") as response:
            raw = b""
            async for chunk in response.aiter_bytes():
                raw += chunk
                if len(raw) > MAX_VERSION_BYTES:
                    raise ValueError("over 64 KiB")
            version = loads(raw).get("version") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError, TimeoutError):
        version = None
    return clean(str(version), 60) if version else "n/a (no /version)"


async def _cache_config(client: httpx.AsyncClient) -> dict[str, str]:
    try:
        async with (
            asyncio.timeout(DISCOVERY_STEP_S),
            scrape_client(client, DISCOVERY_STEP_S) as engine,
        ):
            body = await fetch_metrics(engine, DISCOVERY_STEP_S)
        page = read_page(await asyncio.to_thread(read_engine_body, body), DEFAULT.kind)
    except (ScrapeFailure, TimeoutError):
        return {}
    info = page.shared_info or next((r.info for r in page.ranks.values() if r.info), None) or {}
    return {k: clean(info[k], 40) for k in CACHE_INFO_KEYS if info.get(k) not in (None, "")}


async def discover(client: httpx.AsyncClient, model: str | None, api_key: str | None) -> ServerInfo:
    """Model id (``--model`` or the base model of ``/v1/models``), limits, version, load.

    Raises RuntimeFailure when the server is unreachable or names no model. Each request
    has :data:`DISCOVERY_STEP_S` as a whole."""
    try:
        async with (
            asyncio.timeout(DISCOVERY_STEP_S),
            scrape_client(client, DISCOVERY_STEP_S) as engine,
        ):
            url = str(client.base_url).rstrip("/")
            max_len, served, _root = await unless_spoke_first(url, fetch_models(engine))
    except OtherProtocol as other:
        raise RuntimeFailure(f"{client.base_url}: {other.reason}") from None
    except TimeoutError:
        raise RuntimeFailure(
            f"{client.base_url}: no complete answer to GET /v1/models within {DISCOVERY_STEP_S:g} s"
        ) from None
    if not served and not model:
        reason = max_len.reason if isinstance(max_len, NA) else "no model with parent null"
        raise RuntimeFailure(f"{client.base_url}: cannot tell which model it serves ({reason})")
    sample = await scrape_once(str(client.base_url).rstrip("/"), api_key=api_key, timeout_s=10.0)
    running, waiting = sample.running, sample.waiting
    if sample.ok and is_num(running) and is_num(waiting):
        busy: int | None = int(running + waiting)
        note = f"{int(running)} running, {int(waiting)} waiting"
    else:
        busy = None
        note = f"unknown ({clean(sample.message) or 'no running/waiting on /metrics'})"
    if not is_num(max_len) and sample.ok and is_num(sample.max_model_len):
        max_len = sample.max_model_len  # llama.cpp: /props states it, /v1/models does not
    pool = sample.kv_pool_tokens
    return ServerInfo(
        model=model or clean(served, 200),
        version=await _version(client),
        max_model_len=int(max_len) if is_num(max_len) else None,
        kv_pool_tokens=int(pool) if is_num(pool) else None,
        cache_config=await _cache_config(client),
        busy=busy,
        load_note=note,
        engine=spec_for(sample.kind).label if sample.ok and sample.kind in KINDS else "",
    )


def nearest_profile(model: str, load_named: Callable[[str], Profile]) -> Profile:
    """The existing profile of the same model (by name in its ``model`` field, user profiles
    first), else the default profile. ``load_named`` is the commands' one loader
    (:func:`sparktop.plan.load_named`, passed in: the plan sits above the sweep)."""
    key = model.rsplit("/", 1)[-1].lower()
    candidates: list[Profile] = []
    for path in user_profile_paths():
        try:
            candidates.append(load_named(str(path)))
        except Exception:  # a broken user profile only loses its vote
            continue
    candidates += [load_named(n) for n in builtin_profile_names()]
    for profile in candidates:
        if key and key in profile.model.lower().replace(" ", "-"):
            return profile
    return load_named(DEFAULT_PROFILE)


def estimate_cells(
    plan: Plan, profile: Profile, todo: list[tuple[str, int, int]]
) -> dict[str, float | None]:
    """Estimated seconds of one run of each cell of ``todo`` (TTFT + decode of the output, by
    ``profile``), keyed ``"4K x 2"``; None where the profile has no estimate."""
    out: dict[str, float | None] = {}
    for label, tokens, conc in todo:
        est = estimate(profile, tokens, conc)
        ttft, decode = est.ttft_s.value, est.decode_tps.value
        name = cell_name(label, conc)
        if is_num(ttft) and is_num(decode) and decode > 0:
            out[name] = ttft + (plan.output_tokens - 1) / decode
        else:
            out[name] = None
    return out


def cell_name(label: str, concurrency: int) -> str:
    return f"{label} x {concurrency}"


def _scaled(r: RequestResult, k: float) -> RequestResult:
    if k == 1.0:
        return r
    return replace(r, ttft_s=r.ttft_s * k, decode_s=r.decode_s * k, e2e_s=r.e2e_s * k)


@dataclass(slots=True)
class Runner:
    """Measures cells. ``time_scale`` multiplies every measured duration (a simulator run at
    ``--speed X`` needs X to read in its own seconds)."""

    client: httpx.AsyncClient
    plan: Plan
    maker: PromptMaker
    time_scale: float = 1.0
    _serial: int = 0
    _tag: str = ""

    def __post_init__(self) -> None:
        self._tag = uuid.uuid4().hex[:10]

    def _nonce(self) -> str:
        self._serial += 1
        return f"{self._tag}-{self._serial}"

    async def round(
        self, tokens: int, concurrency: int, output: int
    ) -> tuple[list[RequestResult], float]:
        """``concurrency`` requests of ``tokens`` prompt tokens sent together; their results
        and the wall time until the last finished (s, scaled)."""
        prompts = [await self.maker.make(tokens, self._nonce()) for _ in range(concurrency)]
        before = await itl_totals(self.client)
        start = time.perf_counter()
        results = await asyncio.gather(
            *(
                stream_completion(
                    self.client, self.plan.model, p.body, output, sent_prompt_tokens=p.tokens
                )
                for p in prompts
            )
        )
        wall = (time.perf_counter() - start) * self.time_scale
        # The server's ITL is on its own clock (a simulator's too): not scaled.
        itl = await run_itl_s(self.client, before, results)
        return with_itl([_scaled(r, self.time_scale) for r in results], itl), wall

    async def warm_up(self) -> RequestResult:
        """One short request before the first cell (loads kernels, fills caches)."""
        tokens = min(t for _, t in self.plan.prompts)
        results, _ = await self.round(min(tokens, 1024), 1, WARMUP_OUTPUT_TOKENS)
        return results[0]

    async def cells(
        self,
        todo: list[tuple[str, int, int]],
        on_cell: Callable[[CellRuns], None],
        on_request: Callable[[str, int], Any] = lambda label, n: None,
    ) -> None:
        """Measure each cell of ``todo`` in order; ``on_cell`` gets it when finished,
        ``on_request(cell label, finished requests)`` as a cell starts (0) and after every
        round."""
        for label, tokens, conc in todo:
            runs: list[tuple[RequestResult, ...]] = []
            walls: list[float] = []
            name = cell_name(label, conc)
            on_request(name, 0)
            for _ in range(self.plan.runs):
                results, wall = await self.round(tokens, conc, self.plan.output_tokens)
                runs.append(tuple(results))
                walls.append(wall)
                on_request(name, conc)
            on_cell(CellRuns(label, tokens, conc, tuple(runs), tuple(walls)))


__all__ = [
    "Runner",
    "ServerInfo",
    "cell_name",
    "client_for",
    "discover",
    "estimate_cells",
    "nearest_profile",
]
