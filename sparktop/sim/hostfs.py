"""The files a simulated GB10 host shows the probe's ``grep -sH .``: ``/proc/uptime``, PSI,
the ConnectX-7's RDMA ports and its hwmon, and the ``spark_hwmon`` (``spbm``) driver.

Formats follow the kernel's documentation (see :mod:`sparktop.sources.host.files`). Facts:
a DGX Spark's ConnectX-7 shows as RDMA devices ``rocep1s0f0`` / ``rocep1s0f1`` on netdevs
``enp1s0f0np0`` / ``enp1s0f1np1`` at 200 Gb/s; the ``spbm`` channel labels are the driver's.
Invented (not published): the tensor-parallel traffic per node (~12 Gb/s each way while
decoding), the NIC temperature, the power caps (PL1 140 W, SysPL1 240 W) and the slow
state's lowered PL1 cap (30 W), the swap size (16 GiB) and the pressure figures.
"""

from __future__ import annotations

import fnmatch
import functools
import random
from dataclasses import dataclass, field

PORTS = (("rocep1s0f0", "enp1s0f0np0"), ("rocep1s0f1", "enp1s0f1np1"))
LOADED_GBPS = 12.0
"""Each direction, per node, while its engine decodes (split over the two ports)."""
IDLE_GBPS = 0.002
PL1_CAP_W = 140.0
SLOW_PL1_CAP_W = 30.0
SYSPL1_CAP_W = 240.0
PRESSURE_RAMP_S = 8.0

_COUNTERS = (
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "port_rcv_constraint_errors",
    "port_rcv_data",
    "port_rcv_errors",
    "port_rcv_packets",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_data",
    "port_xmit_discards",
    "port_xmit_packets",
    "port_xmit_wait",
    "symbol_error",
    "VL15_dropped",
)
_HW_COUNTERS = (
    "duplicate_request",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "req_cqe_error",
    "resp_cqe_error",
    "rnr_nak_retry_err",
    "rx_icrc_encapsulated",
    "rx_read_requests",
    "rx_write_requests",
)


@dataclass(slots=True)
class _Port:
    device: str
    netdev: str
    tx_words: float = 0.0
    rx_words: float = 0.0
    counters: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class HostModel:
    """Mutable host state of one simulated node, advanced with its GPU.

    Faults: ``link_down`` (the first port goes ``1: DOWN`` / ``3: Disabled``, ``link_downed``
    and ``link_error_recovery`` tick once, ``symbol_error`` grows, traffic collapses: the ring's
    collectives stall), ``pressure_rising`` (``pressure`` climbs 0→1 in 8 s: MemAvailable
    falls towards 1.5 GiB, swap fills, PSI climbs), ``slow_cap`` (the firmware PL1 cap
    lowered: the slow state at a steady clock)."""

    seed: str
    uptime_s: float = 86_400.0
    link_down: bool = False
    pressure: float = 0.0
    pressure_rising: bool = False
    slow_cap: bool = False
    ports: list[_Port] = field(default_factory=list)
    energy_j: float = 0.0
    gpu_power_w: float = 0.0
    psi_some: float = 0.0
    psi_full: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    _down_counted: bool = False

    def __post_init__(self) -> None:
        self.rng = random.Random(f"host/{self.seed}")
        names = _COUNTERS + _HW_COUNTERS
        self.ports = [_Port(d, n, counters=dict.fromkeys(names, 0)) for d, n in PORTS]
        for port in self.ports:
            port.tx_words = self.rng.uniform(1e11, 2e11)
            port.rx_words = port.tx_words * self.rng.uniform(0.98, 1.02)

    def step(self, dt: float, loaded: bool, gpu_power_w: float) -> None:
        self.uptime_s += dt
        self.gpu_power_w = gpu_power_w
        if self.pressure_rising:  # a leak: the page cache and then swap are eaten in ~8 s
            self.pressure = min(1.0, self.pressure + dt / PRESSURE_RAMP_S)
        self.energy_j += gpu_power_w * dt
        gbps = LOADED_GBPS if loaded else IDLE_GBPS
        if self.link_down:
            gbps *= 0.05
        for i, port in enumerate(self.ports):
            if self.link_down and i == 0:
                if not self._down_counted:  # one transition to down per episode
                    port.counters["link_downed"] += 1
                    port.counters["link_error_recovery"] += 1
                    self._down_counted = True
                port.counters["symbol_error"] += self.rng.randint(0, 40)
                continue
            words = gbps / len(self.ports) * 1e9 / 8 / 4 * dt * self.rng.uniform(0.97, 1.03)
            port.tx_words += words
            port.rx_words += words * self.rng.uniform(0.98, 1.02)
        target_some = 38.0 * self.pressure**2
        tau = 3.0 if self.pressure_rising else 1.0  # avg10 decays fast once the leak is gone
        self.psi_some += (target_some - self.psi_some) * min(1.0, dt / tau)
        self.psi_full += (target_some * 0.35 - self.psi_full) * min(1.0, dt / tau)

    def clear(self) -> None:
        self.link_down = False
        self._down_counted = False
        self.pressure = 0.0
        self.pressure_rising = False
        self.slow_cap = False  # the error counters stay: they are cumulative

    # -- memory --------------------------------------------------------------------------

    def extra_used_kb(self, available_kb: int) -> int:
        """Memory the pressure fault takes from ``available_kb`` (down to ~1.5 GiB left)."""
        floor = 1_500_000
        return int(max(0, available_kb - floor) * min(1.0, self.pressure))

    def swap_used_kb(self) -> int:
        return int(6_000_000 * min(1.0, self.pressure) ** 2)

    # -- files ---------------------------------------------------------------------------

    def files(self) -> dict[str, str]:
        """Path → content, as the kernel prints them."""
        out: dict[str, str] = {
            "/proc/uptime": f"{self.uptime_s:.2f} {self.uptime_s * 17.3:.2f}\n",
            "/proc/pressure/memory": (
                f"some avg10={self.psi_some:.2f} avg60={self.psi_some * 0.6:.2f} "
                f"avg300={self.psi_some * 0.2:.2f} total={int(self.psi_some * 1e6)}\n"
                f"full avg10={self.psi_full:.2f} avg60={self.psi_full * 0.6:.2f} "
                f"avg300={self.psi_full * 0.2:.2f} total={int(self.psi_full * 1e6)}\n"
            ),
        }
        for i, port in enumerate(self.ports):
            base = f"/sys/class/infiniband/{port.device}/ports/1"
            down = self.link_down and i == 0
            out[f"{base}/state"] = "1: DOWN\n" if down else "4: ACTIVE\n"
            out[f"{base}/phys_state"] = "3: Disabled\n" if down else "5: LinkUp\n"
            out[f"{base}/rate"] = "40 Gb/sec (4X QDR)\n" if down else "200 Gb/sec (4X HDR)\n"
            out[f"{base}/link_layer"] = "Ethernet\n"
            out[f"{base}/gid_attrs/ndevs/0"] = f"{port.netdev}\n"
            for name, value in port.counters.items():
                folder = "hw_counters" if name in _HW_COUNTERS else "counters"
                if name == "port_xmit_data":
                    value = int(port.tx_words)
                elif name == "port_rcv_data":
                    value = int(port.rx_words)
                out[f"{base}/{folder}/{name}"] = f"{value}\n"
            temp = 58.0 + (4.0 if self.gpu_power_w > 30 else 0.0)
            out[f"/sys/class/infiniband/{port.device}/device/hwmon/hwmon{3 + i}/temp1_input"] = (
                f"{int(temp * 1000)}\n"
            )
        out.update(self._spbm("/sys/class/hwmon/hwmon2"))
        out["/sys/class/hwmon/hwmon0/name"] = "acpitz\n"
        return out

    def _spbm(self, base: str) -> dict[str, str]:
        gpu = self.gpu_power_w
        pl1_cap = SLOW_PL1_CAP_W if self.slow_cap else PL1_CAP_W
        soc = gpu + 17.0
        pl1 = min(soc, pl1_cap * 0.98)
        channels = (
            ("sys_total", soc + 9.0, None),
            ("soc_pkg", soc, None),
            ("gpu", gpu, None),
            ("pl1", pl1, pl1_cap),
            ("syspl1", soc + 9.0, SYSPL1_CAP_W),
        )
        out = {f"{base}/name": "spbm\n"}
        for n, (label, watts, cap) in enumerate(channels, start=1):
            out[f"{base}/power{n}_label"] = f"{label}\n"
            out[f"{base}/power{n}_input"] = f"{int(watts * 1e6)}\n"
            if cap is not None:
                out[f"{base}/power{n}_cap"] = f"{int(cap * 1e6)}\n"
        out[f"{base}/energy1_label"] = "gpu\n"
        out[f"{base}/energy1_input"] = f"{int(self.energy_j * 1e6)}\n"
        out[f"{base}/prochot"] = "0\n"
        out[f"{base}/pl_level"] = "1\n" if self.slow_cap else "0\n"
        return out


def glob_match(pattern: str, path: str) -> bool:
    """Shell glob semantics for one path: ``*`` never crosses a ``/``."""
    parts, names = pattern.split("/"), path.split("/")
    return len(parts) == len(names) and all(
        fnmatch.fnmatchcase(n, p) for p, n in zip(parts, names, strict=True)
    )


@functools.lru_cache(maxsize=256)
def _matching(pattern: str, paths: tuple[str, ...]) -> tuple[str, ...]:
    """The paths a glob expands to, sorted (cached: a node's file set rarely changes)."""
    return tuple(sorted(p for p in paths if glob_match(pattern, p)))


def grep_files(files: dict[str, str], patterns: list[str]) -> tuple[str, int]:
    """``grep -sH . PATTERN…``: ``path:line`` for every non-empty line of every matching file,
    patterns in order, matches sorted like the shell sorts them; status 0 if any line."""
    out: list[str] = []
    paths = tuple(files)
    for pattern in patterns:
        for path in _matching(pattern, paths):
            out.extend(f"{path}:{line}" for line in files[path].splitlines() if line)
    return "".join(line + "\n" for line in out), 0 if out else 1
