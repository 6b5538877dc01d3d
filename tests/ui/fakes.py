"""Scripted sources and sample builders for the UI tests (no network, no timing)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from sparktop.inventory import Inventory
from sparktop.model import (
    NA,
    EngineSample,
    EngineState,
    GpuSample,
    NodeMemory,
    NodeSample,
    NodeState,
    Quantile,
    Sample,
)
from sparktop.plan import Plan
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

T0 = 1_767_225_600.0
"""2026-01-01 00:00:00 UTC: the frozen clock of the UI tests."""

if TYPE_CHECKING:
    from textual.pilot import Pilot


def plan(
    cluster: str = "this machine",
    tp_groups: Mapping[str, Sequence[str]] | None = None,
    inventory: Inventory | None = None,
    interval_s: float | None = None,
    profile: str | None = None,
) -> Plan:
    """The plan a UI test runs: of an inventory, else of a name and engine → TP nodes (with
    the default profile, as the monitor has without one)."""
    if inventory is not None:
        return Plan.from_inventory(inventory, interval_s=interval_s, profile=profile)
    return Plan.from_layout(
        cluster, tp_groups or {}, interval_s=interval_s or 1.0, profile=profile or DEFAULT_PROFILE
    )


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def gpu(index: int = 0, uuid: str = "GPU-aaaa", **changes: object) -> GpuSample:
    base = GpuSample(
        index=index, uuid=uuid, name="NVIDIA GB10", sm_clock_mhz=2509.0, max_sm_clock_mhz=3003.0,
        temperature_c=54.0, power_w=52.3, utilization_pct=97.0, memory_used_mib=NA("[N/A]"),
        memory_total_mib=NA("[N/A]"), pstate="P0", clock_event_mask=0, process_memory_mib=101_200.0,
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def node(
    name: str, time_s: float = T0, gpus: tuple[GpuSample, ...] | None = None, **changes: object
) -> NodeSample:
    memory = NodeMemory(124_546.0, 108_000.0, 101_200.0, unified=True)
    sample = NodeSample(
        name,
        time_s,
        gpus=gpus if gpus is not None else (gpu(uuid=f"GPU-{name}"),),
        memory=memory,
        latency_s=0.03,
        raw=f"0, GPU-{name}, NVIDIA GB10, 2509",
        driver_version="580.95.05",
    )
    return replace(sample, **changes)  # type: ignore[arg-type]


def down(
    name: str, time_s: float, message: str = "Connection refused", since: float | None = None
) -> NodeSample:
    return NodeSample(name, time_s, NodeState.UNREACHABLE, message, since_s=since or time_s)


def engine(name: str = "dsv41", time_s: float = T0, **changes: object) -> EngineSample:
    sample = EngineSample(
        engine=name, time_s=time_s, model="deepseek-ai/DeepSeek-V4.1-Flash", running=8.0,
        waiting=0.0, kv_usage=0.5, kv_pool_tokens=11_434_628.0, kv_free_tokens=5_717_314.0,
        kv_pool_source="cache_config_info", preemptions_per_s=0.0, prefill_tps=3534.4,
        decode_tps=361.0, ttft_p50=Quantile(8.43), ttft_p95=Quantile(9.9),
        itl_p50=Quantile(0.021), itl_mean_s=1 / 45.0, mean_prompt_tokens=3800.0,
        prefix_hit_rate=0.0,
        max_num_seqs=8.0, max_model_len=1_048_576.0, max_num_batched_tokens=8192.0,
    )  # fmt: skip
    return replace(sample, **changes)  # type: ignore[arg-type]


class Scripted:
    """A source that returns whatever the test put in ``next`` (one sample per poll)."""

    def __init__(self, first: Sample, kind: str = "node") -> None:
        self.name = first.node if isinstance(first, NodeSample) else first.engine
        self.kind = kind if isinstance(first, NodeSample) else "engine"
        self.next: Sample = first
        self.polls = 0
        self.polled = asyncio.Event()

    async def sample(self) -> Sample:
        self.polls += 1
        self.polled.set()
        return self.next

    async def aclose(self) -> None:
        return None


class Hung:
    """A node whose poll never returns (a hung SSH command)."""

    kind = "node"

    def __init__(self, name: str) -> None:
        self.name = name
        self.started = asyncio.Event()

    async def sample(self) -> Sample:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        return None


def disabled_engine(name: str, time_s: float) -> EngineSample:
    return EngineSample(
        name, time_s, EngineState.METRICS_DISABLED, "GET /metrics answered 404", since_s=time_s
    )


async def open_budget(pilot: Pilot[object], *, edit: bool = True) -> None:
    """Press ``b`` and wait until the budget pane is open and focused; with ``edit`` (the
    default) press ``i`` too and wait until the cursor is in its prompt field.

    The pane is built on its first opening (a mount): ``Pilot.press`` waits by an idle
    heuristic (the process's CPU against the clock) that a loaded machine fools, so the test
    waits for the state itself (bounded)."""
    from textual.widgets import Input

    from sparktop.ui.widgets.body import Body
    from sparktop.ui.widgets.budget import BudgetPane

    app = pilot.app

    async def until(done: Callable[[], bool], what: str) -> None:
        deadline = asyncio.get_running_loop().time() + 60
        while not done():
            assert asyncio.get_running_loop().time() < deadline, what
            await pilot.pause(0.01)

    await pilot.press("b")
    await until(
        lambda: app.query_one(Body).budget_open and isinstance(app.focused, BudgetPane),
        "the budget pane did not open",
    )
    if edit:
        await pilot.press("i")
        await until(
            lambda: isinstance(app.focused, Input) and app.focused.id == "prompt",
            "i did not put the cursor in the prompt field",
        )
