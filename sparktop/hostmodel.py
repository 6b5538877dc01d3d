"""What a node shows beyond nvidia-smi: RDMA ports, the ``spark_hwmon`` power channels, and
the GPU's processes. Frozen, read by the slow tier of the probe (every few seconds).

Sources (fixed paths, read with ``grep -sH .`` so a missing file is simply absent):

* RDMA / RoCE (the kernel's ``Documentation/ABI/stable/sysfs-class-infiniband``):
  ``/sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer}``
  (``4: ACTIVE``, ``5: LinkUp``, ``200 Gb/sec (4X HDR)``), ``counters/*`` (``port_xmit_data``
  and ``port_rcv_data`` count 4-byte words), ``hw_counters/*`` (driver counters, mlx5),
  ``gid_attrs/ndevs/0`` (the network interface behind a RoCE port) and the adapter's hwmon
  ``device/hwmon/hwmon*/temp*_input`` (m°C). ``/proc/net/dev`` does not see RoCE traffic.
* ``spark_hwmon`` (the out-of-tree DGX Spark driver, github.com/antheas/spark_hwmon; its
  hwmon name is ``spbm``, from ``DRIVER_NAME`` in ``spbm.c``): ``power*_{label,input,cap}``
  (µW; labels ``sys_total``, ``soc_pkg``, ``gpu``, ``pl1``, ``pl2``, ``syspl1``…),
  ``energy*_{label,input}`` (µJ), ``prochot``, ``pl_level``.
* Processes: ``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory``.

The slow state these explain is the public report ``tonyd2wild/DeepSeek-V4.1-Flash-vLLM-DGX-
Spark#1`` (decode 63 vs 94 ms/step, 15–20 W vs 31–36 W at a steady clock); the memory
wedge ``NVIDIA/open-gpu-kernel-modules#1358``; the adapter overheating ``MiaAI-Lab/DeepSeek-
v4-Flash-DSpark-2x-DGX-Spark#146``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sparktop.values import NA, FloatMap, Num

ERROR_COUNTERS: tuple[str, ...] = (
    "symbol_error",
    "link_downed",
    "port_rcv_errors",
    "link_error_recovery",
)
"""``counters/*`` whose growth means a sick link (the kernel's port counters)."""

HW_ERROR_COUNTERS: tuple[str, ...] = (
    "rx_icrc_encapsulated",
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "implied_nak_seq_err",
    "req_cqe_error",
    "resp_cqe_error",
    "duplicate_request",
)
"""``hw_counters/*`` (mlx5) whose growth means retransmits or drops on a RoCE link."""


def _empty() -> Mapping[str, float]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class FabricPort:
    """One RDMA port. ``state`` / ``phys_state`` as sysfs prints them (``4: ACTIVE``,
    ``5: LinkUp``); ``rate`` likewise, ``rate_gbps`` its number. ``netdev`` is the network
    interface sysfs names for the port ("" when it names none). ``xmit_bytes`` /
    ``rcv_bytes`` are the cumulative counters × 4 (they count 4-byte words); ``tx_gbps`` /
    ``rx_gbps`` the rate between the last two readings (NA on the first). ``errors`` holds
    every error counter read (port and hw counters, cumulative); ``errors_grown`` how much
    each grew since the previous reading. ``temperature_c`` is the adapter's (its hwmon).
    """

    device: str
    port: int
    state: str = ""
    phys_state: str = ""
    rate: str = ""
    rate_gbps: Num = NA("not read")
    link_layer: str = ""
    netdev: str = ""
    xmit_bytes: Num = NA("not read")
    rcv_bytes: Num = NA("not read")
    tx_gbps: Num = NA("first reading")
    rx_gbps: Num = NA("first reading")
    errors: FloatMap = field(default_factory=_empty)
    errors_grown: FloatMap = field(default_factory=_empty)
    temperature_c: Num = NA("no adapter hwmon")

    @property
    def name(self) -> str:
        """``mlx5_0/1``."""
        return f"{self.device}/{self.port}"

    @property
    def up(self) -> bool:
        """The port is ``ACTIVE`` (state 4) and the physical link is up (``5: LinkUp``, or
        not reported)."""
        state = self.state.split(":")[0].strip()
        phys = self.phys_state.split(":")[0].strip()
        return state == "4" and phys in ("5", "")


@dataclass(frozen=True, slots=True)
class FabricReading:
    """A node's RDMA ports at one reading. ``missing`` is why there are none ("" when the
    fabric was read); ``uptime_s`` the node's ``/proc/uptime`` at the reading (its rates'
    clock)."""

    ports: tuple[FabricPort, ...] = ()
    missing: str = "not read"
    uptime_s: Num = NA("not read")

    @property
    def tx_gbps(self) -> Num:
        """Σ ``tx_gbps`` over the ports (NA while any is NA, or without ports)."""
        return _sum(p.tx_gbps for p in self.ports) if self.ports else NA(self.missing or "none")

    @property
    def rx_gbps(self) -> Num:
        return _sum(p.rx_gbps for p in self.ports) if self.ports else NA(self.missing or "none")


def _sum(values: Iterable[Num]) -> Num:
    total = 0.0
    for v in values:
        if isinstance(v, NA):
            return v
        total += float(v)
    return total


@dataclass(frozen=True, slots=True)
class PowerTelemetry:
    """The ``spark_hwmon`` (``spbm``) driver's readings, W and J by channel label
    (``sys_total``, ``gpu``, ``pl1``…; ``cap_w`` the ``power*_cap`` limits). ``driver`` is the
    hwmon name found ("" when the driver is absent: nothing is shown)."""

    driver: str = ""
    power_w: FloatMap = field(default_factory=_empty)
    cap_w: FloatMap = field(default_factory=_empty)
    energy_j: FloatMap = field(default_factory=_empty)
    prochot: Num = NA("not exposed")
    pl_level: Num = NA("not exposed")

    @property
    def present(self) -> bool:
        return bool(self.driver)

    def limit_near(self, channel: str, margin: float = 0.9) -> tuple[float, float] | None:
        """(power, cap) when ``channel`` runs at ≥ ``margin`` of its cap: it is the limit
        holding the node back."""
        power, cap = self.power_w.get(channel), self.cap_w.get(channel)
        if power is None or cap is None or cap <= 0:
            return None
        return (power, cap) if power >= margin * cap else None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One compute process on a GPU: ``used_mib`` from ``used_memory`` (MiB), ``share_pct``
    its share of the node's memory (unified on GB10: ``used_mib`` ÷ MemTotal)."""

    pid: int
    name: str
    gpu_uuid: str = ""
    used_mib: Num = NA()
    share_pct: Num = NA("memory total unknown")
