"""Alert thresholds: the inventory's ``alerts:`` section plus the rule constants it omits.

Defaults (DESIGN.md §9, §13; the inventory may override the first five and the host ones
below them):

=========================== ======= ===================================================
``clock_drop_pct``          10      SM clock this far below the GPU's own loaded baseline
``temperature_c``           85      GPU temperature above this (°C)
``kv_usage_pct``            90      KV-cache usage at or above this (% of the pool)
``expected_deficit_pct``    25      live TTFT/decode this much worse than the profile row
``hold_s``                  10      a condition must hold this long to fire and to clear
``mem_available_warn_gib``  8       MemAvailable below this warns (GiB; ~6.5 % of GB10's
                                    121.7 GiB MemTotal, under half what vLLM at 0.83 leaves)
``mem_available_critical_gib`` 2    … and below this is critical (the host is about to wedge)
``swap_used_warn_gib``      2       swap in use above this warns (GiB)
``psi_some_warn_pct``       10      PSI memory ``some`` avg10 at or above this warns (%)
``psi_full_critical_pct``   5       PSI memory ``full`` avg10 at or above this is critical
``peer_power_ratio``        0.7     a busy TP rank below this share of its peers' median
                                    power is ``low power vs peers`` (15–20 W vs 31–36 W)
``fabric_asymmetry_ratio``  0.5     a busy TP rank moving less than this share of its
                                    peers' median RoCE traffic is flagged
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
``peer_min_power_w``        25      … only when the peers' median power is at least this (W)
``fabric_min_gbps``         1       … and the peers' median traffic at least this (Gb/s)
``stall_s``                 20      ``engine.stalled``: requests running and no token for
                                    this long, the KV in use unchanged as long (s)
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
    mem_available_warn_gib: float = 8.0
    mem_available_critical_gib: float = 2.0
    swap_used_warn_gib: float = 2.0
    psi_some_warn_pct: float = 10.0
    psi_full_critical_pct: float = 5.0
    peer_power_ratio: float = 0.7
    fabric_asymmetry_ratio: float = 0.5
    peer_min_power_w: float = 25.0
    fabric_min_gbps: float = 1.0
    stall_s: float = 20.0

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
