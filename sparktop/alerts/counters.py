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
    "sw_thermal_us": "sw_thermal_slowdown",
    "hw_thermal_us": "hw_thermal_slowdown",
    "sw_power_cap_us": "sw_power_cap",
    "hw_power_brake_us": "hw_power_brake_slowdown",
}
"""``SlowdownCounters`` field → the reason's name: nvidia-smi's own field name
(``clocks_event_reasons_counters.sw_thermal_slowdown``), as every output names it."""

_MAX_POINTS = 1024


def _readings(counters: SlowdownCounters) -> dict[str, float]:
    out: dict[str, float] = {}
    for name in COUNTER_LABELS:
        value = getattr(counters, name)
        if is_num(value):
            out[name] = float(value)
    return out


class _Window:
    """One GPU's readings in the window and, per counter, its rises summed over the window.

    Each point keeps its rise over the point before it (whole µs, so the running sums stay
    exact); when the oldest point leaves, the next one's rise leaves the sums with it."""

    __slots__ = ("points", "rise")

    def __init__(self) -> None:
        self.points: deque[tuple[float, dict[str, float], dict[str, int]]] = deque()
        self.rise: dict[str, int] = {}

    def append(self, time_s: float, readings: dict[str, float]) -> None:
        if len(self.points) >= _MAX_POINTS:
            self.drop_oldest()
        before = self.points[-1][1] if self.points else {}
        rise = {n: round(v - before[n]) for n, v in readings.items() if v > before.get(n, v)}
        for name, amount in rise.items():
            self.rise[name] = self.rise.get(name, 0) + amount
        self.points.append((time_s, readings, rise))

    def drop_oldest(self) -> None:
        self.points.popleft()
        if self.points:  # the new oldest point's rise was over a reading now gone
            for name, amount in self.points[0][2].items():
                self.rise[name] -= amount


class CounterTracker:
    """Recent counter readings per GPU (``node/gpu_key``), bounded by ``window_s`` and size.

    Growth over the window is kept as running sums, so reading it costs the same whatever
    the window's length (the alert rules read it for every GPU on every tick)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._windows: dict[str, _Window] = {}

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
        window = self._windows.get(subject)
        if window is None:
            window = self._windows[subject] = _Window()
        if window.points and window.points[-1][0] >= time_s:
            return
        window.append(time_s, readings)
        while window.points and window.points[0][0] < time_s - self.window_s:
            window.drop_oldest()

    def growth_s(self, node: str, gpu_key: str) -> dict[str, float]:
        """Seconds added over the window to each counter that is still growing (it grew
        between the two newest readings); a counter that stopped is no longer evidence."""
        window = self._windows.get(gpu_subject(node, gpu_key))
        if window is None or len(window.points) < 2:
            return {}
        newest, before_newest = window.points[-1][1], window.points[-2][1]
        growing = [n for n, v in newest.items() if v > before_newest.get(n, v)]
        return {n: window.rise[n] / 1e6 for n in growing if window.rise.get(n, 0) > 0}


REASON_COUNTERS: Mapping[str, str] = {
    "sw_thermal_slowdown": "sw_thermal_us",
    "hw_thermal_slowdown": "hw_thermal_us",
    "sw_power_cap": "sw_power_cap_us",
    "hw_power_brake_slowdown": "hw_power_brake_us",
}
"""Clock-event reason name → the counter that accumulates it."""


def describe_counter(name: str, grown_s: float, window_s: float) -> str:
    """``sw_thermal_slowdown +9 s in the last minute``."""
    span = "the last minute" if round(window_s) == 60 else f"the last {window_s:.0f} s"
    amount = f"{grown_s:.0f}" if grown_s >= 1 else f"{grown_s:.1f}"
    return f"{COUNTER_LABELS[name]} +{amount} s in {span}"
