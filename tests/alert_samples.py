"""Hand-made samples for the alert tests: a GB10 under load, and a vLLM engine."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sparktop.cluster import ClusterState
from sparktop.model import (
    EngineSample,
    EngineState,
    GpuSample,
    NodeSample,
    NodeState,
    SlowdownCounters,
)

# The 4-Spark seed's loaded clocks sit at 2509-2541 MHz, 53-56 °C, max 3003.
LOADED = {
    "sm_clock_mhz": 2515.0,
    "max_sm_clock_mhz": 3003.0,
    "temperature_c": 55.0,
    "power_w": 88.0,
    "utilization_pct": 97.0,
    "clock_event_mask": 0,
}


def gpu(**overrides: Any) -> GpuSample:
    values = {**LOADED, **overrides}
    return GpuSample(index=0, uuid="GPU-test-0", name="NVIDIA GB10", **values)


def node(name: str, t: float, **gpu_overrides: Any) -> NodeSample:
    """A reachable node with one loaded GB10 (readings overridden by keyword)."""
    return NodeSample(node=name, time_s=t, gpus=(gpu(**gpu_overrides),))


def failed(name: str, t: float, state: NodeState = NodeState.UNREACHABLE) -> NodeSample:
    """A node whose poll failed with ``state``."""
    return NodeSample(node=name, time_s=t, state=state, message="connection refused", since_s=t)


def counters(sw_thermal_s: float) -> SlowdownCounters:
    return SlowdownCounters(
        sw_thermal_us=sw_thermal_s * 1e6,
        hw_thermal_us=0.0,
        sw_power_cap_us=0.0,
        hw_power_brake_us=0.0,
    )


def engine(name: str = "dsv41", t: float = 0.0, **overrides: Any) -> EngineSample:
    values: dict[str, Any] = {
        "running": 2.0,
        "waiting": 0.0,
        "kv_usage": 0.30,
        "kv_pool_tokens": 2_493_464.0,
        "kv_used_tokens": 748_039.0,
        "preemptions_per_s": 0.0,
        "decode_tps": 120.0,
        "max_num_seqs": 6.0,
        "mean_prompt_tokens": 2048.0,
    }
    values.update(overrides)
    return EngineSample(engine=name, time_s=t, **values)


def engine_down(name: str, t: float, state: EngineState = EngineState.UNREACHABLE) -> EngineSample:
    return EngineSample(engine=name, time_s=t, state=state, message="connect failed", since_s=t)


def cluster(*samples: NodeSample | EngineSample) -> ClusterState:
    state = ClusterState()
    for s in samples:
        state.apply(s)
    return state


def warm(state: ClusterState, names: tuple[str, ...], start: float, seconds: int) -> float:
    """Feed ``seconds`` healthy loaded polls per node (baseline learnt); return the next t."""
    t = start
    for _ in range(seconds):
        for name in names:
            state.apply(node(name, t))
        t += 1.0
    return t


def at(sample: NodeSample, t: float) -> NodeSample:
    return replace(sample, time_s=t)
