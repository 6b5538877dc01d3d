"""Plain-text formatting of samples for the UI cells (no Textual, no colours).

Each function returns the text a cell shows; the widgets decide the style class. Missing
values (``NA``) format as ``n/a`` or ``·`` so display code rarely branches on them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from sparktop.model import GpuSample, NodeMemory, Num, Quantile, is_num
from sparktop.values import HUGE, bounded, gib_text

BARS = "▁▂▃▄▅▆▇█"
DASH = "·"
"""No reading at all (a node that is down, a baseline not learnt yet)."""
NA_TEXT = "n/a"
"""A value the GPU or server does not provide (``NA``): never shown as 0."""

SHORT_REASONS = {
    "gpu_idle": "idle",
    "applications_clocks_setting": "app-clk",
    "sw_power_cap": "pwr-cap",
    "hw_slowdown": "hw-slow",
    "sync_boost": "sync",
    "sw_thermal_slowdown": "sw-therm",
    "hw_thermal_slowdown": "hw-therm",
    "hw_power_brake_slowdown": "pwr-brake",
    "display_clock_setting": "disp",
}
"""Short names for NVML clock-event reasons (the help screen lists the long ones)."""


def spark(
    values: Sequence[float], width: int, low: float | None = None, high: float | None = None
) -> str:
    """A one-line block-character sparkline of the newest ``width`` values.

    Scaled ``low``..``high`` when given (a steady SM clock on a 0..max-clock scale draws a flat
    line and only a real sag a dip), else min..max of the data shown (any jitter fills the
    height). Values outside the scale are clamped; a value at the bottom still draws ``▁``.
    """
    data = list(values)[-width:]
    if not data:
        return ""
    bottom = min(data) if low is None else low
    top_value = max(data) if high is None else high
    span = top_value - bottom
    if span <= 0:
        return BARS[3] * len(data)
    top = len(BARS) - 1
    return "".join(BARS[round(max(0.0, min(1.0, (v - bottom) / span)) * top)] for v in data)


def plot_rows(
    values: Sequence[float], width: int, height: int, low: float, high: float
) -> list[str]:
    """A bar plot ``height`` lines tall, oldest value on the left, scaled ``low``..``high``.

    More values than ``width`` are averaged into ``width`` columns; fewer fill the left
    columns one each. Every value draws at least ``▁``, so a reading of 0 is visible (an
    absent reading is the caller's "n/a", never a bar). Returns the lines top first.
    """
    data = list(values)
    if not data or width <= 0 or height <= 0:
        return []
    if len(data) > width:
        step = len(data) / width
        columns = []
        for i in range(width):
            chunk = data[int(i * step) : int((i + 1) * step)] or [data[int(i * step)]]
            columns.append(sum(chunk) / len(chunk))
        data = columns
    levels = len(BARS) * height
    span = high - low if high > low else 1.0
    heights = [max(1, round(max(0.0, min(1.0, (v - low) / span)) * levels)) for v in data]
    rows = []
    for row in reversed(range(height)):
        base = row * len(BARS)
        rows.append(
            "".join(
                "█" if h - base >= len(BARS) else (BARS[h - base - 1] if h > base else " ")
                for h in heights
            )
        )
    return rows


def bar(fraction: Num, width: int) -> str:
    """A horizontal fill bar (``█`` filled, ``░`` empty) for a fraction 0–1."""
    if not is_num(fraction):
        return "░" * width
    filled = round(max(0.0, min(1.0, fraction)) * width)
    return "█" * filled + "░" * (width - filled)


def num(value: Num | None, spec: str = ",.0f") -> str:
    """A number, or ``n/a`` when the source does not provide it."""
    return bounded(value, spec) if is_num(value) else NA_TEXT


def pct(value: Num | None, spec: str = ".0f") -> str:
    """``97%``, or ``n/a``."""
    return f"{bounded(value, spec)}%" if is_num(value) else NA_TEXT


def si_tokens(value: Num | None) -> str:
    """Token counts shortened: 950, 12.3k, 2.49M."""
    if not is_num(value):
        return NA_TEXT
    v = float(value)
    if abs(v) >= HUGE:
        return bounded(v, ".3g")
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.1f}k"
    return f"{v:,.0f}"


def quantile(value: Quantile | Num | None) -> str:
    """A latency quantile (``< 10 ms`` when every observation was in the first bucket)."""
    if isinstance(value, Quantile):
        return str(value)
    if is_num(value):
        return str(Quantile(float(value)))
    return NA_TEXT


def seconds(value: Num | None) -> str:
    """A duration in seconds, ms below 1 s."""
    return quantile(value)


def band(low: Num | None, high: Num | None, unit: str = "") -> str:
    """An estimate's uncertainty band: ``5.10 s–7.70 s`` (``unit`` ``"s"``) or ``48.1–66.0``;
    "" when there is none or it is a single value (a measured cell)."""
    if not (is_num(low) and is_num(high)) or low == high:
        return ""
    if unit == "s":
        return f"{seconds(low)}–{seconds(high)}"
    spec = ",.0f" if float(high) >= 1000 else ",.1f"
    return f"{format(low, spec)}–{format(high, spec)}"


def gib(mib: Num | None) -> str:
    """MiB as GiB without the unit (``92``, ``1.4`` under 10 GiB): ``snapshot``'s formatter,
    so the monitor and the CLI write one node's memory alike."""
    return gib_text(mib)


def memory(mem: NodeMemory, gpu: GpuSample, *, compact: bool = False) -> str:
    """Memory for one GPU row.

    Unified (GB10): ``U 92/128G·GPU 64G`` — system used/total from ``/proc/meminfo`` and
    the GPU-held sum of per-process memory. Discrete: ``48/80G`` from ``memory.used/total``.
    """
    if mem.unified or not is_num(gpu.memory_total_mib):
        held = gpu.process_memory_mib if is_num(gpu.process_memory_mib) else mem.gpu_held_mib
        if compact:
            return f"U {_used_of(mem.used_mib, mem.total_mib)}"
        # An unknown figure is "n/a", never "n/aG" (the unit belongs to a number).
        held_text = f"{gib(held)}G" if is_num(held) else NA_TEXT
        return f"U {_used_of(mem.used_mib, mem.total_mib)}·GPU {held_text}"
    return _used_of(gpu.memory_used_mib, gpu.memory_total_mib)


def _used_of(used: Num, total: Num) -> str:
    """``92/128G``, or ``n/a`` when either side is unknown."""
    if not (is_num(used) and is_num(total)):
        return NA_TEXT
    return f"{gib(used)}/{gib(total)}G"


def reasons(gpu: GpuSample, low_power: bool = False) -> str:
    """Active clock-event reasons, short names, slowdowns first; ``low-power?`` first when the
    hidden low-power pattern holds (judged by the alert rule, passed in)."""
    names = [SHORT_REASONS.get(r, "other") for r in gpu.slowdowns]
    names += [SHORT_REASONS.get(r, "other") for r in gpu.clock_events if r not in gpu.slowdowns]
    if low_power:
        names.insert(0, "low-power?")
    return (
        ",".join(names) if names else ("none" if isinstance(gpu.clock_event_mask, int) else NA_TEXT)
    )


def clock_cell(clock: Num, baseline: float | None, below: bool, suffix: str = "") -> str:
    """``2509 /2530`` or ``1833▼/2509p``: SM clock, a marker when below baseline, baseline
    (``suffix`` ``p`` when it is the profile's, not yet this GPU's own)."""
    mark = "▼" if below else " "
    base = f"{baseline:.0f}{suffix}" if baseline is not None else DASH
    return f"{num(clock, '.0f'):>4}{mark}/{base}"


def deviation_pct(live: Num | None, expected: Num | None) -> float | None:
    """Signed deviation of live from expected, percent; None when either is missing or 0."""
    if not (is_num(live) and is_num(expected)) or expected == 0:
        return None
    return (float(live) - float(expected)) / float(expected) * 100.0


def signed_pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return DASH
    text = f"{value:+.0f}%"
    return "+0%" if text == "-0%" else text  # -0.4 rounds to zero: no sign on nothing


def clock_time(time_s: float) -> str:
    """Local wall-clock ``HH:MM:SS``."""
    return time.strftime("%H:%M:%S", time.localtime(time_s))


def age(seconds_ago: float | None) -> str:
    """How long ago, compactly: ``0.4 s``, ``12 s``, ``3 min``, ``2 h``."""
    if seconds_ago is None:
        return "never"
    s = max(0.0, seconds_ago)
    if s < 10:
        return f"{s:.1f} s"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.0f} h"


def span(seconds: float) -> str:
    """A graph's time span, btop-style: ``45s``, ``2m``, ``1h30m``, ``5h``."""
    s = max(0.0, seconds)
    if s < 100:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m"
    hours, minutes = divmod(round(s / 60), 60)
    return f"{hours}h{minutes:02d}m" if hours < 10 and minutes else f"{hours}h"
