"""This machine as a node: GPUs through NVML (``nvidia-ml-py``), memory through psutil.

Used for ``local: true`` inventory nodes and for ``sparktop`` without an inventory. NVML is
initialised once, in a worker thread like every other blocking call. Each reading is its own
call: one the device does not support becomes ``NA("Not Supported")`` and is not asked
again; a newer entry point the driver lacks (FunctionNotFound) falls back to the older one
(clock-event → throttle reasons; compute processes ``_v3`` → ``_v2``). No driver is a node
state (``NO_DRIVER``), not an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from dataclasses import replace
from typing import Any

import psutil

from sparktop.model import NA, GpuSample, NodeMemory, NodeSample, NodeState, Num, is_num
from sparktop.sources.host.fabric_rates import FabricRates
from sparktop.sources.host.files import HostRead, parse_host
from sparktop.sources.host.read import read_host_files
from sparktop.sources.nvsmi import is_unified, sum_num
from sparktop.sources.nvsmi.cells import checked
from sparktop.sources.probe import SLOW_TIER_S

MIB = 1024 * 1024
PSTATE_UNKNOWN = 32
"""``NVML_PSTATE_UNKNOWN``."""

NO_DRIVER_MESSAGE = "no NVIDIA driver (NVML not found)"
MISMATCH_MESSAGE = "driver/library mismatch (reboot or reload the driver)"

_GET = "nvmlDeviceGet"
REASON_CALLS = (_GET + "CurrentClocksEventReasons", _GET + "CurrentClocksThrottleReasons")
"""Newest first: drivers before 535 have only the throttle-reasons call (same bit values)."""
PROCESS_CALLS = tuple(_GET + "ComputeRunningProcesses" + v for v in ("_v3", "_v2", ""))
"""Newest first. pynvml's unversioned call uses ``_v3`` and, on a driver before 510, raises
``NVMLLibraryMismatchError`` (not an ``NVMLError``), so the versions are called directly."""


class _Never(Exception):
    """Stands in for an NVML error class this version of the bindings does not define."""


class _Missing(Exception):
    """The driver lacks this entry point: try the next older one."""


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

    def __init__(self, name: str = "localhost", nvml: Any = None, host_root: str = "") -> None:
        self.name = name
        self.host_root = host_root
        """Prefix of the host files' paths (tests point it at a ``/sys``-shaped directory)."""
        self._host_text = ""
        self._host_at = -math.inf
        self._fabric_rates = FabricRates()
        self._nvml: Any = nvml if nvml is not None else _load_pynvml()
        self._lock = threading.Lock()  # one NVML conversation at a time
        self._initialised = False
        self._permanent: tuple[NodeState, str] | None = None
        self._handles: dict[int, Any] = {}
        self._skip: dict[tuple[int, str], NA] = {}
        self._first_call: dict[str, int] = {}  # reading → index of the newest call that exists
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
            return NodeState.DRIVER_MISMATCH, MISMATCH_MESSAGE
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
        held = sum_num(g.process_memory_mib for g in gpus) if gpus else NA("no GPU")
        memory = replace(memory, gpu_held_mib=held, unified=is_unified(gpus, memory.total_mib))
        host = self._host_files()
        memory = replace(memory, psi_some_pct=host.psi_some_pct, psi_full_pct=host.psi_full_pct)
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
            fabric=self._fabric_rates.update(host.fabric),
            power=host.power,
        )

    def _host_files(self) -> HostRead:
        """The host files, re-read every :data:`SLOW_TIER_S` (the SSH nodes' slow tier)."""
        if time.monotonic() - self._host_at >= SLOW_TIER_S:
            self._host_text = read_host_files(self.host_root)
            self._host_at = time.monotonic()
        return parse_host(self._host_text)

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
            self._lost = self._lost or isinstance(exc, self._error("NVMLError_GpuIsLost"))
            return GpuSample(index=i, uuid="", name=f"GPU {i} ({exc})")
        self._handles[i] = handle

        def read(key: str, call: str, *args: Any) -> Any:
            return self._read(i, key, call, handle, *args)

        sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        gpu_sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        uuid, name = read("uuid", "nvmlDeviceGetUUID"), read("name", "nvmlDeviceGetName")
        memory = read("memory", "nvmlDeviceGetMemoryInfo")  # bytes; NotSupported on GB10
        return checked(
            GpuSample(
                index=i,
                uuid="" if isinstance(uuid, NA) else _text(uuid),
                name="" if isinstance(name, NA) else _text(name),
                sm_clock_mhz=_num(read("sm_clock", "nvmlDeviceGetClockInfo", sm)),
                max_sm_clock_mhz=_num(read("max_sm_clock", "nvmlDeviceGetMaxClockInfo", sm)),
                temperature_c=_num(read("temperature", "nvmlDeviceGetTemperature", gpu_sensor)),
                power_w=_scaled(read("power", "nvmlDeviceGetPowerUsage"), 1000),  # mW → W
                utilization_pct=_num(_attr(read("util", "nvmlDeviceGetUtilizationRates"), "gpu")),
                memory_used_mib=_scaled(_attr(memory, "used"), MIB),
                memory_total_mib=_scaled(_attr(memory, "total"), MIB),
                pstate=_pstate(read("pstate", "nvmlDeviceGetPerformanceState")),
                clock_event_mask=_mask(self._newest(i, "clock_events", REASON_CALLS, handle)),
                process_memory_mib=_process_memory(
                    self._newest(i, "processes", PROCESS_CALLS, handle)
                ),
            )
        )

    def _read(self, i: int, key: str, call: str, *args: Any, fallback: bool = False) -> Any:
        """``nvml.<call>(*args)``; its failure is an ``NA`` with the reason, cached when
        permanent. With ``fallback``, a missing entry point raises :class:`_Missing` so the
        caller can use an older call."""
        cached = self._skip.get((i, key))
        if cached is not None:
            return cached
        fn = getattr(self._nvml, call, None)
        try:
            if not callable(fn):
                raise _Missing
            return fn(*args)
        except (
            _Missing,
            self._error("NVMLError_FunctionNotFound"),
            self._error("NVMLLibraryMismatchError"),
        ):
            if fallback:
                raise _Missing from None
            return self._skip.setdefault((i, key), NA("not in this driver"))
        except self._error("NVMLError_NotSupported"):
            return self._skip.setdefault((i, key), NA("Not Supported"))
        except self._error("NVMLError_GpuIsLost") as exc:
            self._lost = True
            return NA(str(exc))
        except self._error("NVMLError") as exc:
            return NA(str(exc))
        except Exception as exc:  # a binding bug (ctypes, decoding) costs one reading only
            return NA(f"{type(exc).__name__}: {exc}")

    def _newest(self, i: int, key: str, calls: tuple[str, ...], handle: Any) -> Any:
        """The reading from the newest of ``calls`` that the bindings and the driver have;
        a call the driver lacks is skipped from then on, for every device."""
        start = self._first_call.get(key, 0)
        for n, call in enumerate(calls[start:], start):
            try:
                return self._read(i, key, call, handle, fallback=n < len(calls) - 1)
            except _Missing:
                self._first_call[key] = n + 1
        return NA("not in this driver")


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


def _process_memory(procs: Any) -> Num:
    """Σ ``usedGpuMemory`` (bytes) in MiB; NA when any process's memory is not reported."""
    if isinstance(procs, NA):
        return procs
    used = [getattr(p, "usedGpuMemory", None) for p in procs]
    known = [u for u in used if isinstance(u, int)]
    if len(known) < len(used):
        return NA(f"memory not reported for {len(used) - len(known)} of {len(used)} processes")
    return float(sum(known)) / MIB


def _pstate(value: Any) -> str | NA:
    if isinstance(value, NA):
        return value
    if not isinstance(value, int) or value == PSTATE_UNKNOWN:
        return NA("unknown")
    return f"P{value}"


def _host_memory() -> NodeMemory:
    vm = psutil.virtual_memory()
    swap = psutil.swap_memory()
    # total − available, like /proc/meminfo's MemTotal − MemAvailable on remote nodes.
    return NodeMemory(
        total_mib=vm.total / MIB,
        used_mib=(vm.total - vm.available) / MIB,
        available_mib=vm.available / MIB,
        swap_total_mib=swap.total / MIB,
        swap_used_mib=swap.used / MIB,
    )


def _cpu_pct() -> Num:
    return float(psutil.cpu_percent(interval=None))
