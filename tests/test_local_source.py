"""The local NVML + psutil source: the real no-driver path, and NVML behaviour through a fake
module that raises the real ``pynvml.NVMLError_*`` classes."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pynvml
import pytest

from sparktop.model import NA, NodeState, Source, num_or
from sparktop.sources.local import NO_DRIVER_MESSAGE, LocalSource
from tests.nvml_fake import Device, FakeNvml, MemoryInfo

MIB = 1024 * 1024


# -- the real machine (no GPU here) ------------------------------------------------------------


async def test_no_driver_on_this_machine_is_a_state() -> None:
    source = LocalSource("here")
    assert isinstance(source, Source) and source.kind == "node"
    first = await source.sample()
    if first.state is NodeState.OK:
        pytest.skip("this machine has an NVIDIA driver")
    assert first.state is NodeState.NO_DRIVER
    assert first.message == NO_DRIVER_MESSAGE
    assert first.gpus == ()
    # psutil still gives host memory; GPU-held memory is unknown, not 0.
    total, used = num_or(first.memory.total_mib, -1), num_or(first.memory.used_mib, -1)
    assert total > 0 and 0 <= used <= total
    assert isinstance(first.memory.gpu_held_mib, NA)
    second = await source.sample()
    assert second.since_s == first.since_s == first.time_s
    assert num_or(second.cpu_pct, -1) >= 0
    await source.aclose()


async def test_bindings_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    sample = await LocalSource("here").sample()
    assert sample.state is NodeState.NO_DRIVER and "nvidia-ml-py" in sample.message


@pytest.mark.parametrize(
    ("error", "state", "text"),
    [
        (pynvml.NVMLError_LibraryNotFound, NodeState.NO_DRIVER, "NVML not found"),
        (pynvml.NVMLError_DriverNotLoaded, NodeState.NO_DRIVER, "not loaded"),
        (pynvml.NVMLError_LibRmVersionMismatch, NodeState.DRIVER_MISMATCH, "reboot or reload"),
        (pynvml.NVMLError_Unknown, NodeState.ERROR, "Unknown Error"),
    ],
)
async def test_init_failures_are_states(
    error: type[Exception], state: NodeState, text: str
) -> None:
    sample = await LocalSource("here", nvml=FakeNvml([Device()], init_error=error)).sample()
    assert sample.state is state and text in sample.message


async def test_library_not_found_is_not_retried() -> None:
    fake = FakeNvml([Device()], init_error=pynvml.NVMLError_LibraryNotFound)
    source = LocalSource("here", nvml=fake)
    await source.sample()
    await source.sample()
    assert fake.calls["nvmlInit"] == 1


# -- readings through the fake -----------------------------------------------------------------


async def test_gb10_readings_and_unified_memory() -> None:
    fake = FakeNvml([Device()])
    source = LocalSource("spark-local", nvml=fake)
    sample = await source.sample()
    assert sample.state is NodeState.OK and sample.since_s is None
    assert sample.driver_version == "580.95.05"
    (gpu,) = sample.gpus
    assert (gpu.index, gpu.name) == (0, "NVIDIA GB10")
    assert gpu.uuid == "GPU-5f1c0000-0000-0000-0000-00000000a1b2"
    assert (gpu.sm_clock_mhz, gpu.max_sm_clock_mhz, gpu.temperature_c) == (2509, 3003, 55)
    assert gpu.power_w == pytest.approx(41.37)  # NVML reports mW
    assert gpu.utilization_pct == 97 and gpu.pstate == "P0"
    assert gpu.clock_event_mask == 0
    assert gpu.memory_total_mib == NA("Not Supported")
    assert gpu.memory_used_mib == NA("Not Supported")
    assert gpu.process_memory_mib == 20000
    assert sample.memory.unified and sample.memory.gpu_held_mib == 20000
    assert num_or(sample.memory.total_mib, 0) > 0
    # Blocking NVML calls ran off the event loop's thread.
    assert threading.get_ident() not in fake.threads
    await source.aclose()
    assert fake.calls["nvmlShutdown"] == 1


async def test_not_supported_is_cached_per_device() -> None:
    fake = FakeNvml([Device(), Device(uuid="GPU-2", memory=MemoryInfo(total=8 * MIB, used=MIB))])
    source = LocalSource("n", nvml=fake)
    for _ in range(3):
        sample = await source.sample()
    # Device 0 refused once and was not asked again; device 1 answered every time.
    assert fake.calls["nvmlDeviceGetMemoryInfo"] == 1 + 3
    assert fake.calls["nvmlInit"] == 1
    assert sample.gpus[0].memory_total_mib == NA("Not Supported")
    assert (sample.gpus[1].memory_used_mib, sample.gpus[1].memory_total_mib) == (1, 8)


async def test_old_driver_falls_back_to_throttle_reasons_once() -> None:
    device = Device(event_reasons=pynvml.NVMLError_FunctionNotFound, throttle_reasons=0x20)
    fake = FakeNvml([device])
    source = LocalSource("n", nvml=fake)
    first = await source.sample()
    second = await source.sample()
    assert first.gpus[0].clock_event_mask == 0x20
    assert second.gpus[0].slowdowns == ("sw_thermal_slowdown",)
    assert fake.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1
    assert fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2


async def test_bindings_without_the_new_call_use_the_old_one() -> None:
    class OldBindings(FakeNvml):
        nvmlDeviceGetCurrentClocksEventReasons = None  # type: ignore[assignment]

    sample = await LocalSource("n", nvml=OldBindings([Device(throttle_reasons=0x4)])).sample()
    assert sample.gpus[0].clock_event_mask == 0x4


async def test_each_reading_fails_on_its_own() -> None:
    device = Device(
        temp_c=pynvml.NVMLError_NotSupported,
        power_mw=pynvml.NVMLError_Unknown,
        pstate=32,  # NVML_PSTATE_UNKNOWN
        processes=[None],
        name=b"NVIDIA GB10",
    )
    sample = await LocalSource("n", nvml=FakeNvml([device])).sample()
    (gpu,) = sample.gpus
    assert gpu.temperature_c == NA("Not Supported")
    assert gpu.power_w == NA("Unknown Error")
    assert gpu.pstate == NA("unknown")
    assert isinstance(gpu.process_memory_mib, NA)
    assert isinstance(sample.memory.gpu_held_mib, NA)
    assert gpu.name == "NVIDIA GB10" and gpu.sm_clock_mhz == 2509  # the rest still read


async def test_no_gpu_and_lost_gpu() -> None:
    empty = await LocalSource("n", nvml=FakeNvml([])).sample()
    assert empty.state is NodeState.NO_GPU and empty.message == "no GPU visible"
    lost = Device(sm_mhz=pynvml.NVMLError_GpuIsLost)
    sample = await LocalSource("n", nvml=FakeNvml([lost])).sample()
    assert sample.state is NodeState.ERROR and "GPU lost" in sample.message


async def test_discrete_gpu_is_not_unified() -> None:
    device = Device(
        name="NVIDIA H100 80GB HBM3",
        memory=MemoryInfo(total=81559 * MIB, used=19818 * MIB),
        processes=[],
    )
    sample = await LocalSource("n", nvml=FakeNvml([device])).sample()
    (gpu,) = sample.gpus
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (19818, 81559)
    assert gpu.process_memory_mib == 0
    # Unless this machine happens to have ~80 GiB of RAM, that is a discrete GPU.
    total = num_or(sample.memory.total_mib, 0)
    assert sample.memory.unified == (abs(81559 - total) <= 0.02 * total)


# -- entry points the driver or the bindings lack ------------------------------------------------


async def test_driver_without_v3_process_call_uses_v2_once_for_all_devices() -> None:
    """Drivers before 510 lack ..._v3; pynvml's unversioned call then raises
    NVMLLibraryMismatchError (not an NVMLError), so the source calls the versions itself."""
    old = pynvml.NVMLError_FunctionNotFound
    fake = FakeNvml([Device(processes_v3=old), Device(uuid="GPU-2", processes_v3=old)])
    source = LocalSource("n", nvml=fake)
    for _ in range(2):
        sample = await source.sample()
    assert [g.process_memory_mib for g in sample.gpus] == [20000, 20000]
    assert sample.memory.gpu_held_mib == 40000
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v3"] == 1  # learnt once
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses_v2"] == 4


async def test_bindings_with_only_the_unversioned_process_call() -> None:
    class OnlyUnversioned(FakeNvml):
        nvmlDeviceGetComputeRunningProcesses_v2 = None  # type: ignore[assignment]

    old = pynvml.NVMLError_FunctionNotFound
    fake = OnlyUnversioned([Device(processes_v3=old)])
    with pytest.raises(pynvml.NVMLLibraryMismatchError):  # the trap this guards against
        fake.nvmlDeviceGetComputeRunningProcesses(fake.devices[0])
    sample = await LocalSource("n", nvml=fake).sample()
    assert sample.state is NodeState.OK
    assert sample.gpus[0].process_memory_mib == NA("not in this driver")
    assert sample.gpus[0].sm_clock_mhz == 2509


async def test_partly_reported_process_memory_is_unknown_not_smaller() -> None:
    sample = await LocalSource("n", nvml=FakeNvml([Device(processes=[100 * MIB, None])])).sample()
    assert sample.gpus[0].process_memory_mib == NA("memory not reported for 1 of 2 processes")
    assert sample.memory.gpu_held_mib == NA("memory not reported for 1 of 2 processes")


async def test_a_binding_bug_costs_one_reading() -> None:
    bad_name = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    class BadName(FakeNvml):
        def nvmlDeviceGetName(self, h: Device) -> Any:
            raise bad_name

    sample = await LocalSource("n", nvml=BadName([Device()])).sample()
    assert sample.state is NodeState.OK
    assert sample.gpus[0].name == "" and sample.gpus[0].sm_clock_mhz == 2509


async def test_gpu_lost_before_a_handle() -> None:
    class Lost(FakeNvml):
        def nvmlDeviceGetHandleByIndex(self, i: int) -> Device:
            raise pynvml.NVMLError_GpuIsLost()

    sample = await LocalSource("n", nvml=Lost([Device()])).sample()
    assert sample.state is NodeState.ERROR and "GPU lost" in sample.message


async def test_implausible_nvml_readings_are_refused_as_nvidia_smi_ones_are() -> None:
    """NVML's answers go through the same ranges as nvidia-smi's CSV: -273 °C, 1e30 mW and
    250 % are n/a with the reason; the in-range clock is kept."""
    fake = FakeNvml([Device(temp_c=-273, power_mw=10**30, util=250)])
    source = LocalSource("spark-local", nvml=fake)
    sample = await source.sample()
    await source.aclose()
    (gpu,) = sample.gpus
    assert gpu.sm_clock_mhz == 2509
    assert gpu.temperature_c == NA(
        "implausible: temperature.gpu is -273 °C, not a plausible value (0–150 °C)"
    )
    assert [r.split(" is ")[0] for r in gpu.implausible] == [
        "implausible: temperature.gpu",
        "implausible: power.draw",
        "implausible: utilization.gpu",
    ]
