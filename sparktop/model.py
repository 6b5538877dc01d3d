"""Immutable samples shared by every source, the cluster state, alerts and the UI.

Everything here is Textual-free and frozen. A value a GPU or server does not provide is an
:class:`NA` that keeps the reason text (``[N/A]``, ``Not Supported``, ``metric absent``…);
it formats as ``n/a`` and is never silently turned into 0.
"""

from __future__ import annotations

import enum
import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, TypeAlias, runtime_checkable

from sparktop.enginemodel import ANSWERED as ANSWERED
from sparktop.enginemodel import EngineSample as EngineSample
from sparktop.enginemodel import EngineState as EngineState
from sparktop.enginemodel import Quantile as Quantile
from sparktop.enginemodel import RankStats as RankStats
from sparktop.hostmodel import FabricReading, GpuProcess, PowerTelemetry
from sparktop.values import NA as NA
from sparktop.values import FloatMap as FloatMap
from sparktop.values import Num as Num
from sparktop.values import TextMap as TextMap
from sparktop.values import fmt_num as fmt_num
from sparktop.values import is_num as is_num
from sparktop.values import num_or as num_or
from sparktop.values import sort_key as sort_key

# -- clock-event (throttle) reasons ------------------------------------------------------------

CLOCK_EVENT_BITS: Mapping[int, str] = MappingProxyType(
    {
        0x1: "gpu_idle",
        0x2: "applications_clocks_setting",
        0x4: "sw_power_cap",
        0x8: "hw_slowdown",
        0x10: "sync_boost",
        0x20: "sw_thermal_slowdown",
        0x40: "hw_thermal_slowdown",
        0x80: "hw_power_brake_slowdown",
        0x100: "display_clock_setting",
    }
)
"""NVML ``nvmlClocksEventReason*`` bit values (nvml.h; same as ``clocks_event_reasons.active``)."""

BENIGN_CLOCK_EVENTS: frozenset[str] = frozenset(
    {"gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"}
)
"""Reasons that explain a lower clock without being a slowdown worth an alarm."""


@functools.lru_cache(maxsize=256)
def decode_clock_events(mask: int) -> tuple[str, ...]:
    """Decode an NVML clock-event mask into reason names, lowest bit first.

    Bits NVML does not define are reported as one ``other(0x…)`` entry.
    """
    names = [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_BITS)
    if unknown:
        names.append(f"other({unknown:#x})")
    return tuple(names)


@functools.lru_cache(maxsize=256)
def slowdown_reasons(mask: int) -> tuple[str, ...]:
    """Only the reasons that mean a slowdown (thermal, power cap, HW slowdown, power brake)."""
    return tuple(r for r in decode_clock_events(mask) if r not in BENIGN_CLOCK_EVENTS)


# -- node / GPU samples ------------------------------------------------------------------------


class NodeState(enum.StrEnum):
    """What a node's last poll amounted to."""

    OK = "ok"
    NO_GPU = "no GPU visible"
    NO_DRIVER = "no NVIDIA driver"
    DRIVER_MISMATCH = "driver/library mismatch"
    UNREACHABLE = "unreachable"
    HOST_KEY = "host key not trusted"
    AUTH = "authentication failed"
    GARBLED = "unreadable output"
    GPU_UNAVAILABLE = "GPU data unavailable"
    """SSH answered (the node is up) but nvidia-smi failed: NVML could not initialise, or
    another non-zero exit; the message is nvidia-smi's reason (``NVML: Unknown Error``)."""
    NOT_ANSWERING = "nvidia-smi not answering"
    """The SSH connection works but nvidia-smi did not finish (a hung driver or GPU)."""
    SSH_NOT_ANSWERING = "SSH not answering"
    """The node accepted the TCP connection but SSH did not answer in time (a hung sshd or
    host), as against UNREACHABLE: refused, or no connection at all."""
    ERROR = "error"

    @property
    def is_failure(self) -> bool:
        return self is not NodeState.OK


IMPLAUSIBLE = "implausible: "
"""How a reading refused as outside its plausible range begins (the source's NA reason, e.g.
:func:`sparktop.sources.nvsmi.cells.plausible`); :attr:`GpuSample.implausible` finds them."""


@dataclass(frozen=True, slots=True)
class SlowdownCounters:
    """Cumulative time spent in each slowdown, µs (``clocks_event_reasons_counters.*``)."""

    sw_thermal_us: Num = NA("not queried")
    hw_thermal_us: Num = NA("not queried")
    sw_power_cap_us: Num = NA("not queried")
    hw_power_brake_us: Num = NA("not queried")


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One GPU as seen by one poll.

    Source: ``nvidia-smi --query-gpu`` columns (mapped by header name) or NVML calls.
    ``memory_*_mib`` are NA on GB10 (unified memory, ``[N/A]``); use :class:`NodeMemory`.
    ``process_memory_mib`` is the sum of ``--query-compute-apps`` ``used_memory`` on this GPU.
    """

    index: int
    uuid: str
    name: str
    sm_clock_mhz: Num = NA()
    max_sm_clock_mhz: Num = NA()
    temperature_c: Num = NA()
    power_w: Num = NA()
    utilization_pct: Num = NA()
    memory_used_mib: Num = NA()
    memory_total_mib: Num = NA()
    pstate: str | NA = NA()
    clock_event_mask: int | NA = NA()
    counters: SlowdownCounters = SlowdownCounters()
    process_memory_mib: Num = NA()

    @property
    def key(self) -> str:
        """Stable key within a node: the UUID, else the index."""
        return self.uuid or f"gpu{self.index}"

    @property
    def implausible(self) -> tuple[str, ...]:
        """The reasons of the readings refused as implausible (``implausible: …``), in field
        order; empty when every reading is in its range or simply missing."""
        values = (
            self.sm_clock_mhz, self.max_sm_clock_mhz, self.temperature_c, self.power_w,
            self.utilization_pct, self.memory_used_mib, self.memory_total_mib,
            self.counters.sw_thermal_us, self.counters.hw_thermal_us,
            self.counters.sw_power_cap_us, self.counters.hw_power_brake_us,
        )  # fmt: skip
        return tuple(
            v.reason for v in values if isinstance(v, NA) and v.reason.startswith(IMPLAUSIBLE)
        )

    @property
    def clock_events(self) -> tuple[str, ...]:
        """Decoded active clock-event reasons (empty when unknown or none)."""
        mask = self.clock_event_mask
        return decode_clock_events(mask) if isinstance(mask, int) else ()

    @property
    def slowdowns(self) -> tuple[str, ...]:
        """Active reasons that are real slowdowns."""
        mask = self.clock_event_mask
        return slowdown_reasons(mask) if isinstance(mask, int) else ()


@dataclass(frozen=True, slots=True)
class NodeMemory:
    """Host memory of a node; on unified-memory machines (GB10) this is the GPU's memory too.

    Source: ``/proc/meminfo`` (``MemTotal − MemAvailable``) or psutil. ``gpu_held_mib`` is the
    sum of per-process GPU memory (``--query-compute-apps used_memory`` or NVML).
    Pressure (the slow tier): ``available_mib`` is ``MemAvailable``, ``swap_used_mib``
    ``SwapTotal − SwapFree`` (MiB); ``psi_some_pct`` / ``psi_full_pct`` the ``avg10`` share of
    the last 10 s in which some / all tasks stalled on memory, % (``/proc/pressure/memory``;
    NA with the reason on kernels without PSI).
    """

    total_mib: Num = NA()
    used_mib: Num = NA()
    gpu_held_mib: Num = NA()
    unified: bool = False
    read_s: float | None = None
    """When these values were read (wall clock) if that is before the sample they came with:
    the slow tier that refreshes them beside a GPU stream failed (``stale_reason`` says how).
    None: read for this sample."""
    stale_reason: str | None = None
    available_mib: Num = NA("not read")
    swap_total_mib: Num = NA("not read")
    swap_used_mib: Num = NA("not read")
    psi_some_pct: Num = NA("not read")
    psi_full_pct: Num = NA("not read")


@dataclass(frozen=True, slots=True)
class NodeSample:
    """The result of polling one node once: GPUs and memory, or a failure state.

    ``time_s`` is wall-clock (``time.time()``); ``since_s`` is when the current failure began
    (None when OK); ``latency_s`` is how long the probe took; ``raw`` the probe's output (for
    the detail screen, truncated). ``cpu_pct`` is host CPU use over all cores since the
    previous sample, % (psutil; only the local source reads it). ``probe`` says how an SSH
    node was read: ``stream (nvidia-smi -lms 1000)``, ``one-shot``, or ``one-shot: <why the
    stream is not used>`` (empty for other sources and for failures before any output).
    ``fabric`` is the RDMA ports (``/sys/class/infiniband``), ``power`` the ``spark_hwmon``
    (``spbm``) driver's channels, ``processes`` the GPU's compute processes, newest first
    (all from the slow tier; see :mod:`sparktop.hostmodel`).

    A source that backs off after a failure answers the polls in between with that failure
    again without re-checking: ``checked_s`` is then when it last really tried (wall clock;
    None when this poll tried), and ``retry_s`` when it will try next (wall clock; None when
    every poll tries). :func:`recheck_text` says both in words.
    """

    node: str
    time_s: float
    state: NodeState = NodeState.OK
    message: str = ""
    since_s: float | None = None
    gpus: tuple[GpuSample, ...] = ()
    memory: NodeMemory = NodeMemory()
    latency_s: float | None = None
    raw: str = ""
    driver_version: str = ""
    cpu_pct: Num = NA("not measured")
    probe: str = ""
    fabric: FabricReading = FabricReading()
    power: PowerTelemetry = field(default_factory=PowerTelemetry)
    processes: tuple[GpuProcess, ...] = ()
    checked_s: float | None = None
    retry_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.state is NodeState.OK


Sample: TypeAlias = NodeSample | EngineSample


@runtime_checkable
class Source(Protocol):
    """Anything that can be polled: an SSH node, the local machine, an engine, a fake.

    ``sample()`` never raises for remote failures: it returns a sample whose state says what
    went wrong. ``aclose()`` releases connections.
    """

    name: str
    kind: str
    """``"node"`` (its samples are :class:`NodeSample`) or ``"engine"`` (:class:`EngineSample`)."""

    async def sample(self) -> Sample: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class PacedSource(Source, Protocol):
    """A source that reads at the poller's period itself (an SSH node's GPU stream).

    ``follow_interval`` is called when polling starts and whenever the period changes;
    while ``self_paced`` is true, ``sample()`` waits for the next reading, so the poller
    polls again at once instead of waiting on top of it.
    """

    def follow_interval(self, interval_s: float) -> None: ...

    @property
    def self_paced(self) -> bool: ...


def failure_text(state: str, message: str, since_s: float | None = None) -> str:
    """One line for a source that did not answer: ``unreachable since 14:01:58: connection
    refused`` (``since_s``: Unix seconds, shown as local ``HH:MM:SS``), ``stale: …`` without
    it, the message alone when it already starts with the state, the state alone without a
    message. A sample's ``message`` holds the cause only; this is where "since" is added."""
    head = (
        state
        if since_s is None
        else f"{state} since {time.strftime('%H:%M:%S', time.localtime(since_s))}"
    )
    if not message or message == state:
        return head
    if message.lower().startswith(state.lower()):
        return message
    return f"{head}: {message}"


def recheck_text(sample: NodeSample, *, compact: bool = False) -> str:
    """When a failed node was last really tried and when it is tried next, relative to the
    poll (``sample.time_s``): ``checked 12 s ago, next try in 9 s``; ``next try in 4 s``
    when this poll tried; ``""`` for a source that tries every poll (no ``retry_s``).
    ``compact`` (a Nodes row, after the cause): ``12 s ago, retry in 9 s``."""
    if sample.retry_s is None:
        return ""
    wait_s = sample.retry_s - sample.time_s
    word = "retry" if compact else "next try"
    retry = f"{word} now" if wait_s < 0.5 else f"{word} in {wait_s:.0f} s"
    if sample.checked_s is None:
        return retry
    ago_s = max(0.0, sample.time_s - sample.checked_s)
    ago = "just now" if ago_s < 0.5 else f"{ago_s:.0f} s ago"
    return f"{ago}, {retry}" if compact else f"checked {ago}, {retry}"
