"""Alert thresholds: one table (:data:`TABLE`) of every number the alert rules compare against.

Each :class:`Threshold` gives its name (the :class:`Thresholds` field and, when the inventory
may set it, the key of its ``alerts:`` section), its default, its unit, what it means, and the
range the inventory accepts (:attr:`Threshold.settable`; None: a rule constant the inventory
does not expose). The inventory's ``AlertThresholds`` model
(:mod:`sparktop.inventory.models`) and the defaults of :class:`Thresholds` are both built from
it (DESIGN.md §9, §13).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True, slots=True)
class Bounds:
    """The values the inventory accepts: above ``low`` (or at it, when ``low_closed``) and at
    most ``high``."""

    low: float
    high: float
    low_closed: bool = False


PERCENT = Bounds(0.0, 100.0)
RATIO = Bounds(0.0, 1.0)
GIB = Bounds(0.0, 100_000.0, low_closed=True)


@dataclass(frozen=True, slots=True)
class Threshold:
    """One threshold: ``name``, ``default`` in ``unit``, ``help`` (one line), and ``settable``
    (the inventory's accepted range; None: not an inventory key)."""

    name: str
    default: float
    unit: str
    help: str
    settable: Bounds | None = None


TABLE: tuple[Threshold, ...] = (
    Threshold(
        "clock_drop_pct", 10.0, "%", "SM clock this far below the GPU's own loaded baseline",
        PERCENT,
    ),
    Threshold("temperature_c", 85.0, "°C", "GPU temperature above this", Bounds(0.0, 150.0)),
    Threshold("kv_usage_pct", 90.0, "%", "KV-cache usage at or above this (of the pool)", PERCENT),
    Threshold(
        "expected_deficit_pct", 25.0, "%", "live TTFT/decode this much worse than the profile row",
        PERCENT,
    ),
    Threshold(
        "hold_s", 10.0, "s", "a condition must hold this long to fire and to clear",
        Bounds(0.0, 3600.0, low_closed=True),
    ),
    Threshold(
        "mem_available_warn_gib", 8.0, "GiB",
        "MemAvailable below this warns (~6.5 % of GB10's 121.7 GiB MemTotal, under half what "
        "vLLM at 0.83 leaves)",
        GIB,
    ),
    Threshold(
        "mem_available_critical_gib", 2.0, "GiB",
        "MemAvailable below this is critical (the host is about to wedge)", GIB,
    ),
    Threshold("swap_used_warn_gib", 2.0, "GiB", "swap in use above this warns", GIB),
    Threshold(
        "psi_some_warn_pct", 10.0, "%", "PSI memory 'some' avg10 at or above this warns", PERCENT
    ),
    Threshold(
        "psi_full_critical_pct", 5.0, "%", "PSI memory 'full' avg10 at or above this is critical",
        PERCENT,
    ),
    Threshold(
        "peer_power_ratio", 0.7, "ratio",
        "a busy TP rank below this share of its peers' median power is low power vs peers "
        "(15-20 W vs 31-36 W)",
        RATIO,
    ),
    Threshold(
        "fabric_asymmetry_ratio", 0.5, "ratio",
        "a busy TP rank moving less than this share of its peers' median RoCE traffic is flagged",
        RATIO,
    ),
    Threshold(
        "stall_s", 20.0, "s",
        "engine.stalled: requests running and no token for this long, the KV in use unchanged "
        "as long",
        Bounds(0.0, 3600.0),
    ),
    Threshold("low_power_util_pct", 80.0, "%", "hidden low power: utilisation at or above this"),
    Threshold(
        "low_power_clock_ratio", 0.5, "ratio",
        "hidden low power: SM clock below this share of baseline (else of max)",
    ),
    Threshold(
        "low_power_power_w", 25.0, "W", "hidden low power: power below this, and no slowdown bit"
    ),
    Threshold("kv_critical_pct", 98.0, "%", "KV usage that, with requests waiting, is critical"),
    Threshold(
        "exhaustion_horizon_s", 300.0, "s", "warn when the KV slope fills the pool within this"
    ),
    Threshold(
        "exhaustion_usage_ratio", 0.5, "ratio",
        "kv.exhaustion only once KV usage is at least this share of kv_usage_pct",
    ),
    Threshold(
        "slope_window_s", 60.0, "s", "kv.exhaustion: usage has risen over this long (least squares)"
    ),
    Threshold(
        "exhaustion_fall_pct", 2.0, "%",
        "kv.exhaustion goes once usage falls this many points below its recent peak",
    ),
    Threshold("counter_window_s", 60.0, "s", "window for slowdown-counter growth"),
    Threshold(
        "spec_drop_pct", 40.0, "%", "speculative acceptance this far below its own baseline"
    ),
    Threshold(
        "peer_min_power_w", 25.0, "W",
        "low power vs peers only when the peers' median power is at least this",
    ),
    Threshold(
        "fabric_min_gbps", 1.0, "Gb/s",
        "fabric asymmetry only when the peers' median traffic is at least this",
    ),
)  # fmt: skip
"""Every threshold, the inventory's keys first (in the order its docs list them)."""

DEFAULTS: dict[str, float] = {t.name: t.default for t in TABLE}


def settable() -> tuple[Threshold, ...]:
    """The thresholds the inventory's ``alerts:`` section may set."""
    return tuple(t for t in TABLE if t.settable is not None)


def _default(name: str) -> float:
    return DEFAULTS[name]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every number the alert rules compare against: one field per :data:`TABLE` row, its
    default from the table (meanings and units there)."""

    clock_drop_pct: float = _default("clock_drop_pct")
    temperature_c: float = _default("temperature_c")
    kv_usage_pct: float = _default("kv_usage_pct")
    expected_deficit_pct: float = _default("expected_deficit_pct")
    hold_s: float = _default("hold_s")
    mem_available_warn_gib: float = _default("mem_available_warn_gib")
    mem_available_critical_gib: float = _default("mem_available_critical_gib")
    swap_used_warn_gib: float = _default("swap_used_warn_gib")
    psi_some_warn_pct: float = _default("psi_some_warn_pct")
    psi_full_critical_pct: float = _default("psi_full_critical_pct")
    peer_power_ratio: float = _default("peer_power_ratio")
    fabric_asymmetry_ratio: float = _default("fabric_asymmetry_ratio")
    stall_s: float = _default("stall_s")
    low_power_util_pct: float = _default("low_power_util_pct")
    low_power_clock_ratio: float = _default("low_power_clock_ratio")
    low_power_power_w: float = _default("low_power_power_w")
    kv_critical_pct: float = _default("kv_critical_pct")
    exhaustion_horizon_s: float = _default("exhaustion_horizon_s")
    exhaustion_usage_ratio: float = _default("exhaustion_usage_ratio")
    slope_window_s: float = _default("slope_window_s")
    exhaustion_fall_pct: float = _default("exhaustion_fall_pct")
    counter_window_s: float = _default("counter_window_s")
    spec_drop_pct: float = _default("spec_drop_pct")
    peer_min_power_w: float = _default("peer_min_power_w")
    fabric_min_gbps: float = _default("fabric_min_gbps")

    @classmethod
    def from_config(cls, config: object | None) -> Thresholds:
        """Thresholds from the inventory's ``alerts:`` section (its ``AlertThresholds``);
        what it leaves out keeps its default."""
        if config is None:
            return cls()
        changes: dict[str, float] = {}
        for f in fields(cls):
            value = getattr(config, f.name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                changes[f.name] = float(value)
        return replace(cls(), **changes)


if [f.name for f in fields(Thresholds)] != [t.name for t in TABLE]:  # pragma: no cover
    raise TypeError("Thresholds' fields must be TABLE's names, in its order")
