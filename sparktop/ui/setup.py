"""What the app is built from: view settings from the inventory, the profile, the alert engine.

Kept apart from ``app.py`` so the app only wires widgets; everything here is plain Python.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktop.alerts.thresholds import Thresholds
from sparktop.errors import UserError
from sparktop.inventory import Inventory
from sparktop.sweep.estimator import estimate
from sparktop.sweep.profile import DEFAULT_PROFILE, Profile, load_profile
from sparktop.ui.expected import EstimateFn
from sparktop.ui.views import ViewConfig

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Setup:
    """Resolved inputs of one app run. ``problems`` are shown as notifications on start."""

    config: ViewConfig
    profile: Profile | None
    engine_order: Mapping[str, int] = field(default_factory=dict)
    max_num_seqs: Mapping[str, float] = field(default_factory=dict)
    engine_urls: dict[str, str] = field(default_factory=dict)
    keys: Mapping[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def profile_name(self) -> str:
        return self.profile.name if self.profile is not None else ""

    def estimator(self) -> EstimateFn | None:
        """``(prompt tokens, concurrency) -> Estimate`` for the profile (memoised)."""
        if self.profile is None:
            return None
        return functools.lru_cache(maxsize=256)(functools.partial(estimate, self.profile))


def resolve_profile(
    profile: Profile | str | None, inventory: Inventory | None, problems: list[str]
) -> Profile | None:
    """The profile object: given, else named on the command line, the inventory, or the default.

    A bad name or file is reported (the monitor still runs, without the expected row).
    """
    if isinstance(profile, Profile):
        return profile
    name = profile or (inventory.profile if inventory is not None else None) or DEFAULT_PROFILE
    try:
        return load_profile(name)
    except UserError as exc:
        problems.append(f"profile: {exc}")
        return None


def build_setup(
    inventory: Inventory | None,
    *,
    profile: Profile | str | None = None,
    interval_s: float | None = None,
    cluster: str | None = None,
    tp_groups: Mapping[str, Sequence[str]] | None = None,
) -> Setup:
    """Settings for the app from the inventory (or this machine's defaults)."""
    problems: list[str] = []
    prof = resolve_profile(profile, inventory, problems)
    groups: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in (tp_groups or {}).items()}
    order: dict[str, int] = {}
    seqs: dict[str, float] = {}
    urls: dict[str, str] = {}
    alerts: Any = None
    name = cluster or "this machine"
    interval = interval_s or 1.0
    keys: dict[str, str] = {}
    if inventory is not None:
        name = cluster or inventory.cluster
        interval = interval_s or inventory.interval_s
        order = {n.name: i for i, n in enumerate(inventory.nodes)}
        for conf in inventory.engines:
            groups.setdefault(conf.name, tuple(conf.nodes))
            if conf.url:
                urls[conf.name] = conf.url
            if conf.max_num_seqs is not None:
                seqs[conf.name] = float(conf.max_num_seqs)
        alerts = inventory.alerts
        keys = dict(inventory.keys)
    if prof is not None and isinstance(prof.max_num_seqs, int):
        for engine in groups:
            seqs.setdefault(engine, float(prof.max_num_seqs))
    membership: dict[str, tuple[str, int]] = {}
    for engine, nodes in groups.items():
        for rank, node in enumerate(nodes):
            membership.setdefault(node, (engine, rank))
    clocks = [float(c) for c in prof.baseline_sm_clock_mhz] if prof is not None else []
    config = ViewConfig(
        cluster=name,
        profile=prof.name if prof is not None else "",
        interval_s=interval,
        node_order=order,
        tp_groups=membership,
        engine_nodes=groups,
        profile_baseline_mhz=min(clocks) if clocks else None,
        thresholds=Thresholds.from_config(alerts),
    )
    engine_order = {e: i for i, e in enumerate(groups)}
    return Setup(config, prof, engine_order, seqs, urls, keys, problems)


def build_alert_engine(setup: Setup, inventory: Inventory | None) -> Any:
    """The alert engine for this run, or None when the alerts package is not available."""
    try:
        from sparktop.alerts import AlertEngine
    except ImportError:  # built in parallel; the UI works without it
        return None
    thresholds = inventory.alerts if inventory is not None else None
    return AlertEngine(
        thresholds,
        setup.profile,
        dict(setup.config.engine_nodes),
        max_num_seqs=dict(setup.max_num_seqs),
    )
