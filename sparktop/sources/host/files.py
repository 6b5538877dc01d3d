"""Pure parsers for the probe's ``host`` section: ``grep -sH .`` over fixed paths.

Each line is ``path:line`` (the path has no ``:``; the value may). Only paths of the expected
shapes are read, each bounded (:data:`MAX_PORTS`, :data:`MAX_COUNTERS`), so a hostile or
broken node costs at most the section's line limit. File formats (kernel ABI documents):

* ``/proc/uptime``: ``12345.67 54321.00`` (seconds since boot, idle seconds);
* ``/proc/pressure/memory`` (Documentation/accounting/psi.rst):
  ``some avg10=0.00 avg60=0.00 avg300=0.00 total=0`` and a ``full`` line;
* ``/sys/class/infiniband/<dev>/ports/<n>/…`` (Documentation/ABI/stable/sysfs-class-infiniband):
  ``state`` ``4: ACTIVE``, ``phys_state`` ``5: LinkUp``, ``rate`` ``200 Gb/sec (4X HDR)``,
  counters as decimal integers (``port_xmit_data`` / ``port_rcv_data`` in 4-byte words);
* hwmon (Documentation/hwmon/sysfs-interface.rst): ``temp*_input`` m°C, ``power*_input`` /
  ``power*_cap`` µW, ``energy*_input`` µJ, ``*_label`` text.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from types import MappingProxyType

from sparktop.hostmodel import (
    ERROR_COUNTERS,
    HW_ERROR_COUNTERS,
    FabricPort,
    FabricReading,
    PowerTelemetry,
)
from sparktop.values import NA, Num

MAX_PORTS = 32
"""RDMA ports read per node (a DGX Spark has 4 RDMA functions of 1 port each)."""
MAX_COUNTERS = 200
"""Counter files read per port (mlx5 has ~60)."""
MAX_VALUE_CHARS = 200
MAX_PATH_CHARS = 256
"""A longer path is skipped: the patterns take up to ~190 characters (a DGX Spark's longest
path has ~70), and each path's match is kept across readings (:data:`PATHS_KEPT`)."""

SPARK_HWMON_NAMES = frozenset({"spbm", "spark_hwmon"})
"""hwmon ``name`` of the DGX Spark power-telemetry driver (the module is ``spbm``)."""

NO_INFINIBAND = "no /sys/class/infiniband on this node (no RDMA device)"
NO_PSI = "no /proc/pressure/memory (kernel without PSI)"

_IB_PORT = re.compile(r"/sys/class/infiniband/([\w.-]{1,64})/ports/(\d{1,3})/([\w/]{1,96})")
_IB_TEMP = re.compile(r"/sys/class/infiniband/([\w.-]{1,64})/device/hwmon/hwmon\d+/temp(\d+)_input")
_HWMON = re.compile(r"/sys/class/hwmon/(hwmon\d{1,4})/(\w{1,40})")
_PSI = re.compile(r"(some|full)\s+avg10=([\d.]+)")
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_CHANNEL = re.compile(r"(power|energy)(\d{1,3})_(label|input|cap)")


@dataclass(frozen=True, slots=True)
class HostRead:
    """What the ``host`` section says: the node's clock, PSI avg10 (%), fabric, spark_hwmon."""

    uptime_s: Num = NA("not read")
    psi_some_pct: Num = NA("not read")
    psi_full_pct: Num = NA("not read")
    fabric: FabricReading = field(default_factory=FabricReading)
    power: PowerTelemetry = field(default_factory=PowerTelemetry)


def host_lines(text: str) -> list[tuple[str, str]]:
    """``(path, value)`` per ``path:line`` line; lines without ``/…:`` are skipped."""
    out = []
    for line in text.splitlines():
        path, sep, value = line.partition(":")
        if sep and path.startswith("/") and " " not in path and len(path) <= MAX_PATH_CHARS:
            out.append((path, value.strip()[:MAX_VALUE_CHARS]))
    return out


def _number(text: str) -> float | None:
    words = text.split()
    try:
        value = float(words[0]) if words else None
    except ValueError:
        return None
    return value if value is not None and value == value and abs(value) != float("inf") else None


PATHS_KEPT = 4096
"""Paths whose pattern match is kept: a node's host section names the same ~100 files in
every reading (a DGX Spark's), and matching each against the patterns again was most of
reading a new one. Each path is at most :data:`MAX_PATH_CHARS`, so this holds ~1 MB."""


@functools.lru_cache(maxsize=PATHS_KEPT)
def _ib_port(path: str) -> tuple[str, int, str] | None:
    """``(device, port, file)`` of an RDMA port file's path, else None."""
    match = _IB_PORT.fullmatch(path)
    return (match.group(1), int(match.group(2)), match.group(3)) if match else None


@functools.lru_cache(maxsize=PATHS_KEPT)
def _ib_temp(path: str) -> tuple[str, int] | None:
    """``(device, sensor)`` of an RDMA adapter's temperature file's path, else None."""
    match = _IB_TEMP.fullmatch(path)
    return (match.group(1), int(match.group(2))) if match else None


@functools.lru_cache(maxsize=PATHS_KEPT)
def _hwmon(path: str) -> tuple[str, str] | None:
    """``(hwmonN, file)`` of a hwmon file's path, else None."""
    match = _HWMON.fullmatch(path)
    return (match.group(1), match.group(2)) if match else None


@functools.lru_cache(maxsize=64)
def parse_host(text: str | None) -> HostRead:
    """The host section's body (None: the section is absent, e.g. an older probe or output
    cut short). Cached: the stream repeats one slow-tier reading for several intervals."""
    if text is None:
        return HostRead()
    lines = host_lines(text)
    uptime: Num = NA("no /proc/uptime")
    psi: dict[str, float] = {}
    for path, value in lines:
        if path == "/proc/uptime":
            seconds = _number(value)
            if seconds is not None and seconds >= 0:
                uptime = seconds
        elif path == "/proc/pressure/memory":
            match = _PSI.match(value)
            if match:
                psi[match.group(1)] = float(match.group(2))
    some: Num = psi.get("some", NA(NO_PSI))
    full: Num = psi.get("full", NA(NO_PSI) if "some" not in psi else NA("no 'full' line in PSI"))
    return HostRead(uptime, some, full, parse_fabric(lines, uptime), parse_spark_hwmon(lines))


# -- RDMA ports --------------------------------------------------------------------------------


def parse_fabric(lines: list[tuple[str, str]], uptime_s: Num = NA("not read")) -> FabricReading:
    """The RDMA ports in ``lines`` (see the module docstring); no port lines → no ports and
    :data:`NO_INFINIBAND` as the reason."""
    ports: dict[tuple[str, int], dict[str, str]] = {}
    temps: dict[str, dict[int, float]] = {}
    for path, value in lines:
        port_file = _ib_port(path)
        if port_file is not None:
            device, port, name = port_file
            files = ports.get((device, port))
            if files is None:
                if len(ports) >= MAX_PORTS:
                    continue
                files = ports[(device, port)] = {}
            if len(files) < MAX_COUNTERS + 8:
                files.setdefault(name, value)
            continue
        sensor = _ib_temp(path)
        if sensor is not None:
            milli = _number(value)
            if milli is not None:
                temps.setdefault(sensor[0], {})[sensor[1]] = milli / 1000.0
    if not ports:
        return FabricReading(missing=NO_INFINIBAND, uptime_s=uptime_s)
    out = []
    for (device, port), files in sorted(ports.items()):
        device_temps = temps.get(device, {})
        temp: Num = device_temps[min(device_temps)] if device_temps else NA("no adapter hwmon")
        out.append(_port(device, port, files, temp))
    return FabricReading(ports=tuple(out), missing="", uptime_s=uptime_s)


def _port(device: str, port: int, files: dict[str, str], temp: Num) -> FabricPort:
    rate_text = files.get("rate", "")
    rate = _RATE.match(rate_text)
    errors: dict[str, float] = {}
    for prefix, names in (("counters/", ERROR_COUNTERS), ("hw_counters/", HW_ERROR_COUNTERS)):
        for name in names:
            value = _number(files.get(prefix + name, ""))
            if value is not None:
                errors[name] = value
    return FabricPort(
        device=device,
        port=port,
        state=files.get("state", ""),
        phys_state=files.get("phys_state", ""),
        rate=rate_text,
        rate_gbps=float(rate.group(1)) if rate else NA("no rate in sysfs"),
        link_layer=files.get("link_layer", ""),
        netdev=files.get("gid_attrs/ndevs/0", ""),
        xmit_bytes=_words(files, "port_xmit_data"),
        rcv_bytes=_words(files, "port_rcv_data"),
        errors=MappingProxyType(errors),
        temperature_c=temp,
    )


def _words(files: dict[str, str], name: str) -> Num:
    """A data counter in bytes: the kernel counts 4-byte words."""
    value = _number(files.get(f"counters/{name}", ""))
    return value * 4.0 if value is not None and value >= 0 else NA(f"no counters/{name}")


# -- spark_hwmon --------------------------------------------------------------------------------


def parse_spark_hwmon(lines: list[tuple[str, str]]) -> PowerTelemetry:
    """The ``spark_hwmon`` (``spbm``) channels, W / J by label; absent → empty telemetry."""
    by_dir: dict[str, dict[str, str]] = {}
    for path, value in lines:
        found = _hwmon(path)
        if found is not None:
            files = by_dir.setdefault(found[0], {})
            if len(files) < MAX_COUNTERS:
                files.setdefault(found[1], value)
    for files in by_dir.values():
        name = files.get("name", "")
        if name in SPARK_HWMON_NAMES:
            return _telemetry(name, files)
    return PowerTelemetry()


def _telemetry(name: str, files: dict[str, str]) -> PowerTelemetry:
    labels: dict[tuple[str, str], str] = {}
    readings: dict[tuple[str, str, str], float] = {}
    for attr, value in files.items():
        match = _CHANNEL.fullmatch(attr)
        if not match:
            continue
        kind, index, what = match.groups()
        if what == "label":
            labels[(kind, index)] = value
        else:
            number = _number(value)
            if number is not None:
                readings[(kind, index, what)] = number / 1e6  # µW → W, µJ → J
    power: dict[str, float] = {}
    cap: dict[str, float] = {}
    energy: dict[str, float] = {}
    for (kind, index, what), number in sorted(readings.items()):
        label = labels.get((kind, index), f"{kind}{index}")
        target = energy if kind == "energy" else (cap if what == "cap" else power)
        target.setdefault(label, number)
    prochot = _number(files.get("prochot", ""))
    level = _number(files.get("pl_level", ""))
    return PowerTelemetry(
        driver=name,
        power_w=MappingProxyType(power),
        cap_w=MappingProxyType(cap),
        energy_j=MappingProxyType(energy),
        prochot=prochot if prochot is not None else NA("no prochot file"),
        pl_level=level if level is not None else NA("no pl_level file"),
    )
