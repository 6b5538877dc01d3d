"""RDMA port rates and error growth between two readings of one node's counters.

The counters are cumulative, read by the slow tier every few seconds; the clock is the
node's own ``/proc/uptime`` at the reading, so a slow SSH round trip does not bend the
rate. One tracker per node source. The stream repeats one reading for several intervals: a
reading at the same uptime returns the same result. A counter that goes down (driver
reload) or a clock that goes back (reboot) starts a new baseline, never a negative rate.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from sparktop.hostmodel import FabricPort, FabricReading
from sparktop.values import NA, Num, is_num

BITS_PER_BYTE = 8.0


class FabricRates:
    """``update(reading) -> reading`` with ``tx_gbps``, ``rx_gbps`` and ``errors_grown``."""

    def __init__(self) -> None:
        self._prev: FabricReading | None = None
        self._last_in: FabricReading | None = None
        self._last_out: FabricReading | None = None

    def update(self, reading: FabricReading) -> FabricReading:
        if not reading.ports or not is_num(reading.uptime_s):
            return reading
        if self._last_in is not None and self._last_in.uptime_s == reading.uptime_s:
            return self._last_out if self._last_out is not None else reading
        prev = self._prev
        out = reading
        if prev is not None and is_num(prev.uptime_s):
            dt = float(reading.uptime_s) - float(prev.uptime_s)
            before = {p.name: p for p in prev.ports}
            if dt > 0:
                out = replace(
                    reading, ports=tuple(_rated(p, before.get(p.name), dt) for p in reading.ports)
                )
        self._prev, self._last_in, self._last_out = reading, reading, out
        return out


def _rate(now: Num, then: Num, dt: float) -> Num:
    if not (is_num(now) and is_num(then)):
        return NA("counter not read")
    if now < then:
        return NA("counter reset")
    return (float(now) - float(then)) * BITS_PER_BYTE / dt / 1e9


def _rated(port: FabricPort, before: FabricPort | None, dt: float) -> FabricPort:
    if before is None:
        return port
    grown = {
        name: value - before.errors[name]
        for name, value in port.errors.items()
        if name in before.errors and value > before.errors[name]
    }
    return replace(
        port,
        tx_gbps=_rate(port.xmit_bytes, before.xmit_bytes, dt),
        rx_gbps=_rate(port.rcv_bytes, before.rcv_bytes, dt),
        errors_grown=MappingProxyType(grown),
    )
