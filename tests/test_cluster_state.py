"""ClusterState: newest samples, bounded history, and the SM-clock baseline under load."""

from __future__ import annotations

import random
import statistics
from dataclasses import replace

from sparktop.cluster import BASELINE_WINDOW, ClusterState
from sparktop.model import EngineSample, EngineState, GpuSample, NodeSample, NodeState


def _node(t: float, clock: float, util: float = 97.0, mask: int = 0) -> NodeSample:
    gpu = GpuSample(
        index=0,
        uuid="GPU-1",
        name="NVIDIA GB10",
        sm_clock_mhz=clock,
        max_sm_clock_mhz=3003.0,
        utilization_pct=util,
        clock_event_mask=mask,
    )
    return NodeSample(node="spark-1", time_s=t, gpus=(gpu,))


def test_baseline_is_learnt_under_load_only() -> None:
    state = ClusterState()
    for t in range(10):
        state.apply(_node(t, 2509.0 + t % 3))
        state.apply(_node(t + 0.5, 600.0, util=2.0, mask=0x1))  # idle readings are ignored
    baseline = state.baseline_mhz("spark-1", "GPU-1")
    assert baseline is not None and 2509.0 <= baseline <= 2511.0


def test_a_long_throttle_does_not_become_the_baseline() -> None:
    state = ClusterState()
    for t in range(20):
        state.apply(_node(t, 2520.0))
    # Longer than the baseline window: SW thermal slowdown at 1,833 MHz, then a stuck
    # low-power state at 513 MHz with no reason bit (the two GB10 cases in shared/cases).
    for t in range(20, 20 + BASELINE_WINDOW):
        state.apply(_node(t, 1833.0, mask=0x20))
    for t in range(20 + BASELINE_WINDOW, 20 + 2 * BASELINE_WINDOW):
        state.apply(_node(t, 513.0, util=100.0))
    assert state.baseline_mhz("spark-1", "GPU-1") == 2520.0


def test_history_is_bounded_and_failures_keep_the_last_good_history() -> None:
    state = ClusterState(history_capacity=8)
    for t in range(50):
        state.apply(_node(t, 2500.0 + t))
    state.apply(NodeSample(node="spark-1", time_s=51, state=NodeState.UNREACHABLE, since_s=51))
    series = state.history.get("spark-1/GPU-1", "sm_clock_mhz")
    assert len(series) == 8 and series.values()[-1] == 2549.0
    assert state.nodes["spark-1"].state is NodeState.UNREACHABLE


def test_baseline_is_the_upper_quartile_of_the_newest_readings() -> None:
    """Kept sorted as readings come and go; equal to statistics.quantiles over the window."""
    rng = random.Random(20261129)
    state = ClusterState()
    window: list[float] = []
    for t in range(BASELINE_WINDOW + 250):  # past the window: old readings leave
        clock = rng.choice([rng.uniform(2000.0, 2600.0), float(rng.randrange(2490, 2520))])
        state.apply(_node(float(t), clock))
        window = [*window, clock][-BASELINE_WINDOW:]
        expected = statistics.quantiles(window, n=4)[2] if len(window) >= 5 else None
        got = state.baseline_mhz("spark-1", "GPU-1")
        assert (got is None) if expected is None else abs(got - expected) < 1e-9


def test_a_reading_seen_again_is_shown_but_recorded_once() -> None:
    """Prometheus answers with the same sample (same time) until its next scrape."""
    state = ClusterState()
    for t in range(4):
        for latency in (0.01, 0.02, 0.03):  # asked three times per scrape
            state.apply(replace(_node(t, 2509.0), latency_s=latency))
    assert state.nodes["spark-1"].latency_s == 0.03  # the row shows the newest answer
    assert [t for t, _ in state.history.get("spark-1/GPU-1", "sm_clock_mhz")] == [0, 1, 2, 3]
    assert state.baseline_mhz("spark-1", "GPU-1") is None  # 4 readings, asked 12 times
    # A failed poll in between does not make the same reading new again.
    state.apply(NodeSample(node="spark-1", time_s=99, state=NodeState.UNREACHABLE, since_s=99))
    state.apply(_node(3, 2509.0))
    assert len(state.history.get("spark-1/GPU-1", "sm_clock_mhz")) == 4
    state.apply(_node(4, 2509.0))
    assert state.baseline_mhz("spark-1", "GPU-1") == 2509.0


def test_an_engine_reading_seen_again_is_recorded_once() -> None:
    state = ClusterState()
    for t in (10.0, 10.0, 11.0, 11.0):
        state.apply(EngineSample(engine="e", time_s=t, running=3))
        state.apply(EngineSample(engine="e", time_s=50, state=EngineState.UNREACHABLE))
    assert list(state.history.get("e", "running")) == [(10.0, 3.0), (11.0, 3.0)]
    assert state.engines["e"].state is EngineState.UNREACHABLE
