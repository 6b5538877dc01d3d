"""A fake ``pynvml`` for LocalSource tests: the functions LocalSource calls, answering from
:class:`Device` records, raising the real ``pynvml.NVMLError_*`` classes, counting calls and
recording the calling threads."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pynvml

MIB = 1024 * 1024


@dataclass
class Device:
    """What one fake GPU answers; an exception class instead of a value is raised."""

    name: Any = "NVIDIA GB10"
    uuid: Any = "GPU-5f1c0000-0000-0000-0000-00000000a1b2"
    sm_mhz: Any = 2509
    max_sm_mhz: Any = 3003
    temp_c: Any = 55
    power_mw: Any = 41370
    util: Any = 97
    memory: Any = pynvml.NVMLError_NotSupported  # GB10: nvmlDeviceGetMemoryInfo unsupported
    pstate: Any = 0
    event_reasons: Any = 0
    throttle_reasons: Any = 0
    processes: Any = field(default_factory=lambda: [19135 * MIB, 865 * MIB])
    processes_v3: Any = None  # None: same as processes; an NVMLError class: a driver without it


@dataclass
class Proc:
    usedGpuMemory: int | None  # pynvml's attribute name


@dataclass
class MemoryInfo:
    total: int
    used: int


@dataclass
class Util:
    gpu: int
    memory: int = 0


class FakeNvml:
    """The subset of ``pynvml`` LocalSource uses, with call counts and calling threads."""

    NVMLError = pynvml.NVMLError
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_FunctionNotFound = pynvml.NVMLError_FunctionNotFound
    NVMLError_LibraryNotFound = pynvml.NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = pynvml.NVMLError_DriverNotLoaded
    NVMLError_LibRmVersionMismatch = pynvml.NVMLError_LibRmVersionMismatch
    NVMLError_GpuIsLost = pynvml.NVMLError_GpuIsLost
    NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError
    NVML_CLOCK_SM = pynvml.NVML_CLOCK_SM
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(self, devices: list[Device], init_error: type[Exception] | None = None) -> None:
        self.devices = devices
        self.init_error = init_error
        self.calls: Counter[str] = Counter()
        self.threads: set[int] = set()

    def _answer(self, name: str, value: Any) -> Any:
        self.calls[name] += 1
        self.threads.add(threading.get_ident())
        if isinstance(value, type) and issubclass(value, Exception):
            raise value()
        return value

    def nvmlInit(self) -> None:
        self._answer("nvmlInit", self.init_error)

    def nvmlShutdown(self) -> None:
        self._answer("nvmlShutdown", None)

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self._answer("nvmlSystemGetDriverVersion", "580.95.05"))

    def nvmlDeviceGetCount(self) -> int:
        return int(self._answer("nvmlDeviceGetCount", len(self.devices)))

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Device:
        return self._answer("nvmlDeviceGetHandleByIndex", self.devices[i])  # type: ignore[no-any-return]

    def nvmlDeviceGetName(self, h: Device) -> Any:
        return self._answer("nvmlDeviceGetName", h.name)

    def nvmlDeviceGetUUID(self, h: Device) -> Any:
        return self._answer("nvmlDeviceGetUUID", h.uuid)

    def nvmlDeviceGetClockInfo(self, h: Device, clock: int) -> Any:
        assert clock == pynvml.NVML_CLOCK_SM
        return self._answer("nvmlDeviceGetClockInfo", h.sm_mhz)

    def nvmlDeviceGetMaxClockInfo(self, h: Device, clock: int) -> Any:
        assert clock == pynvml.NVML_CLOCK_SM
        return self._answer("nvmlDeviceGetMaxClockInfo", h.max_sm_mhz)

    def nvmlDeviceGetTemperature(self, h: Device, sensor: int) -> Any:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._answer("nvmlDeviceGetTemperature", h.temp_c)

    def nvmlDeviceGetPowerUsage(self, h: Device) -> Any:
        return self._answer("nvmlDeviceGetPowerUsage", h.power_mw)

    def nvmlDeviceGetUtilizationRates(self, h: Device) -> Any:
        util = self._answer("nvmlDeviceGetUtilizationRates", h.util)
        return Util(util)

    def nvmlDeviceGetMemoryInfo(self, h: Device) -> Any:
        return self._answer("nvmlDeviceGetMemoryInfo", h.memory)

    def nvmlDeviceGetPerformanceState(self, h: Device) -> Any:
        return self._answer("nvmlDeviceGetPerformanceState", h.pstate)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Device) -> Any:
        return self._answer("nvmlDeviceGetCurrentClocksEventReasons", h.event_reasons)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: Device) -> Any:
        return self._answer("nvmlDeviceGetCurrentClocksThrottleReasons", h.throttle_reasons)

    def nvmlDeviceGetComputeRunningProcesses_v3(self, h: Device) -> Any:
        if h.processes_v3 is not None:
            self._answer("nvmlDeviceGetComputeRunningProcesses_v3", h.processes_v3)
        procs = self._answer("nvmlDeviceGetComputeRunningProcesses_v3", h.processes)
        return [Proc(p) for p in procs]

    def nvmlDeviceGetComputeRunningProcesses_v2(self, h: Device) -> Any:
        procs = self._answer("nvmlDeviceGetComputeRunningProcesses_v2", h.processes)
        return [Proc(p) for p in procs]

    @pynvml.throwOnVersionMismatch  # type: ignore[untyped-decorator]  # as pynvml does
    def nvmlDeviceGetComputeRunningProcesses(self, h: Device) -> Any:
        return self.nvmlDeviceGetComputeRunningProcesses_v3(h)
