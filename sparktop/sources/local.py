"""This machine as a node: GPUs through NVML (``nvidia-ml-py``), memory through psutil.

Used for ``local: true`` inventory nodes and for ``sparktop`` without an inventory. NVML is
initialised once, in a worker thread like every other blocking call. Each reading is its own
call: one the device does not support becomes ``NA("Not Supported")`` and is not asked
again; a missing newer entry point falls back to the older one (clock-event reasons →
throttle reasons). No driver is a node state (``NO_DRIVER``), not an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psutil

from sparktop.model import NA, GpuSample, NodeMemory, NodeSample, NodeState, Num, is_num
from sparktop.sources.nvsmi import is_unified

MIB = 1024 * 1024
PSTATE_UNKNOWN = 32
"""``NVML_PSTATE_UNKNOWN``."""

NO_DRIVER_MESSAGE = "no NVIDIA driver (NVML not found)"


class _Never(Exception):
    """Stands in for an NVML error class this version of the bindings does not define."""


def _load_pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


class LocalSource:
    """Samples this machine. ``nvml`` is the ``pynvml`` module, imported when not given
    (tests pass a fake with the same functions and the real ``pynvml.NVMLError_*`` classes).

    ``sample()`` never raises for NVML failures; ``aclose()`` shuts NVML down.
    """

    kind = "node"

    def __init__(self, name: str = "localhost", nvml: Any = None) -> None:
        self.name = name
        self._nvml: Any = nvml if nvml is not None else _load_pynvml()
        self._lock = threading.Lock()  # one NVML conversation at a time
        self._initialised = False
        self._permanent: tuple[NodeState, str] | None = None
        self._handles: dict[int, Any] = {}
        self._skip: dict[tuple[int, str], NA] = {}
        self._old_reasons = False
        self._lost = False
        self._driver_version = ""
        self._since: float | None = None
        psutil.cpu_percent(interval=None)  # primes the counter; later calls are deltas

    async def sample(self) -> NodeSample:
        """One reading of every GPU and of host memory (blocking calls run in a thread)."""
        return await asyncio.to_thread(self._sample_blocking)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._shutdown)

    # -- blocking side -------------------------------------------------------------------------

    def _error(self, name: str) -> type[BaseException]:
        cls = getattr(self._nvml, name, None)
        return cls if isinstance(cls, type) and issubclass(cls, BaseException) else _Never

    def _init(self) -> tuple[NodeState, str] | None:
        if self._permanent is not None:
            return self._permanent
        if self._initialised:
            return None
        nvml = self._nvml
        if nvml is None:
            self._permanent = NodeState.NO_DRIVER, "no NVIDIA driver (nvidia-ml-py not installed)"
            return self._permanent
        try:
            nvml.nvmlInit()
        except (self._error("NVMLError_LibraryNotFound"), OSError):
            self._permanent = NodeState.NO_DRIVER, NO_DRIVER_MESSAGE
            return self._permanent
        except self._error("NVMLError_DriverNotLoaded"):
            return NodeState.NO_DRIVER, "no NVIDIA driver (kernel module not loaded)"
        except self._error("NVMLError_LibRmVersionMismatch"):
            return (
                NodeState.DRIVER_MISMATCH,
                "driver/library mismatch (reboot or reload the driver)",
            )
        except self._error("NVMLError") as exc:
            return NodeState.ERROR, f"NVML init failed: {exc}"
        self._initialised = True
        with contextlib.suppress(self._error("NVMLError")):
            self._driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        return None

    def _shutdown(self) -> None:
        with self._lock:
            if self._initialised:
                with contextlib.suppress(self._error("NVMLError")):
                    self._nvml.nvmlShutdown()
                self._initialised = False
                self._handles.clear()

    def _sample_blocking(self) -> NodeSample:
        started = time.perf_counter()
        now = time.time()
        with self._lock:
            memory = _host_memory()
            failure = self._init()
            gpus: tuple[GpuSample, ...] = ()
            if failure is None:
                gpus, failure = self._gpus()
        held = _sum_process_memory(gpus)
        memory = replace(memory, gpu_held_mib=held, unified=is_unified(gpus, memory.total_mib))
        if failure is None:
            self._since = None
        elif self._since is None:
            self._since = now
        state, message = failure or (NodeState.OK, "")
        return NodeSample(
            node=self.name,
            time_s=now,
            state=state,
            message=message,
            since_s=self._since,
            gpus=gpus,
            memory=memory,
            latency_s=time.perf_counter() - started,
            driver_version=self._driver_version,
            cpu_pct=_cpu_pct(),
        )

    def _gpus(self) -> tuple[tuple[GpuSample, ...], tuple[NodeState, str] | None]:
        try:
            count = int(self._nvml.nvmlDeviceGetCount())
        except self._error("NVMLError") as exc:
            return (), (NodeState.ERROR, f"NVML: {exc}")
        if count == 0:
            return (), (NodeState.NO_GPU, "no GPU visible")
        self._lost = False
        gpus = tuple(self._gpu(i) for i in range(count))
        if self._lost:
            self._handles.clear()
            return gpus, (NodeState.ERROR, "GPU lost (fallen off the bus; reboot needed)")
        return gpus, None

    def _gpu(self, i: int) -> GpuSample:
        nvml = self._nvml
        try:
            handle = self._handles.get(i) or nvml.nvmlDeviceGetHandleByIndex(i)
        except self._error("NVMLError") as exc:
            return GpuSample(index=i, uuid="", name=f"GPU {i} ({exc})")
        self._handles[i] = handle
        name = self._read(i, "name", nvml.nvmlDeviceGetName, handle)
        uuid = self._read(i, "uuid", nvml.nvmlDeviceGetUUID, handle)
        sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        memory = self._read(i, "memory", nvml.nvmlDeviceGetMemoryInfo, handle)
        util = self._read(i, "utilization", nvml.nvmlDeviceGetUtilizationRates, handle)
        pstate = self._read(i, "pstate", nvml.nvmlDeviceGetPerformanceState, handle)
        return GpuSample(
            index=i,
            uuid=_text(uuid) if not isinstance(uuid, NA) else "",
            name=_text(name) if not isinstance(name, NA) else "",
            sm_clock_mhz=_num(self._read(i, "sm_clock", nvml.nvmlDeviceGetClockInfo, handle, sm)),
            max_sm_clock_mhz=_num(
                self._read(i, "max_sm_clock", nvml.nvmlDeviceGetMaxClockInfo, handle, sm)
            ),
            temperature_c=_num(
                self._read(
                    i,
                    "temperature",
                    nvml.nvmlDeviceGetTemperature,
                    handle,
                    getattr(nvml, "NVML_TEMPERATURE_GPU", 0),
                )
            ),
            power_w=_scaled(self._read(i, "power", nvml.nvmlDeviceGetPowerUsage, handle), 1000),
            utilization_pct=_num(util if isinstance(util, NA) else getattr(util, "gpu", None)),
            memory_used_mib=_scaled(_attr(memory, "used"), MIB),
            memory_total_mib=_scaled(_attr(memory, "total"), MIB),
            pstate=_pstate(pstate),
            clock_event_mask=self._mask(i, handle),
            process_memory_mib=self._process_memory(i, handle),
        )

    def _read(
        self, i: int, key: str, fn: Callable[..., Any], *args: Any, fallback: bool = False
    ) -> Any:
        """One NVML call; its failure is an ``NA`` with the reason, cached when permanent.

        With ``fallback``, FunctionNotFound is raised instead so the caller can use an older
        call.
        """
        cached = self._skip.get((i, key))
        if cached is not None:
            return cached
        try:
            return fn(*args)
        except self._error("NVMLError_NotSupported"):
            return self._skip.setdefault((i, key), NA("Not Supported"))
        except self._error("NVMLError_FunctionNotFound"):
            if fallback:
                raise
            return self._skip.setdefault((i, key), NA("not in this driver"))
        except self._error("NVMLError_GpuIsLost") as exc:
            self._lost = True
            return NA(str(exc))
        except self._error("NVMLError") as exc:
            return NA(str(exc))

    def _mask(self, i: int, handle: Any) -> int | NA:
        nvml = self._nvml
        new = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        if new is not None and not self._old_reasons:
            try:
                return _mask(self._read(i, "clock_events", new, handle, fallback=True))
            except self._error("NVMLError_FunctionNotFound"):
                self._old_reasons = True  # driver < 535 knows only the throttle-reasons call
        old = nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        return _mask(self._read(i, "throttle_reasons", old, handle))

    def _process_memory(self, i: int, handle: Any) -> Num:
        procs = self._read(i, "processes", self._nvml.nvmlDeviceGetComputeRunningProcesses, handle)
        if isinstance(procs, NA):
            return procs
        used = [p.usedGpuMemory for p in procs if getattr(p, "usedGpuMemory", None) is not None]
        if procs and not used:
            return NA("per-process memory not reported")
        return float(sum(used)) / MIB


# -- conversions -------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _num(value: Any) -> Num:
    if isinstance(value, NA):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return NA("not reported")


def _scaled(value: Any, divisor: float) -> Num:
    number = _num(value)
    return number / divisor if is_num(number) else number


def _attr(value: Any, name: str) -> Any:
    return value if isinstance(value, NA) else getattr(value, name, None)


def _mask(value: Any) -> int | NA:
    if isinstance(value, NA):
        return value
    return int(value) if isinstance(value, int) else NA("not reported")


def _pstate(value: Any) -> str | NA:
    if isinstance(value, NA):
        return value
    if not isinstance(value, int) or value == PSTATE_UNKNOWN:
        return NA("unknown")
    return f"P{value}"


def _host_memory() -> NodeMemory:
    vm = psutil.virtual_memory()
    # total − available, like /proc/meminfo's MemTotal − MemAvailable on remote nodes.
    return NodeMemory(total_mib=vm.total / MIB, used_mib=(vm.total - vm.available) / MIB)


def _cpu_pct() -> Num:
    return float(psutil.cpu_percent(interval=None))


def _sum_process_memory(gpus: tuple[GpuSample, ...]) -> Num:
    if not gpus:
        return NA("no GPU")
    values = [gpu.process_memory_mib for gpu in gpus]
    missing = [v for v in values if not is_num(v)]
    if missing:
        first = missing[0]
        return first if isinstance(first, NA) else NA("not reported")
    return float(sum(v for v in values if is_num(v)))
