"""Cluster state: the newest sample per node and engine, history, and SM-clock baselines.

Fed one sample at a time by the poller (``apply``); read by the snapshot command, the alert
rules and the UI. Single-threaded: call it from the event loop only.

A sample whose ``time_s`` is that of the last one recorded for its node or engine is the same
reading again (Prometheus is asked every poll but scrapes every few seconds, and answers with
the sample it already gave): it is shown (newest sample, round trip) but adds no history point
and no baseline reading, so a series holds one point per reading and the baseline's minimum
counts readings, not polls.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from sparktop.history import History
from sparktop.model import EngineSample, GpuSample, NodeSample, Sample, is_num, num_or

LOADED_UTIL_PCT = 50.0
"""A GPU counts as under load at or above this utilisation (baseline is learnt under load)."""

BASELINE_WINDOW = 300
"""How many loaded SM-clock readings the baseline remembers per GPU."""

BASELINE_MIN_POINTS = 5

MIN_BASELINE_FRACTION_OF_MAX = 0.5
"""Loaded readings below this fraction of the max SM clock are never learnt as a baseline."""


def gpu_subject(node: str, gpu_key: str) -> str:
    """History subject for a GPU: ``node/gpu_key``."""
    return f"{node}/{gpu_key}"


NODE_METRICS = ("sm_clock_mhz", "temperature_c", "power_w", "utilization_pct")
ENGINE_METRICS = (
    "running",
    "waiting",
    "kv_usage",
    "decode_tps",
    "decode_tps_now",
    "prefill_tps",
    "preemptions_per_s",
    "spec_acceptance_rate",
)


@dataclass(slots=True)
class _Baseline:
    """A GPU's recent loaded SM clock readings (the newest ``BASELINE_WINDOW``), kept in
    arrival order and sorted, so the upper quartile is read off without sorting each time
    (the rows and the alert rules read it for every GPU on every tick)."""

    readings: deque[float]
    ordered: list[float] = field(default_factory=list)

    def add(self, reading: float) -> None:
        if len(self.readings) == self.readings.maxlen:
            del self.ordered[bisect.bisect_left(self.ordered, self.readings[0])]
        self.readings.append(reading)
        bisect.insort(self.ordered, reading)

    def value(self) -> float | None:
        """The upper quartile (``statistics.quantiles(n=4)[2]``, exclusive method): a short
        sag does not drag the baseline down with it. None below ``BASELINE_MIN_POINTS``."""
        data = self.ordered
        n = len(data)
        if n < BASELINE_MIN_POINTS:
            return None
        j = min(max(3 * (n + 1) // 4, 1), n - 1)  # clamped to the data, as statistics does
        delta = 3 * (n + 1) - 4 * j
        return (data[j - 1] * (4 - delta) + data[j] * delta) / 4


def _healthy_loaded_clock(gpu: GpuSample) -> bool:
    """Whether this reading may teach the baseline: under load, no slowdown reason active, and
    at least half the max clock. A long thermal sag or a stuck low-power state must not become
    the GPU's "normal" (it would hide the very throttle the baseline exists to show)."""
    util, clock, max_clock = gpu.utilization_pct, gpu.sm_clock_mhz, gpu.max_sm_clock_mhz
    if not (is_num(util) and is_num(clock)) or util < LOADED_UTIL_PCT:
        return False
    if gpu.slowdowns:
        return False
    return not (is_num(max_clock) and clock < max_clock * MIN_BASELINE_FRACTION_OF_MAX)


class ClusterState:
    """Newest samples, bounded history and learnt baselines for one cluster."""

    def __init__(self, history_capacity: int = 600) -> None:
        self.nodes: dict[str, NodeSample] = {}
        self.engines: dict[str, EngineSample] = {}
        self.history = History(history_capacity)
        self.version = 0
        self._baselines: dict[str, _Baseline] = {}
        self._node_times: dict[str, float] = {}
        self._engine_times: dict[str, float] = {}
        """``time_s`` of the last sample recorded into history, per node and per engine."""

    def apply(self, sample: Sample) -> None:
        """Record a sample: newest value, and history points and baseline readings unless its
        ``time_s`` is that of the last sample recorded for the same node or engine."""
        self.version += 1
        if isinstance(sample, NodeSample):
            self._apply_node(sample)
        else:
            self._apply_engine(sample)

    def _apply_node(self, sample: NodeSample) -> None:
        self.nodes[sample.node] = sample
        if not sample.ok or self._node_times.get(sample.node) == sample.time_s:
            return
        self._node_times[sample.node] = sample.time_s
        for gpu in sample.gpus:
            subject = gpu_subject(sample.node, gpu.key)
            for metric in NODE_METRICS:
                value = getattr(gpu, metric)
                if is_num(value):
                    self.history.add(subject, metric, sample.time_s, float(value))
            if _healthy_loaded_clock(gpu):
                base = self._baselines.get(subject)
                if base is None:
                    base = self._baselines[subject] = _Baseline(deque(maxlen=BASELINE_WINDOW))
                base.add(num_or(gpu.sm_clock_mhz, 0.0))

    def _apply_engine(self, sample: EngineSample) -> None:
        self.engines[sample.engine] = sample
        if self._engine_times.get(sample.engine) == sample.time_s:
            return
        recorded = False
        for metric in ENGINE_METRICS:
            value = getattr(sample, metric)
            if is_num(value):
                self.history.add(sample.engine, metric, sample.time_s, float(value))
                recorded = True
        if recorded:  # a failure (stamped now, no figures) leaves the last reading's time
            self._engine_times[sample.engine] = sample.time_s

    def baseline_mhz(self, node: str, gpu_key: str) -> float | None:
        """The GPU's own SM clock under load (upper quartile of recent loaded readings), MHz."""
        base = self._baselines.get(gpu_subject(node, gpu_key))
        return base.value() if base else None

    def newest_time_s(self) -> float | None:
        times = [s.time_s for s in self.nodes.values()] + [s.time_s for s in self.engines.values()]
        return max(times) if times else None
