"""Alert thresholds: the inventory's ``alerts:`` section plus the rule constants it omits.

Defaults (DESIGN.md §9; the inventory may override the first five):

=========================== ======= ===================================================
``clock_drop_pct``          10      SM clock this far below the GPU's own loaded baseline
``temperature_c``           85      GPU temperature above this (°C)
``kv_usage_pct``            90      KV-cache usage at or above this (% of the pool)
``expected_deficit_pct``    25      live TTFT/decode this much worse than the profile row
``hold_s``                  10      a condition must hold this long to fire and to clear
``low_power_util_pct``      80      hidden low power: utilisation at or above this …
``low_power_clock_ratio``   0.5     … SM clock below this share of baseline (else of max) …
``low_power_power_w``       25      … power below this (W), and no slowdown reason bit
``kv_critical_pct``         98      KV usage that, with requests waiting, is critical
``exhaustion_horizon_s``    300     warn when the KV slope fills the pool within this (s)
``exhaustion_usage_ratio``  0.5     … only once KV usage ≥ this share of ``kv_usage_pct``
``slope_window_s``          60      … and usage has risen over this long (s; least squares)
``exhaustion_fall_pct``     2       … the warning goes once usage falls this many points
                                    below its recent peak (the last quarter of the window)
``counter_window_s``        60      window for slowdown-counter growth (s)
``spec_drop_pct``           40      speculative acceptance this far below its own baseline
=========================== ======= ===================================================
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sparktop.inventory import AlertThresholds


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every number the alert rules compare against; see the module docstring."""

    clock_drop_pct: float = 10.0
    temperature_c: float = 85.0
    kv_usage_pct: float = 90.0
    expected_deficit_pct: float = 25.0
    hold_s: float = 10.0
    low_power_util_pct: float = 80.0
    low_power_clock_ratio: float = 0.5
    low_power_power_w: float = 25.0
    kv_critical_pct: float = 98.0
    exhaustion_horizon_s: float = 300.0
    exhaustion_usage_ratio: float = 0.5
    slope_window_s: float = 60.0
    exhaustion_fall_pct: float = 2.0
    counter_window_s: float = 60.0
    spec_drop_pct: float = 40.0

    @classmethod
    def from_config(cls, config: AlertThresholds | None) -> Thresholds:
        """Thresholds from the inventory's ``alerts:`` section; what it leaves out keeps its
        default."""
        if config is None:
            return cls()
        changes: dict[str, float] = {}
        for f in fields(cls):
            value = getattr(config, f.name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                changes[f.name] = float(value)
        return replace(cls(), **changes)
