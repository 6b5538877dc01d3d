"""One consolidated poll of a cluster, rendered as a table (rich) or a JSON document.

``take_snapshot`` polls every source once, concurrently, each under its own deadline, and
returns a :class:`Snapshot`; ``snapshot_json`` and ``render_table`` present it.

JSON document (``sparktop snapshot --json``), schema ``sparktop.snapshot/1``::

    {
      "schema": "sparktop.snapshot/1",
      "cluster": "dspark-4x",
      "time": "2026-11-29T14:02:11Z",        # UTC, ISO 8601, when the poll finished
      "time_s": 1795961531.2,                # the same, Unix seconds
      "complete": false,                     # every node and engine answered OK
      "nodes": [
        {
          "node": "spark-1",
          "state": "ok",                     # the monitor's state: "ok", "throttled",
                                             # "low-power", or the failure ("unreachable", …)
          "ok": true,                        # state is "ok" (answered, nothing slowing it)
          "message": null,                   # the cause when not ok ("connection refused")
          "since": null, "since_s": null,    # when the current failure began
          "latency_s": 0.041,                # how long the probe took
          "driver_version": null,            # "580.95.05" when the source reads it
          "missing": {"driver_version": "not reported"},
          "memory": {
            "unified": true,                 # GB10: host memory is the GPU's memory
            "total_mib": 124610.1, "used_mib": 8826.9,   # /proc/meminfo
            "gpu_held_mib": 19135.0,         # sum of per-process GPU memory
            "read_s": null,                  # set when older than the sample (the slow
            "stale_reason": null,            # tier failed beside a stream), and why
            "available_mib": 115783.2,       # MemAvailable
            "swap_total_mib": 16384.0, "swap_used_mib": 0.0,
            "psi_some_pct": 0.0, "psi_full_pct": 0.0,   # /proc/pressure/memory avg10
            "missing": {}
          },
          "fabric": {                        # /sys/class/infiniband (RDMA / RoCE)
            "tx_gbps": null, "rx_gbps": null,  # Σ over ports; null on a first reading
            "uptime_s": 86400.2,             # the node's clock for the rates
            "missing": null,                 # why there are no ports ("no /sys/class/…")
            "ports": [{"device": "rocep1s0f0", "port": 1, "netdev": "enp1s0f0np0",
                       "state": "4: ACTIVE", "phys_state": "5: LinkUp",
                       "rate": "200 Gb/sec (4X HDR)", "rate_gbps": 200.0,
                       "xmit_bytes": …, "rcv_bytes": …,      # the counters × 4 (words)
                       "tx_gbps": null, "rx_gbps": null,
                       "errors": {"symbol_error": 0.0, …}, "errors_grown": {},
                       "temperature_c": 62.0, "missing": {…}}]
          },
          "power": null,                     # spark_hwmon channels (W, J) when loaded
          "processes": [{"pid": 41000, "name": "python3", "gpu_uuid": "GPU-…",
                         "used_mib": 103426.0, "share_pct": 83.0, "missing": {}}],
          "gpus": [
            {
              "index": 0, "uuid": "GPU-…", "name": "NVIDIA GB10",
              "sm_clock_mhz": 2509.0, "max_sm_clock_mhz": 3003.0,
              "temperature_c": 55.0, "power_w": 41.37, "utilization_pct": 97.0,
              "memory_used_mib": null, "memory_total_mib": null,
              "process_memory_mib": 19135.0,
              "pstate": "P0",
              "state": "ok",                 # "ok", "throttled" or "low-power"
              "clock_event_mask": "0x0",     # hex string, null when unknown
              "clock_events": [],            # decoded reason names
              "slowdowns": [],               # the reasons that are real slowdowns
              "slowdown_counters_us": {"sw_thermal_us": null, …},
              "missing": {"memory_used_mib": "[N/A]", "memory_total_mib": "[N/A]", …}
            }
          ]
        }
      ],
      "engines": [ { "engine": "dsv41", "state": "ok", …, "missing": {…},   # report/engines.py
                     "tp_nodes": ["spark-1", "spark-2"],  # the TP group, head first
                     "expected": {                # the monitor's expected strip, as data
                       "profile": "dspark-4x", "window_s": 60.0,
                       "load": "16 running (12–20), prompts 2,048 tok, over 60 s",
                       "mean_running": 16.0, "mean_prompt_tokens": 2048.0,
                       "basis": "interpolated",
                       "figures": {"ttft_s": {"column": "ttft_s", "statistic": "p50",
                                   "expected_s": 1.9, "band_s": [1.6, 2.3], "live_s": 2.0,
                                   "deviation_pct": 5.3, "in_band": true, "compared": true,
                                   "deficit": false, …},
                                   "decode_tps": {…}, "aggregate_tps": {…}},
                       "missing": null} } ],  # why there is no row ("engine unreachable")
      "alerts": [                            # conditions present now (one poll: no hold_s)
        {"id": "node.down:spark-2#1", "rule": "node.down", "subject": "spark-2",
         "severity": "critical", "message": "unreachable since 14:01:58: …",
         "node": "spark-2", "gpu": null, "engine": null, "values": {…},
         "started_s": …, "fired_s": …, "cleared_s": null}
      ],
      "critical": false                      # some alert above is critical (exit 3 only
                                             # when it is about data that answered)
    }

A node's ``state`` is the monitor's (:mod:`sparktop.alerts.gpu_state`): a node that answered
reads its worst GPU's state, so ``jq '.nodes[] | select(.ok|not)'`` lists the nodes that
failed *and* those throttled or in the hidden low-power state.

Alerts are the rules of :mod:`sparktop.alerts.rules` evaluated once over this poll's samples
with the inventory's thresholds (see :mod:`sparktop.alerts.oneshot`).

Missing values: a reading the source did not provide is ``null`` and its key appears in the
enclosing object's ``"missing"`` map with the reason as the source gave it (``[N/A]``,
``Not Supported``, ``metric absent``…). A value is never reported as 0 because it is missing,
and a text field is never ``""``: unknown text (driver version, GPU name or UUID, engine
model) is ``null`` with the reason ``not reported``; no message is ``null`` too.
Units are in the key names (``_mhz``, ``_c``, ``_w``, ``_pct``, ``_mib``, ``_us``, ``_s``);
engine ``kv_usage`` is a fraction 0–1 as vLLM exports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sparktop.alerts.gpu_state import GpuState, worst
from sparktop.alerts.model import Alert, Severity
from sparktop.hostmodel import FabricReading, PowerTelemetry
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
    Source,
    is_num,
)
from sparktop.poller import error_sample, failure_sample
from sparktop.report import engines as engine_report

SCHEMA = "sparktop.snapshot/1"

NO_GPU_DATA = frozenset(
    {
        NodeState.NO_DRIVER,
        NodeState.NO_GPU,
        NodeState.DRIVER_MISMATCH,
        NodeState.GPU_UNAVAILABLE,
    }
)
"""Node states of a node that answered but has no GPU data to read (no NVIDIA driver on a
CPU-only machine beside its engine): degraded in ``snapshot``'s exit status, never "did not
answer"."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One poll of every source: node samples and engine samples, in inventory order."""

    cluster: str
    time_s: float
    nodes: tuple[NodeSample, ...]
    engines: tuple[EngineSample, ...] = ()
    alerts: tuple[Alert, ...] = ()
    gpu_states: Mapping[str, Mapping[str, GpuState]] = dataclasses.field(default_factory=dict)
    """Node → GPU key → the monitor's state of that GPU (answering nodes; see ``judge_now``)."""

    @property
    def complete(self) -> bool:
        """True when every node and engine answered with an OK sample."""
        return all(n.ok for n in self.nodes) and all(e.ok for e in self.engines)

    @property
    def answered(self) -> bool:
        """True when every node answered (with GPU data or without any: :data:`NO_GPU_DATA`)
        and every engine with a page (:attr:`~sparktop.model.EngineSample.answered`: ``ok``,
        or ``stale``/``degraded`` — a page whose gauges are missing or refused is degraded,
        exit 4, not "did not answer"); ``snapshot`` exits 1 when not."""
        return all(n.ok or n.state in NO_GPU_DATA for n in self.nodes) and all(
            e.answered for e in self.engines
        )

    @property
    def degraded(self) -> bool:
        """True when something is not well: a node whose state is not ``ok`` (throttled,
        low-power, no GPU data, …), an engine not OK, or any alert of warning severity or
        above in :attr:`alerts`."""
        if any(not e.ok for e in self.engines):
            return True
        if any(node_state(n, self.gpu_states.get(n.node, {})) != GpuState.OK for n in self.nodes):
            return True
        return any(a.severity.rank >= Severity.WARNING.rank for a in self.alerts)

    @property
    def failures(self) -> tuple[Sample, ...]:
        return tuple(n for n in self.nodes if not n.ok) + tuple(e for e in self.engines if not e.ok)


def _timed_out(source: Source, timeout_s: float) -> Sample:
    """A source past the snapshot's overall deadline. It may have connected and be sending
    (a page that drips in): not answering in time, not unreachable."""
    # Imported here: the Prometheus client (httpx, pydantic) is only loaded by the commands
    # that poll through Prometheus, and a source of that kind has loaded it already.
    from sparktop.sources.prometheus.node import PromNodeSource

    message = f"no complete answer within the snapshot's {timeout_s:g} s deadline"
    if isinstance(source, PromNodeSource):  # no SSH involved: name what did not answer
        return failure_sample(source, f"Prometheus not answering: {message}")
    sample = failure_sample(source, message, NodeState.SSH_NOT_ANSWERING)
    if isinstance(sample, EngineSample):
        return dataclasses.replace(sample, state=EngineState.NOT_ANSWERING)
    return sample


async def _poll(source: Source, deadline: float | None, timeout_s: float) -> Sample:
    try:
        async with asyncio.timeout_at(deadline):
            return await source.sample()
    except TimeoutError:
        return _timed_out(source, timeout_s)
    except Exception as exc:  # a source bug becomes that source's failure, not a crash
        return error_sample(source, exc)


async def take_snapshot(
    sources: Iterable[Source], *, cluster: str, timeout_s: float | None = None, close: bool = True
) -> Snapshot:
    """Poll every source once, concurrently, and (with ``close``) close them afterwards.

    Each source keeps its own deadlines (an SSH node: connect timeout, then
    ``command_timeout_s`` + margin for the probe); ``timeout_s`` is an overall safety net,
    counted from the call for every source alike, after which a source that has not
    answered is reported as "no answer within N s".
    """
    sources = tuple(sources)
    # One deadline for all, fixed before any starts: a task started late (2,000 nodes, each
    # setting up its connection on the one loop) must not get its timeout from then on.
    deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
    try:
        samples = await asyncio.gather(*(_poll(s, deadline, timeout_s or 0.0) for s in sources))
    finally:
        if close:
            with contextlib.suppress(Exception):
                await asyncio.gather(*(s.aclose() for s in sources), return_exceptions=True)
    return Snapshot(
        cluster=cluster,
        time_s=time.time(),
        nodes=tuple(s for s in samples if isinstance(s, NodeSample)),
        engines=tuple(s for s in samples if isinstance(s, EngineSample)),
    )


# -- JSON ----------------------------------------------------------------------------------


def iso_time(time_s: float | None) -> str | None:
    """UTC ISO 8601 with a ``Z`` suffix, whole seconds; None stays None."""
    if time_s is None:
        return None
    return datetime.fromtimestamp(time_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


NOT_REPORTED = "not reported"
"""The ``missing`` reason of a text field the source left empty."""


def _value(value: object) -> object:
    if isinstance(value, NA) or value == "":
        return None
    if isinstance(value, Quantile):
        return {"value_s": value.value_s, "bound": value.bound or None}
    if isinstance(value, float | int) and not isinstance(value, bool):
        return value if is_num(value) else None
    if isinstance(value, tuple):
        return [_value(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _value(v) for k, v in value.items()}
    return value


def _split(obj: Any, skip: tuple[str, ...] = ()) -> tuple[dict[str, object], dict[str, str]]:
    """A dataclass's fields as JSON values (NA → null) and the reasons of the missing ones."""
    out: dict[str, object] = {}
    missing: dict[str, str] = {}
    for f in dataclasses.fields(obj):
        if f.name in skip:
            continue
        value = getattr(obj, f.name)
        if isinstance(value, NA):
            missing[f.name] = value.reason
        elif value == "":
            missing[f.name] = NOT_REPORTED
        out[f.name] = _value(value)
    return out, missing


def _fields(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """A dataclass's fields as JSON values, NA → null, plus a ``missing`` map of reasons."""
    out, missing = _split(obj, skip)
    out["missing"] = missing
    return out


def gpu_json(gpu: GpuSample, state: GpuState = GpuState.OK) -> dict[str, object]:
    out, missing = _split(gpu, skip=("counters", "clock_event_mask"))
    mask = gpu.clock_event_mask
    if isinstance(mask, NA):
        missing["clock_event_mask"] = mask.reason
    out["clock_event_mask"] = f"{mask:#x}" if isinstance(mask, int) else None
    out["clock_events"] = list(gpu.clock_events)
    out["slowdowns"] = list(gpu.slowdowns)
    counters, counters_missing = _split(gpu.counters)
    for key, reason in counters_missing.items():
        missing[f"slowdown_counters_us.{key}"] = reason
    out["slowdown_counters_us"] = counters
    out["state"] = state.value
    out["missing"] = missing
    return out


def memory_json(memory: NodeMemory) -> dict[str, object]:
    return _fields(memory)


def node_state(sample: NodeSample, gpus: Mapping[str, GpuState]) -> str:
    """The node's state as the monitor names it: its failure, else its worst GPU's state."""
    return sample.state.value if not sample.ok else worst(gpus).value


def node_json(
    sample: NodeSample, gpu_states: Mapping[str, GpuState] | None = None
) -> dict[str, object]:
    """One node (see the module docstring); ``gpu_states`` GPU key → state (default ok)."""
    states = gpu_states or {}
    state = node_state(sample, states)
    return {
        "node": sample.node,
        "state": state,
        "ok": state == GpuState.OK.value,
        "message": sample.message or None,
        "since": iso_time(sample.since_s),
        "since_s": sample.since_s,
        "time_s": sample.time_s,
        "latency_s": sample.latency_s,
        "driver_version": sample.driver_version or None,
        "missing": {} if sample.driver_version else {"driver_version": NOT_REPORTED},
        "memory": memory_json(sample.memory),
        "gpus": [gpu_json(g, states.get(g.key, GpuState.OK)) for g in sample.gpus],
        "fabric": fabric_json(sample.fabric),
        "power": power_json(sample.power),
        "processes": [_fields(p) for p in sample.processes],
    }


def fabric_json(fabric: FabricReading) -> dict[str, object]:
    """RDMA ports (``/sys/class/infiniband``): ``missing`` says why there are none."""
    return {
        "tx_gbps": _value(fabric.tx_gbps),
        "rx_gbps": _value(fabric.rx_gbps),
        "uptime_s": _value(fabric.uptime_s),
        "missing": fabric.missing or None,
        "ports": [_fields(p) for p in fabric.ports],
    }


def power_json(power: PowerTelemetry) -> dict[str, object] | None:
    """The ``spark_hwmon`` driver's channels; null when the driver is absent."""
    return _fields(power) if power.present else None


def engine_json(sample: EngineSample, tp_nodes: tuple[str, ...] = ()) -> dict[str, object]:
    """See :mod:`sparktop.report.engines` for the engine object's keys; ``tp_nodes``
    is the engine's tensor-parallel group as the plan has it (head first; [] when none)."""
    return {**engine_report.engine_json(sample), "tp_nodes": list(tp_nodes)}


def snapshot_json(
    snap: Snapshot,
    tp_groups: Mapping[str, tuple[str, ...]] | None = None,
    expected: Mapping[str, Mapping[str, object]] | None = None,
) -> dict[str, object]:
    """The documented JSON document (see the module docstring); ``tp_groups`` engine → its
    TP nodes (the plan's); ``expected`` engine → its expected block
    (:func:`sparktop.report.expected.expected_json`; null when not given)."""
    groups = tp_groups or {}
    blocks = expected or {}
    return {
        "schema": SCHEMA,
        "cluster": snap.cluster,
        "time": iso_time(snap.time_s),
        "time_s": snap.time_s,
        "complete": snap.complete,
        "nodes": [node_json(n, snap.gpu_states.get(n.node)) for n in snap.nodes],
        "engines": [
            {**engine_json(e, groups.get(e.engine, ())), "expected": blocks.get(e.engine)}
            for e in snap.engines
        ],
        "alerts": [a.to_json() for a in snap.alerts],
        "critical": any(a.severity is Severity.CRITICAL for a in snap.alerts),
    }
