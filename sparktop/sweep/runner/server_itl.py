"""A sweep run's decode as the server measured it: its inter-token latency histogram.

The monitor compares the live per-stream decode as 1 / mean ITL from vLLM's
``vllm:inter_token_latency_seconds`` (Δ``_sum`` / Δ``_count``, the engine's own clock). A
sweep that timed decode on the client's clock alone measured something else: a stream that
arrives in one burst (a busy frontend, a small fast model, a loaded client) reads as
thousands of tok/s, and the profile then expects a decode no server gives (on the real
vLLM 0.32 CPU server: 24,795 tok/s "measured" for a 370 tok/s stream). So each run is
bracketed by two scrapes, and when the histogram's Δ``_count`` is exactly the run's own
tokens after the first (no other traffic, no token counted twice), the run's decode is
1 / its mean ITL, like for like with the live figure. Otherwise (another server kind, other
traffic, a failed scrape) the client's timing stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

import httpx

from sparktop.sources.engines.http import ScrapeFailure, fetch_metrics
from sparktop.sources.engines.source import read_engine_body
from sparktop.sources.engines.wire import EngineClient
from sparktop.sweep.runner.bench_client import RequestResult

ITL = "vllm:inter_token_latency_seconds"
SCRAPE_S = 10.0
"""Deadline of one scrape (the whole response)."""
SETTLE_TRIES = 5
SETTLE_S = 0.1
"""vLLM records a step's latencies after it has sent the step's tokens: the scrape after a
run may lag its last tokens by a step; it is read again this many times, this far apart."""


@asynccontextmanager
async def scrape_client(client: httpx.AsyncClient, timeout_s: float) -> AsyncIterator[EngineClient]:
    """The engine's scrape client beside the sweep's ``client``: its base URL and bearer
    token, ``timeout_s`` on each network step; closed on leaving."""
    auth = {k: v for k, v in client.headers.items() if k.lower() == "authorization"}
    engine = EngineClient(str(client.base_url), timeout_s=timeout_s, headers=auth)
    try:
        yield engine
    finally:
        await engine.aclose()


async def itl_totals(client: httpx.AsyncClient) -> tuple[float, float] | None:
    """The server's ITL ``(sum s, count)`` over every series, or None when it has none or
    did not answer within :data:`SCRAPE_S`."""
    try:
        async with asyncio.timeout(SCRAPE_S), scrape_client(client, SCRAPE_S) as engine:
            body = await fetch_metrics(engine, SCRAPE_S)
        page = await asyncio.to_thread(read_engine_body, body)
    except (ScrapeFailure, TimeoutError):
        return None
    sums, counts = page.get(f"{ITL}_sum"), page.get(f"{ITL}_count")
    if not sums or not counts:
        return None
    return sum(s.value for s in sums), sum(s.value for s in counts)


def tokens_after_first(results: Sequence[RequestResult]) -> int:
    """The ITL observations a run's requests make: their output tokens after the first."""
    return sum(max(0, r.output_tokens - 1) for r in results if r.ok)


async def run_itl_s(
    client: httpx.AsyncClient,
    before: tuple[float, float] | None,
    results: Sequence[RequestResult],
) -> float:
    """The run's mean ITL (s) from the server's histogram, or 0 when the histogram did not
    see exactly the run's tokens (see the module docstring)."""
    want = tokens_after_first(results)
    if before is None or want < 1 or not all(r.usage_reported for r in results if r.ok):
        return 0.0
    for attempt in range(SETTLE_TRIES):
        after = await itl_totals(client)
        if after is None:
            return 0.0
        seen = after[1] - before[1]
        if seen == want:
            spent = after[0] - before[0]
            return spent / seen if spent > 0 else 0.0
        if seen > want:  # other traffic: the histogram is not this run's alone
            return 0.0
        if attempt + 1 < SETTLE_TRIES:
            await asyncio.sleep(SETTLE_S)
    return 0.0


def with_itl(results: Sequence[RequestResult], itl_s: float) -> list[RequestResult]:
    """``results`` with the run's server ITL on every request that succeeded (unchanged
    when ``itl_s`` is 0)."""
    if itl_s <= 0:
        return list(results)
    return [replace(r, itl_s=itl_s) if r.ok else r for r in results]
