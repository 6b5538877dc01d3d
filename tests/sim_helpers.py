"""Helpers for the simulator tests: start a simulator, build sparktop's own sources on its
inventory, and wait for a condition with a deadline (no event exists for "the GPU got hot")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TypeVar

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sparktop.inventory import load_inventory
from sparktop.model import EngineSample, NodeSample, Num, Source, is_num
from sparktop.plan import Plan
from sparktop.sim.runner import SimHandle, SimOptions, start_sim

T = TypeVar("T")


@asynccontextmanager
async def running_sim(**options: object) -> AsyncIterator[SimHandle]:
    sim = await start_sim(SimOptions(**options))  # type: ignore[arg-type]
    try:
        yield sim
    finally:
        await sim.close()


@asynccontextmanager
async def sim_client(**options: object) -> AsyncIterator[tuple[SimHandle, httpx.AsyncClient]]:
    """A running simulator and an HTTP client on its first engine."""
    async with AsyncExitStack() as stack:
        sim = await stack.enter_async_context(running_sim(**options))
        url = next(iter(sim.http.values())).url
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
        yield sim, client


def sim_plan(sim: SimHandle) -> Plan:
    """The plan of the simulator's inventory, as the monitor builds it."""
    return Plan.from_inventory(load_inventory(sim.inventory_path))


def node_sources(sim: SimHandle, **ssh_options: float) -> dict[str, Source]:
    """The sim's node sources by name (``ssh_options`` to every :class:`SshSource`)."""
    sources = sim_plan(sim).node_sources(backoff_base_s=0.05, backoff_cap_s=0.2, **ssh_options)
    return {s.name: s for s in sources}


def engine_source(sim: SimHandle) -> Source:
    (source,) = sim_plan(sim).engine_sources()
    return source


async def until(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout_s: float = 20.0
) -> T:
    """Call ``probe`` until ``ok(result)``; fail with the last result after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        result = await probe()
        if ok(result):
            return result
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s; last: {result!r}")
        await asyncio.sleep(0.05)


async def node_sample(source: Source) -> NodeSample:
    sample = await source.sample()
    assert isinstance(sample, NodeSample)
    return sample


async def engine_sample(source: Source) -> EngineSample:
    sample = await source.sample()
    assert isinstance(sample, EngineSample)
    return sample


def samples(text: str) -> dict[str, float]:
    """``name{sorted labels}`` → value for every sample on a /metrics page (parsed by
    prometheus_client), plus the plain ``name`` summed over label sets."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}"] = s.value
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def num(value: Num | int | str) -> float:
    """The float inside a reading; fails the test when it is not available."""
    assert is_num(value), f"expected a number, got {value!r}"
    return float(value)
