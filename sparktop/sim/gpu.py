"""One simulated GB10 node: SM clock, temperature, power, utilisation, clock-event reasons.

Numbers follow load and faults. Facts used: max SM clock 3003 MHz and loaded clocks
2509/2522/2509/2541 MHz at 53–56 °C (4-Spark seed); 41.37 W at 2509 MHz and 97 %
(``cases/nvidia-smi/gb10-query-with-header.csv``); thermal sag 1833 MHz at 91 °C, 38 W with
bit 0x20 (``gb10-thermal-slowdown.csv``); hidden low power 513 MHz at 100 %, 14.9 W, no bit
(``gb10-hidden-low-power.csv``); idle 0 %, 11.17 W, 35 °C (``gb10-580.173.02-query-gpu-…``);
MemTotal 127,600,748 kB (``gb10-580.173.02-nvml-meminfo-probe.txt``). The idle SM clock is
not published; the simulator's value is invented and only shown when utilisation is low.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from sparktop.sim.hostfs import HostModel

MAX_SM_CLOCK_MHZ = 3003.0
IDLE_SM_CLOCK_MHZ = 850.0
THERMAL_SM_CLOCK_MHZ = 1833.0
THERMAL_TEMP_C = 92.0
THERMAL_ONSET_C = 87.0
LOW_POWER_SM_CLOCK_MHZ = 513.0
LOW_POWER_W = 14.9
STEADY_SLOW_CLOCK_MHZ = 2400.0
STEADY_SLOW_W = 17.0
STEADY_SLOW_PACE = 63.0 / 94.0
"""Decode 94 ms/step in the slow state against 63 ms healthy (the public report)."""
IDLE_TEMP_C = 36.0
IDLE_POWER_W = 11.2
MEM_TOTAL_KB = 127_600_748
SWAP_TOTAL_KB = 16_777_212
"""Invented: a 16 GiB swap file."""
OS_USED_KB = 3_900_000
VLLM_MEMORY_FRACTION = 0.83
"""Share of memory the vLLM worker holds on each node (the 4-Spark seed's static fraction)."""

BIT_GPU_IDLE = 0x1
BIT_SW_THERMAL = 0x20

TEMP_TAU_S = 4.0
"""Time constant of the temperature's first-order response, s."""
FAULT_TAU_S = 2.0
"""Faster response while a thermal fault heats the node (the tour shows it within seconds)."""


class Fault(enum.StrEnum):
    """What is wrong with a node's GPU."""

    NONE = "none"
    THERMAL = "thermal"
    LOW_POWER = "hidden-low-power"
    STEADY_SLOW = "steady-slow"
    """The slow state at a steady clock: ~2,400 MHz, ~17 W, 100 % busy, no reason bit, the
    firmware's PL1 cap lowered (the public report: 15–20 W vs 31–36 W, decode 63 vs 94 ms)."""
    STALLED = "engine-stall"
    """The engine deadlock as users report it (eugr/spark-vllm-docker#260): ~96 % busy at
    16–27 W, tokens frozen."""


@dataclass(slots=True)
class GpuModel:
    """Mutable state of one node's GPU, advanced by :meth:`step`.

    ``loaded`` is set by the cluster from its engine (running > 0). Counters are cumulative
    µs (``clocks_event_reasons_counters.*``). ``vllm_pid`` is the worker process holding
    memory (None when no engine runs on the node).
    """

    node: str
    index: int
    uuid: str
    nominal_clock_mhz: float
    loaded_temp_c: float
    rng: random.Random
    name: str = "NVIDIA GB10"
    fault: Fault = Fault.NONE
    loaded: bool = False
    vllm_pid: int | None = None
    host: HostModel = field(default_factory=lambda: HostModel(""))
    clock_mhz: float = IDLE_SM_CLOCK_MHZ
    temp_c: float = IDLE_TEMP_C
    power_w: float = IDLE_POWER_W
    util_pct: float = 0.0
    mask: int = BIT_GPU_IDLE
    counters_us: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(
            (
                "sw_thermal_slowdown",
                "hw_thermal_slowdown",
                "sw_power_cap",
                "hw_power_brake_slowdown",
            ),
            0.0,
        )
    )

    def step(self, dt: float) -> None:
        """Advance ``dt`` simulated seconds."""
        j = self.rng.uniform
        target_temp = self.loaded_temp_c if self.loaded else IDLE_TEMP_C
        if self.fault is Fault.THERMAL:
            target_temp = THERMAL_TEMP_C
        elif self.fault is Fault.LOW_POWER:
            target_temp = 47.0
        tau = FAULT_TAU_S if self.fault is Fault.THERMAL else TEMP_TAU_S
        self.temp_c += (target_temp - self.temp_c) * min(1.0, dt / tau)
        thermal = self.fault is Fault.THERMAL and self.temp_c >= THERMAL_ONSET_C
        if self.fault is Fault.STEADY_SLOW and self.loaded:
            # Steady clock, busy, but power at half its peers': nvidia-smi shows no reason.
            self.clock_mhz = STEADY_SLOW_CLOCK_MHZ + j(-6, 6)
            self.util_pct = 100.0
            self.power_w = STEADY_SLOW_W + j(-0.8, 0.8)
            self.mask = 0
        elif self.fault is Fault.STALLED and self.loaded:
            # Spinning: busy by nvidia-smi's measure, drawing idle-like power, no reason bit.
            self.clock_mhz = self.nominal_clock_mhz + j(-12, 12)
            self.util_pct = j(94, 98)
            self.power_w = j(16, 27)
            self.mask = 0
        elif self.fault is Fault.LOW_POWER:
            # The stuck state: busy, slow, cold and quiet, and no reason bit at all.
            self.clock_mhz = LOW_POWER_SM_CLOCK_MHZ + j(-2, 2)
            self.util_pct = 100.0 if self.loaded else j(0, 3)
            self.power_w = LOW_POWER_W + j(-0.3, 0.3)
            self.mask = 0
        elif thermal:
            self.clock_mhz = THERMAL_SM_CLOCK_MHZ + j(-8, 8)
            self.util_pct = j(97, 100) if self.loaded else j(0, 3)
            self.power_w = 38.0 + j(-0.6, 0.6)
            self.mask = BIT_SW_THERMAL
            self.counters_us["sw_thermal_slowdown"] += dt * 1e6
        elif self.loaded:
            self.clock_mhz = self.nominal_clock_mhz + j(-12, 12)
            self.util_pct = j(95, 99)
            self.power_w = 41.4 * self.clock_mhz / 2509.0 + j(-1.0, 1.0)
            self.mask = 0
        else:
            self.clock_mhz = IDLE_SM_CLOCK_MHZ + j(-20, 20)
            self.util_pct = j(0, 4)
            self.power_w = IDLE_POWER_W + j(-0.5, 0.5)
            self.mask = BIT_GPU_IDLE
        self.clock_mhz = min(self.clock_mhz, MAX_SM_CLOCK_MHZ)
        self.host.slow_cap = self.fault is Fault.STEADY_SLOW
        self.host.step(dt, self.loaded, self.power_w)

    @property
    def pace(self) -> float:
        """How fast this rank computes relative to its nominal clock (1.0 = full speed)."""
        if self.fault in (Fault.NONE, Fault.STALLED):
            return 1.0
        if self.fault is Fault.STEADY_SLOW:
            return STEADY_SLOW_PACE
        if self.fault is Fault.THERMAL and self.mask & BIT_SW_THERMAL == 0:
            return 1.0
        return min(1.0, self.clock_mhz / self.nominal_clock_mhz)

    @property
    def pstate(self) -> str:
        return "P0" if self.loaded or self.fault is not Fault.NONE else "P8"

    def side_processes(self) -> tuple[tuple[int, str, int], ...]:
        """Other compute processes beside the vLLM worker: (pid, name, MiB). Invented: during
        memory pressure a notebook starts on the GPU and grows."""
        if self.vllm_pid is None or self.host.pressure <= 0:
            return ()
        return ((self.vllm_pid + 9_000, "jupyter-lab", int(self.host.pressure * 18_000)),)

    def vllm_memory_mib(self) -> int:
        """GPU memory held by the vLLM worker (``--query-compute-apps used_memory``), MiB."""
        return int(MEM_TOTAL_KB * VLLM_MEMORY_FRACTION / 1024) if self.vllm_pid else 0

    def meminfo(self) -> str:
        """``/proc/meminfo`` of a 128 GB unified-memory node holding this GPU's worker."""
        total = MEM_TOTAL_KB
        used = OS_USED_KB + self.vllm_memory_mib() * 1024
        used += self.host.extra_used_kb(max(0, total - used))
        available = max(0, total - used)
        swap_used = self.host.swap_used_kb()
        cached = min(available, 2_400_000)
        free = max(0, available - cached - 300_000)
        rows = (
            ("MemTotal", total),
            ("MemFree", free),
            ("MemAvailable", available),
            ("Buffers", 61_440),
            ("Cached", cached),
            ("SwapCached", 0),
            ("Active", used // 2),
            ("Inactive", cached),
            ("Unevictable", 30_720),
            ("Mlocked", 30_720),
            ("SwapTotal", SWAP_TOTAL_KB),
            ("SwapFree", SWAP_TOTAL_KB - swap_used),
            ("Dirty", 96),
            ("Writeback", 0),
            ("AnonPages", used - OS_USED_KB // 2),
            ("Mapped", 412_160),
            ("Shmem", 56_320),
            ("KReclaimable", 184_320),
            ("Slab", 409_600),
            ("SReclaimable", 184_320),
            ("SUnreclaim", 225_280),
            ("KernelStack", 23_552),
            ("PageTables", 51_200),
            ("CommitLimit", total // 2),
            ("Committed_AS", used + 1_000_000),
            ("VmallocTotal", 133_143_592_960),
            ("HugePages_Total", 0),
        )
        lines = []
        for key, kb in rows:
            if key.startswith("HugePages"):
                lines.append(f"{key + ':':<15}{kb:>10}")
            else:
                lines.append(f"{key + ':':<15}{kb:>10} kB")
        return "\n".join(lines) + "\n"
