"""Every :class:`~sparktop.model.GpuSample` field as the node detail screen shows it: its
standard term with the unit (``SM clock MHz``, ``power W``, ``clock-event reasons``), the
value in that unit, and the nvidia-smi field it is read from (Textual-free).

The terms are the ones the Nodes table, its help and ``docs/monitor.md`` use; a clock-event
reason keeps nvidia-smi's name (``sw_thermal_slowdown``) everywhere but the table's column.
"""

from __future__ import annotations

from dataclasses import fields

from sparktop.alerts.counters import COUNTER_LABELS
from sparktop.model import NA, GpuSample, is_num

GPU_FIELDS: dict[str, tuple[str, str, str]] = {
    "index": ("GPU index", "", "index"),
    "uuid": ("UUID", "", "uuid"),
    "name": ("name", "", "name"),
    "sm_clock_mhz": ("SM clock MHz", ",.0f", "clocks.sm"),
    "max_sm_clock_mhz": ("max SM clock MHz", ",.0f", "clocks.max.sm"),
    "temperature_c": ("temperature °C", ".0f", "temperature.gpu"),
    "power_w": ("power W", ".1f", "power.draw"),
    "utilization_pct": ("utilisation %", ".0f", "utilization.gpu"),
    "memory_used_mib": ("memory used MiB", ",.0f", "memory.used"),
    "memory_total_mib": ("memory total MiB", ",.0f", "memory.total"),
    "pstate": ("performance state", "", "pstate"),
    "clock_event_mask": ("clock-event reasons", "", "clocks_event_reasons.active"),
    "counters": ("time in slowdowns", "", "clocks_event_reasons_counters.*"),
    "process_memory_mib": ("GPU processes' memory MiB", ",.0f", "--query-compute-apps used_memory"),
}
"""Field → (label with its unit, number format, nvidia-smi field read). Every field of
:class:`GpuSample` has a row (``tests/ui/test_views.py`` holds them equal)."""

UNIFIED_NOTE = "unified memory: see memory below"
"""After a GPU memory figure n/a on a unified-memory node (GB10: nvidia-smi says ``[N/A]``)."""


def gpu_label(name: str) -> str:
    """The field's label (``sm_clock_mhz`` → ``SM clock MHz``)."""
    return GPU_FIELDS.get(name, (name.replace("_", " "), "", ""))[0]


def counters_text(counters: object) -> str:
    """``sw_thermal_slowdown 12.3 s · others 0 s``: time spent in each slowdown (µs
    counters in seconds) under nvidia-smi's names, as snapshot and the alerts write them; the
    ones at 0 together so the row fits 80 columns; one ``n/a (reason)`` when none is
    available for the same reason."""
    values = [(label, getattr(counters, name, NA())) for name, label in COUNTER_LABELS.items()]
    reasons = {v.reason for _, v in values if isinstance(v, NA)}
    if len(reasons) == 1 and all(isinstance(v, NA) for _, v in values):
        return f"n/a ({reasons.pop()})"
    parts = [
        f"{label} {v / 1e6:,.1f} s".replace(".0 s", " s") if is_num(v) else f"{label} n/a"
        for label, v in values
        if not (is_num(v) and v == 0)
    ]
    zeros = sum(1 for _, v in values if is_num(v) and v == 0)
    if zeros == len(values):
        parts.append("0 s in each")
    elif zeros:
        parts.append("others 0 s")
    return " · ".join(parts)


def gpu_value(name: str, value: object, gpu: GpuSample, unified: bool = False) -> str:
    """``value`` of field ``name`` in its label's unit (``2,519``, ``40.7``), ``0x20
    sw_thermal_slowdown`` for the reasons, ``n/a (reason)`` when not available (on a
    unified-memory node the GPU memory figures point at the memory section)."""
    if name == "clock_event_mask" and isinstance(value, int):
        return f"{value:#x} {', '.join(gpu.clock_events) or 'none'}"
    if name == "counters":
        return counters_text(value)
    if isinstance(value, NA) or (not is_num(value) and hasattr(value, "reason")):
        reason = str(getattr(value, "reason", "") or "not available")
        if unified and name in ("memory_used_mib", "memory_total_mib"):
            reason = f"{reason}; {UNIFIED_NOTE}"
        return f"n/a ({reason})"
    spec = GPU_FIELDS.get(name, ("", "", ""))[1]
    if spec and is_num(value) and not isinstance(value, bool):
        return format(float(value), spec)
    return str(value)


def gpu_field_rows(
    gpus: tuple[GpuSample, ...], unified: bool = False
) -> list[tuple[str, str, list[str], str]]:
    """(field name, label, value per GPU, nvidia-smi field) for every GpuSample field."""
    return [
        (
            f.name,
            gpu_label(f.name),
            [gpu_value(f.name, getattr(gpu, f.name), gpu, unified) for gpu in gpus],
            GPU_FIELDS.get(f.name, ("", "", ""))[2],
        )
        for f in fields(GpuSample)
    ]
