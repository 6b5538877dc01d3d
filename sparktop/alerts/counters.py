"""Growth of the cumulative slowdown counters (``clocks_event_reasons_counters.*``, µs).

The cluster history keeps scalar readings only, so the alert engine keeps its own short
window of counter readings per GPU. A counter that goes down (driver reload, reboot) starts
a new baseline: its growth never counts negative.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

from sparktop.cluster import ClusterState, gpu_subject
from sparktop.model import GpuSample, SlowdownCounters, is_num

COUNTER_LABELS: Mapping[str, str] = {
    "sw_thermal_us": "SW thermal slowdown",
    "hw_thermal_us": "HW thermal slowdown",
    "sw_power_cap_us": "SW power cap",
    "hw_power_brake_us": "HW power brake",
}
"""``SlowdownCounters`` field → readable name."""

_MAX_POINTS = 1024


def _readings(counters: SlowdownCounters) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in COUNTER_LABELS:
        value = getattr(counters, name)
        if is_num(value):
            out[name] = float(value)
    return out


class CounterTracker:
    """Recent counter readings per GPU (``node/gpu_key``), bounded by ``window_s`` and size."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._points: dict[str, deque[tuple[float, dict[str, float]]]] = {}

    def observe(self, state: ClusterState) -> None:
        """Take the newest counter readings of every reachable node (once per sample time)."""
        for node in state.nodes.values():
            if not node.ok:
                continue
            for gpu in node.gpus:
                self._add(gpu_subject(node.node, gpu.key), node.time_s, gpu)

    def _add(self, subject: str, time_s: float, gpu: GpuSample) -> None:
        readings = _readings(gpu.counters)
        if not readings:
            return
        points = self._points.get(subject)
        if points is None:
            points = self._points[subject] = deque(maxlen=_MAX_POINTS)
        if points and points[-1][0] >= time_s:
            return
        points.append((time_s, readings))
        while points and points[0][0] < time_s - self.window_s:
            points.popleft()

    def growth_s(self, node: str, gpu_key: str) -> dict[str, float]:
        """Seconds added over the window to each counter that is still growing (it grew
        between the two newest readings); a counter that stopped is no longer evidence."""
        points = self._points.get(gpu_subject(node, gpu_key))
        if not points or len(points) < 2:
            return {}
        newest, before_newest = points[-1][1], points[-2][1]
        growing = {n for n, v in newest.items() if v > before_newest.get(n, v)}
        grown: dict[str, float] = {}
        previous = points[0][1]
        for _, readings in list(points)[1:]:
            for name, value in readings.items():
                before = previous.get(name)
                if name in growing and before is not None and value > before:
                    grown[name] = grown.get(name, 0.0) + (value - before) / 1e6
            previous = readings
        return grown


REASON_COUNTERS: Mapping[str, str] = {
    "sw_thermal_slowdown": "sw_thermal_us",
    "hw_thermal_slowdown": "hw_thermal_us",
    "sw_power_cap": "sw_power_cap_us",
    "hw_power_brake_slowdown": "hw_power_brake_us",
}
"""Clock-event reason name → the counter that accumulates it."""


def describe_counter(name: str, grown_s: float, window_s: float) -> str:
    """``SW thermal slowdown +9 s in the last minute``."""
    span = "the last minute" if round(window_s) == 60 else f"the last {window_s:.0f} s"
    amount = f"{grown_s:.0f}" if grown_s >= 1 else f"{grown_s:.1f}"
    return f"{COUNTER_LABELS[name]} +{amount} s in {span}"
