"""One nvidia-smi cell or header at a time: numbers with units, hex masks, ``[N/A]``.

A missing value becomes :class:`~sparktop.model.NA` keeping nvidia-smi's text, never 0.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from sparktop.model import IMPLAUSIBLE, NA, GpuSample
from sparktop.safe_text import printable, strip_escapes

MESSAGE_MAX = 120
REASON_MAX = 60
"""An NA keeps at most this much of the cell's text (a cell can be arbitrarily long junk)."""


class ParseError(ValueError):
    """Text that is not the nvidia-smi CSV (or meminfo) it was supposed to be."""


# -- cells -------------------------------------------------------------------------------------

_NUMBER_RE = re.compile(
    r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(W|MHz|%|[KMG]iB|[KMG]B/s|us|ms|s|C|W/s)?",
    re.ASCII,
)
"""A number with one of the units nvidia-smi prints (``[W]``, ``[MHz]``, ``[MiB]``, ``[us]``…)."""
_HEX_RE = re.compile(r"0[xX][0-9a-fA-F]{1,16}")
_DECIMAL_RE = re.compile(r"\d{1,20}", re.ASCII)


def parse_cell(text: str) -> float | NA:
    """One nvidia-smi value as a finite float, or :class:`NA` keeping the original text.

    ``41.37 W``, ``2509 MHz``, ``97 %``, ``0 us`` and bare numbers give floats (the unit is
    the field's documented one and is dropped); ``0x…`` (up to 64 bits) gives the integer
    value. ``[N/A]``, ``[Not Supported]``, ``[Requested functionality has been
    deprecated]``, ``N/A``, ``Not Supported``, ``ERR!``, non-finite numbers and anything else
    give ``NA(text)``; empty gives ``NA("empty")``.
    """
    value = text.strip()
    whole, dot, fraction = value.partition(".")
    if whole.isdigit() and (fraction.isdigit() if dot else True) and value.isascii():
        # The common cell (``2509``, ``41.37``): what the pattern would match, read as it.
        number = float(value)
        return number if math.isfinite(number) else missing(value)
    if not value:
        return NA("empty")
    if value[:2] in ("0x", "0X"):
        return float(int(value, 16)) if _HEX_RE.fullmatch(value) else missing(value)
    match = _NUMBER_RE.fullmatch(value)
    number = float(match.group(1)) if match else math.nan
    return number if math.isfinite(number) else missing(value)


def missing(text: str) -> NA:
    """``NA`` keeping the cell's text (cut to ``REASON_MAX`` characters), ``empty`` if blank."""
    value = text.strip()
    if not value:
        return NA("empty")
    return NA(value if len(value) <= REASON_MAX else value[: REASON_MAX - 1] + "…")


def parse_mask(text: str) -> int | NA:
    """A clock-event bitmask (``0x0000000000000020`` or decimal) as an int; NA otherwise."""
    value = text.strip()
    if _HEX_RE.fullmatch(value):
        return int(value, 16)
    if _DECIMAL_RE.fullmatch(value):
        return int(value)
    return missing(value)


def text_cell(text: str) -> str | NA:
    """A text column (name, UUID, pstate): the text, or NA for ``[…]``, ``N/A``, empty."""
    value = text.strip()
    if not value or value.startswith("[") or value in ("N/A", "Not Supported"):
        return missing(value)
    return value


# -- headers -----------------------------------------------------------------------------------

_UNIT_RE = re.compile(r"\s*\[[^\]]*\]\s*$")

ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "gpu_name": "name",
        "gpu_uuid": "uuid",
        "clocks.current.sm": "clocks.sm",
        "clocks_throttle_reasons.active": "clocks_event_reasons.active",
        "used_gpu_memory": "used_memory",
        "gpu_bus_id": "pci.bus_id",
    }
)
"""Alternative spellings → the name used here (from ``nvidia-smi --help-query-gpu``)."""


@functools.lru_cache(maxsize=512)
def normalise_header(name: str) -> str:
    """``' clocks.current.sm [MHz]'`` → ``'clocks.sm'``: units dropped, aliases folded."""
    key = _UNIT_RE.sub("", name).strip().lower()
    if key.startswith("clocks_throttle_reasons."):
        key = "clocks_event_reasons." + key.removeprefix("clocks_throttle_reasons.")
    return ALIASES.get(key, key)


NUMERIC_COLUMNS: Mapping[str, str] = MappingProxyType(
    {
        "clocks.sm": "sm_clock_mhz",
        "clocks.max.sm": "max_sm_clock_mhz",
        "temperature.gpu": "temperature_c",
        "power.draw": "power_w",
        "utilization.gpu": "utilization_pct",
        "memory.used": "memory_used_mib",
        "memory.total": "memory_total_mib",
    }
)
COUNTER_COLUMNS: Mapping[str, str] = MappingProxyType(
    {
        "clocks_event_reasons_counters.sw_thermal_slowdown": "sw_thermal_us",
        "clocks_event_reasons_counters.hw_thermal_slowdown": "hw_thermal_us",
        "clocks_event_reasons_counters.sw_power_cap": "sw_power_cap_us",
        "clocks_event_reasons_counters.hw_power_brake_slowdown": "hw_power_brake_us",
    }
)
PLAUSIBLE: Mapping[str, tuple[float, float, str]] = MappingProxyType(
    {
        "clocks.sm": (0.0, 10_000.0, "MHz"),
        "clocks.max.sm": (0.0, 10_000.0, "MHz"),
        "temperature.gpu": (0.0, 150.0, "°C"),
        "power.draw": (0.0, 5_000.0, "W"),
        "utilization.gpu": (0.0, 100.0, "%"),
        "memory.used": (0.0, 16.0 * 1024**2, "MiB"),
        "memory.total": (0.0, 16.0 * 1024**2, "MiB"),
    }
)
"""Each numeric GPU column's plausible range and unit. No GPU clocks past 10 GHz, runs past
150 °C (they shut down near 100), draws 5 kW (a GB200 superchip is ~2.7 kW) or holds 16 TiB;
below 0 none of them is a reading. A value outside is a broken driver or a hostile node and
is refused like an engine gauge past its range (:mod:`sparktop.sources.engines.reading`)."""

COUNTER_TOP_US = 1e15
"""Slowdown counters are µs since the driver loaded: 1e15 µs is 31 years."""


def plausible(column: str, value: float | NA) -> float | NA:
    """``value`` when it is inside ``column``'s range (:data:`PLAUSIBLE`; counters 0 to
    :data:`COUNTER_TOP_US`), else ``NA("implausible: temperature.gpu is -273 °C, not a
    plausible value (0–150 °C)")``; an NA is returned as it is."""
    if isinstance(value, NA):
        return value
    low, high, unit = PLAUSIBLE.get(column, (0.0, COUNTER_TOP_US, "µs"))
    if low <= value <= high:
        return value
    return NA(
        f"{IMPLAUSIBLE}{column} is {value:.4g} {unit}, not a plausible value "
        f"({low:,.0f}–{high:,.0f} {unit})"
    )


def checked(gpu: GpuSample) -> GpuSample:
    """``gpu`` with each numeric reading outside its column's range (:func:`plausible`) made
    an ``implausible: …`` NA: for GPUs read another way than nvidia-smi's CSV (NVML, DCGM)."""
    c = gpu.counters
    return replace(
        gpu,
        sm_clock_mhz=plausible("clocks.sm", gpu.sm_clock_mhz),
        max_sm_clock_mhz=plausible("clocks.max.sm", gpu.max_sm_clock_mhz),
        temperature_c=plausible("temperature.gpu", gpu.temperature_c),
        power_w=plausible("power.draw", gpu.power_w),
        utilization_pct=plausible("utilization.gpu", gpu.utilization_pct),
        memory_used_mib=plausible("memory.used", gpu.memory_used_mib),
        memory_total_mib=plausible("memory.total", gpu.memory_total_mib),
        counters=replace(
            c,
            sw_thermal_us=plausible("sw_thermal_slowdown", c.sw_thermal_us),
            hw_thermal_us=plausible("hw_thermal_slowdown", c.hw_thermal_us),
            sw_power_cap_us=plausible("sw_power_cap", c.sw_power_cap_us),
            hw_power_brake_us=plausible("hw_power_brake_slowdown", c.hw_power_brake_us),
        ),
    )


KNOWN_GPU_COLUMNS = frozenset(
    {"index", "uuid", "name", "pstate", "driver_version", "clocks_event_reasons.active"}
    | NUMERIC_COLUMNS.keys()
    | COUNTER_COLUMNS.keys()
)


def first_line(text: str, limit: int = MESSAGE_MAX) -> str:
    """The first line with a letter or digit (table borders skipped), whole escape sequences
    removed (:func:`~sparktop.safe_text.strip_escapes`), runs of spaces folded, other control
    characters shown as :func:`~sparktop.safe_text.printable` shows them (BEL → ``␇``), cut
    to ``limit`` characters."""
    for line in text.splitlines():
        clean = printable(" ".join(strip_escapes(line).split()))
        if any(ch.isalnum() for ch in clean):
            return clean if len(clean) <= limit else clean[: limit - 1] + "…"
    return "no output"
