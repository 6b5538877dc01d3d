"""A node read from Prometheus (dcgm-exporter + node_exporter series) → :class:`NodeSample`.

Fields (dcgm-exporter, ``etc/default-counters.csv``): ``DCGM_FI_DEV_SM_CLOCK`` and
``_MAX_SM_CLOCK`` (MHz), ``_GPU_TEMP`` (°C), ``_POWER_USAGE`` (W), ``_GPU_UTIL`` (%),
``_CLOCKS_EVENT_REASONS`` (or the older ``_CLOCK_THROTTLE_REASONS``; NVML's bit mask),
``_THERMAL_VIOLATION`` / ``_POWER_VIOLATION`` (cumulative ns → the µs of
:class:`SlowdownCounters`' SW thermal / SW power cap), ``_FB_USED``/``_FB_FREE`` (MiB; absent on
GB10). GPU labels: ``gpu`` (index), ``UUID``, ``modelName``. Host memory (node_exporter):
``node_memory_MemTotal_bytes`` − ``node_memory_MemAvailable_bytes``, as ``/proc/meminfo``.

States: Prometheus not answering → UNREACHABLE, answering an error → ERROR (every node of the
inventory, with the reason); the node's targets down (``up == 0``) → UNREACHABLE; no GPU
series at all → ERROR naming the query that found nothing. Series that vanished while their
target is still up (Prometheus marked them stale) keep the last reading with its time, so
the row shows as stale with its age; ``time_s`` is the newest sample time in Prometheus,
so a reading older than three polls reads as stale too. A missing field is ``NA`` naming the
series that was not found.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from math import isfinite
from typing import NamedTuple

from sparktop.hostmodel import PowerTelemetry
from sparktop.model import NA, GpuSample, NodeMemory, NodeSample, NodeState, Num, SlowdownCounters
from sparktop.sources.nvsmi import is_unified
from sparktop.sources.nvsmi.cells import plausible
from sparktop.sources.prometheus.api import PromFailure, QueryResult, Series
from sparktop.sources.prometheus.hub import PromHub
from sparktop.sources.prometheus.promql import DCGM_FIELDS, DOWN, GPU_TS, Target

MIB = 1024 * 1024
RAW_MAX = 4000
"""Characters of the matched series kept in ``NodeSample.raw`` for the detail screen."""

_GPU_NAMES = frozenset((*DCGM_FIELDS, GPU_TS))
NO_PROCESS_MEMORY = "per-process GPU memory is not in dcgm-exporter's default fields"
NO_PROCESS_MEMORY_NA = NA(NO_PROCESS_MEMORY)
NO_PSTATE = NA("not in dcgm-exporter's default fields")
NO_POWER = PowerTelemetry()
"""Prometheus has no ``spark_hwmon`` readings: one empty value shared (the field's default
factory makes three empty maps per sample)."""
NO_HW_COUNTER = NA("dcgm-exporter has one thermal and one power violation counter")
_REASONS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")


def clock_text(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


class NodesReading(NamedTuple):
    """A tick's ``nodes`` answer (or why there is none) and when it was asked for."""

    wall: float
    answer: QueryResult | PromFailure


class PromNodeBatch:
    """Every node source of one hub: a poller reads the hub's ``nodes`` answer once a tick and
    builds each node's sample from it (:class:`~sparktop.poller.BatchedSource`)."""

    def __init__(self, hub: PromHub) -> None:
        self.hub = hub

    async def read(self) -> NodesReading:
        wall = time.time()
        try:
            return NodesReading(wall, await self.hub.fetch("nodes"))
        except PromFailure as failure:
            return NodesReading(wall, failure)


class PromNodeSource:
    """One inventory node with ``source: prometheus``; ``sample()`` never raises. ``batch``:
    the node sources of the same hub (one of its own without)."""

    kind = "node"

    def __init__(self, hub: PromHub, target: Target, batch: PromNodeBatch | None = None) -> None:
        self.name = target.name
        self.hub = hub
        self.target = target
        self.batch = batch or PromNodeBatch(hub)
        hub.attach()
        self._since: float | None = None
        self._last: NodeSample | None = None
        self._expr_head = hub.exprs["nodes"][:300] + "…"
        self._absent: dict[str, NA] = {}
        self._built: _Built | None = None

    def _missing(self, name: str) -> NA:
        """The reason a field is NA, made once per field: a GB10 lacks some every tick."""
        na = self._absent.get(name)
        if na is None:
            selector = self.target.selector_text()
            na = self._absent[name] = NA(f"no {name}{{{selector}}} series in Prometheus")
        return na

    async def sample(self) -> NodeSample:
        return self.sample_from(await self.batch.read())

    def sample_from(self, reading: object) -> NodeSample:
        """This node's sample from a :class:`NodesReading` of its batch."""
        assert isinstance(reading, NodesReading)
        wall, answer = reading
        if isinstance(answer, PromFailure):
            state = NodeState.UNREACHABLE if answer.unreachable else NodeState.ERROR
            return self._failed(wall, state, answer.message(self.hub.url))
        return self._build(wall, answer, self.hub.select("nodes", answer, self.target))

    def _failed(self, wall: float, state: NodeState, message: str, raw: str = "") -> NodeSample:
        self._since = self._since or wall
        return NodeSample(
            node=self.name, time_s=wall, state=state, message=message, since_s=self._since,
            raw=raw or f"PromQL: {self.hub.exprs['nodes'][:RAW_MAX]}",
        )  # fmt: skip

    def _build(self, wall: float, result: QueryResult, series: Sequence[Series]) -> NodeSample:
        # Prometheus scrapes every few seconds and is asked every tick: most ticks a node's
        # series are last tick's (names, labels, values; only the query's evaluation time
        # moved), and its sample is then last tick's at this round trip. Its time_s is the
        # samples' time in Prometheus, so the row ages as it would.
        content = [s[:3] for s in series]
        built = self._built
        if built is not None and built.content == content and built.warnings == result.warnings:
            self._since = None
            self._last = sample = _at_latency(built.sample, result.latency_s)
            return sample
        self._built = None
        gpus, node, down = _group(series, _ALL_UP)
        if down:  # a target Prometheus cannot scrape: what is left of it is old
            gpus, node, _ = _group(series, frozenset(down))
        if gpus and not down:  # the common case, kept cheap: every node, every tick
            raw = f"{len(series)} series from Prometheus {self.hub.url}; PromQL: {self._expr_head}"
        else:
            raw = _raw(self.hub.exprs["nodes"], series)
        notes = [f"partial answer: {w}" for w in result.warnings]
        if down and gpus:
            notes.insert(0, f"Prometheus cannot scrape {', '.join(down)} (up=0)")
        note = "; ".join(notes)
        if not gpus:
            if down:
                since = clock_text(self._last.time_s) if self._last else "never seen"
                message = f"Prometheus cannot scrape {', '.join(down)} (up=0); last " \
                          f"sample {since}"  # fmt: skip
                return self._failed(wall, NodeState.UNREACHABLE, message, raw)
            if self._last is not None:
                last = clock_text(self._last.time_s)
                gone = f"series gone from Prometheus (marked stale) after {last}"
                return replace(self._last, message=gone, latency_s=result.latency_s, raw=raw)
            sel = self.target.selector_text()
            message = f'no dcgm-exporter series: {{__name__=~"DCGM_FI_DEV_.*",{sel}}} found nothing'
            if "node_memory_MemTotal_bytes" not in node:
                return self._failed(wall, NodeState.ERROR, message, raw)
            self._since = None  # node_exporter answers: a machine without a GPU exporter
            return NodeSample(
                node=self.name, time_s=wall,
                state=NodeState.NO_GPU, message=message, memory=self._memory(node, ()),
                latency_s=result.latency_s, raw=raw,
            )  # fmt: skip
        ordered: Iterable[dict[str, Series]] = gpus.values()
        if len(gpus) > 1:
            ordered = [fields for _, fields in sorted(gpus.items(), key=_gpu_order)]
        samples = tuple([self._gpu(fields) for fields in ordered])
        times = [f[GPU_TS].value for f in gpus.values() if GPU_TS in f]
        memory = self._memory(node, samples)
        self._since = None
        sample = NodeSample(
            node=self.name,
            time_s=max(times) if times else wall,
            message=note,
            gpus=samples,
            memory=memory,
            latency_s=result.latency_s,
            raw=raw,
            driver_version=_label(series, "DCGM_FI_DRIVER_VERSION") or "",
            power=NO_POWER,
        )
        self._last = sample
        if times:  # the sample depends on nothing but the series (and the round trip)
            self._built = _Built(content, result.warnings, sample)
        return sample

    def _memory(self, node: Mapping[str, Series], gpus: tuple[GpuSample, ...]) -> NodeMemory:
        total = self._field(node, "node_memory_MemTotal_bytes", MIB)
        avail = self._field(node, "node_memory_MemAvailable_bytes", MIB)
        used: Num = total - avail if not isinstance(total, NA) and not isinstance(avail, NA) else (
            total if isinstance(total, NA) else avail
        )  # fmt: skip
        return NodeMemory(
            total_mib=total,
            used_mib=used,
            gpu_held_mib=NO_PROCESS_MEMORY_NA,
            unified=is_unified(gpus, total),
        )

    def _field(self, fields: Mapping[str, Series], name: str, scale: float = 1.0) -> Num:
        s = fields.get(name)
        if s is None:
            return self._missing(name)
        value = s.value
        if not isfinite(value):
            return NA(f"{name} is {value}")
        return value / scale

    def _gpu(self, fields: Mapping[str, Series]) -> GpuSample:
        field = self._field
        full = fields.get("DCGM_FI_DEV_SM_CLOCK")  # the one field with every label
        labels = (full or next(iter(fields.values()))).labels
        mask: int | NA = self._missing(_REASONS[0])
        for name in _REASONS:
            if name in fields:
                value = field(fields, name)
                if not isinstance(value, NA):
                    mask = int(value)
                    break
        used = field(fields, "DCGM_FI_DEV_FB_USED")
        free = field(fields, "DCGM_FI_DEV_FB_FREE")
        total: Num = used + free if not isinstance(used, NA) and not isinstance(free, NA) else free
        try:
            index = int(labels.get("gpu", "0"))
        except ValueError:
            index = 0
        # Each reading held to nvidia-smi's plausible range as it is made: what checked()
        # does to a built sample, without building the sample and its counters twice.
        return GpuSample(
            index=index,
            uuid=labels.get("UUID", ""),
            name=labels.get("modelName", ""),
            sm_clock_mhz=plausible("clocks.sm", field(fields, "DCGM_FI_DEV_SM_CLOCK")),
            max_sm_clock_mhz=plausible("clocks.max.sm", field(fields, "DCGM_FI_DEV_MAX_SM_CLOCK")),
            temperature_c=plausible("temperature.gpu", field(fields, "DCGM_FI_DEV_GPU_TEMP")),
            power_w=plausible("power.draw", field(fields, "DCGM_FI_DEV_POWER_USAGE")),
            utilization_pct=plausible("utilization.gpu", field(fields, "DCGM_FI_DEV_GPU_UTIL")),
            memory_used_mib=plausible("memory.used", used),
            memory_total_mib=plausible("memory.total", total),
            pstate=NO_PSTATE,
            clock_event_mask=mask,
            counters=SlowdownCounters(
                sw_thermal_us=plausible(
                    "sw_thermal_slowdown", field(fields, "DCGM_FI_DEV_THERMAL_VIOLATION", 1000.0)
                ),
                hw_thermal_us=NO_HW_COUNTER,
                sw_power_cap_us=plausible(
                    "sw_power_cap", field(fields, "DCGM_FI_DEV_POWER_VIOLATION", 1000.0)
                ),
                hw_power_brake_us=NO_HW_COUNTER,
            ),
            process_memory_mib=NO_PROCESS_MEMORY_NA,
        )

    async def aclose(self) -> None:
        await self.hub.aclose()


class _Built(NamedTuple):
    """A node's sample and the series (name, labels, value) and warnings it was built from."""

    content: list[tuple[str, Mapping[str, str], float]]
    warnings: tuple[str, ...]
    sample: NodeSample


def _at_latency(sample: NodeSample, latency_s: float) -> NodeSample:
    """``sample`` with ``latency_s``: the fields a Prometheus sample sets, at a third of
    :func:`dataclasses.replace`'s cost."""
    return NodeSample(
        node=sample.node, time_s=sample.time_s, message=sample.message, gpus=sample.gpus,
        memory=sample.memory, latency_s=latency_s, raw=sample.raw,
        driver_version=sample.driver_version, power=sample.power,
    )  # fmt: skip


_GpuKey = tuple[str, str, str]
_ALL_UP: frozenset[str] = frozenset()


def _group(
    series: Iterable[Series], down: frozenset[str]
) -> tuple[dict[_GpuKey, dict[str, Series]], dict[str, Series], list[str]]:
    """(GPU fields by (instance, gpu, GPU_I_ID), node fields, the instances Prometheus cannot
    scrape, sorted), the first series of each name kept and the ``down`` instances' left out.
    One pass: a node's targets are all up nearly always."""
    gpus: dict[_GpuKey, dict[str, Series]] = {}
    node: dict[str, Series] = {}
    seen_down: list[str] = []
    for s in series:
        name, labels = s.name, s.labels
        if name == DOWN:
            seen_down.append(labels.get("instance", "?"))
            continue
        if down and labels.get("instance", "?") in down:
            continue
        if name in _GPU_NAMES:
            key = (labels.get("instance", ""), labels.get("gpu", ""), labels.get("GPU_I_ID", ""))
            fields = gpus.get(key)
            if fields is None:
                gpus[key] = {name: s}
            elif name not in fields:
                fields[name] = s
        elif name not in node:
            node[name] = s
    return gpus, node, sorted(seen_down)


def _gpu_order(item: tuple[_GpuKey, object]) -> tuple[float, str, str]:
    instance, index, mig = item[0]
    try:
        return float(index), mig, instance
    except ValueError:
        return math.inf, mig, instance


def _label(series: Iterable[Series], key: str) -> str | None:
    for s in series:  # a loop: the generator it was cost a tenth of a node's sample
        if key in s.labels:
            return s.labels[key]
    return None


def _raw(expr: str, series: Sequence[Series]) -> str:
    lines = [f"PromQL: {expr[:1000]}", f"{len(series)} series for this node:"]
    for s in series:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        lines.append(f"{s.name}{{{labels}}} {s.value:g}")
    return "\n".join(lines)[:RAW_MAX]
