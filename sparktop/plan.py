"""What one run monitors, resolved once: the composition root every command takes.

A :class:`Plan` is built from an inventory and the command's options
(:meth:`Plan.from_inventory`), or from a recording's header (:meth:`Plan.from_header`). It
holds the cluster name, poll interval, the sweep profile (loaded here, once, or the reason it
could not be), the nodes, the engines with their tensor-parallel nodes (head first) and the
limits each engine declares outside its server, the alert thresholds and the key remapping.
From it come the sources (:meth:`Plan.sources`), the alert engine (:meth:`Plan.alert_engine`)
and a recording's header (:meth:`Plan.header`); the UI derives its view settings from it.

Limits: one precedence rule, :func:`sparktop.sources.engines.pool.resolve_limit` — the server, else
the inventory, else the profile. A profile's limits apply only when the profile describes
this run's engines: the inventory's ``profile:`` or ``--profile`` names it. An engine entry's
own ``profile:`` is that engine's, in place of the plan's (its expected row, budget and
limits); ``--profile`` replaces the top-level one, which the other engines use. The default
profile (used for the expected row and the budget when nothing names one) gives no limits:
its ``max_num_seqs`` is another setup's, so a limit the server does not export stays unknown.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from sparktop.alerts.engine import AlertEngine, row_expected
from sparktop.alerts.thresholds import Thresholds
from sparktop.errors import UserError
from sparktop.inventory import EngineConfig, Inventory
from sparktop.model import EngineSample, Num, Source, is_num
from sparktop.sources.engines.pool import LIMIT_NAMES, Limits, resolve_limit
from sparktop.sweep.expected.matched import MatchedExpected, WindowExpected
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE, Profile

THIS_MACHINE = "this machine"
NO_PROFILE = "no sweep profile (set profile: in the inventory or --profile)"


@dataclass(frozen=True, slots=True)
class EnginePlan:
    """One engine: its inventory entry, TP nodes (head first) and declared limits.

    ``inventory_limits`` are the entry's own; ``profile_limits`` the profile's, empty unless
    the profile describes this engine (see the module docstring).
    """

    config: EngineConfig
    tp_nodes: tuple[str, ...] = ()
    inventory_limits: Limits = field(default_factory=Limits)
    profile_limits: Limits = field(default_factory=Limits)
    profile: Profile | None = None
    """The engine's own profile (its entry's ``profile:``); None: the plan's serves it."""
    named_on: str = "inventory"
    """Where the engine was named: ``inventory``, ``endpoint`` (``--endpoint``) or ``local``
    (the server found on the usual port): its source's hints name flags or inventory keys."""
    matched: MatchedExpected | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matched", _matched(self.profile, self.matched))

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def url(self) -> str:
        return self.config.url

    def limit(self, name: str) -> tuple[Num, str]:
        """A limit as declared outside the server, and its origin (``inventory``,
        ``profile`` or ``unknown``); a live sample's own values come first."""
        return resolve_limit(name, (), self.inventory_limits, self.profile_limits)

    def limits(self) -> dict[str, tuple[Num, str]]:
        """Every limit (:data:`~sparktop.sources.engines.pool.LIMIT_NAMES`) with its origin."""
        return {name: self.limit(name) for name in LIMIT_NAMES}


def _limits(profile: Profile | None) -> Limits:
    if profile is None:
        return Limits()
    return Limits.from_mapping(
        {k: v for k in LIMIT_NAMES if isinstance(v := getattr(profile, k), int)}
    )


@dataclass(frozen=True, slots=True)
class Plan:
    """What this run monitors (immutable; see the module docstring).

    ``profile_problem`` says why ``profile`` is None. ``nodes`` are node names in inventory
    order; ``inventory`` is kept for the sources (SSH settings) and the recording header.
    ``matched`` is the profile's window-matched expected row, one per plan (built here): the
    monitor's expected strip and the alert rules read it, so each engine sample's row is
    estimated once.
    """

    cluster: str = THIS_MACHINE
    interval_s: float = 1.0
    profile: Profile | None = None
    profile_problem: str = ""
    profile_describes: bool = False
    """The profile was named for this run (inventory ``profile:`` or ``--profile``): its limits
    are the engines' (the default profile's are another setup's)."""
    nodes: tuple[str, ...] = ()
    engines: tuple[EnginePlan, ...] = ()
    thresholds: Thresholds = field(default_factory=Thresholds)
    keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    inventory: Inventory | None = None
    matched: MatchedExpected | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "matched", _matched(self.profile, self.matched))

    # -- building ------------------------------------------------------------------------

    @classmethod
    def from_inventory(
        cls,
        inventory: Inventory | None,
        *,
        profile: Profile | str | None = None,
        interval_s: float | None = None,
        local_engine_url: str | None = None,
        engines: Sequence[EngineConfig] = (),
    ) -> Plan:
        """The plan for an inventory (None: this machine, with ``engines`` — the servers
        ``--endpoint`` names — or else the engine at ``local_engine_url`` when one answered
        there).

        ``profile`` (``--profile``) overrides the inventory's top-level one; an engine's own
        ``profile:`` still serves that engine. Raises :class:`UserError` when the profile named
        on the command line or by the inventory does not load (the latter located at the
        inventory's ``profile:`` line, top-level or the engine's); the default profile failing
        is only ``profile_problem``.
        """
        named = profile if profile is not None else inventory.profile if inventory else None
        loaded, problem = _load(named, inventory)
        if inventory is None:
            local = (EngineConfig(name="local", url=local_engine_url),) if local_engine_url else ()
            plan = cls(
                interval_s=interval_s or 1.0,
                nodes=(socket.gethostname() or "localhost",),
                engines=tuple(
                    replace(_engine(c), named_on="endpoint" if engines else "local")
                    for c in (engines or local)
                ),
            )
        else:
            plan = cls._of_inventory(inventory, interval_s, _engine_profiles(inventory))
        return plan._with_profile(loaded, problem, describes=named is not None)

    @classmethod
    def _of_inventory(
        cls, inventory: Inventory, interval_s: float | None, profiles: Mapping[str, Profile]
    ) -> Plan:
        return cls(
            cluster=inventory.cluster,
            interval_s=interval_s or inventory.interval_s,
            nodes=tuple(n.name for n in inventory.nodes),
            engines=tuple(_engine(c, profiles.get(c.name)) for c in inventory.engines),
            thresholds=Thresholds.from_config(inventory.alerts),
            keys=MappingProxyType(dict(inventory.keys)),
            inventory=inventory,
        )

    @classmethod
    def from_layout(
        cls,
        cluster: str,
        tp_groups: Mapping[str, Sequence[str]],
        *,
        urls: Mapping[str, str] | None = None,
        profile: Profile | str | None = DEFAULT_PROFILE,
        interval_s: float = 1.0,
        thresholds: Thresholds | None = None,
    ) -> Plan:
        """A plan without an inventory: a cluster name, engine → TP nodes and engine → URL
        (a recording whose inventory no longer validates; tests and benchmarks that feed
        their own sources). ``profile`` (default: the built-in default; None: none) gives no
        limits."""
        loaded, problem = (None, "") if profile is None else _load(profile, None)
        urls = urls or {}
        names = list(dict.fromkeys([*tp_groups, *urls]))
        engines = tuple(
            EnginePlan(
                EngineConfig.model_construct(name=name, url=urls.get(name, "")),
                tuple(tp_groups.get(name, ())),
            )
            for name in names
        )
        plan = cls(
            cluster=cluster, interval_s=interval_s, engines=engines,
            thresholds=thresholds or Thresholds(),
        )  # fmt: skip
        return plan._with_profile(loaded, problem, describes=False)

    @classmethod
    def from_header(cls, header: Mapping[str, Any]) -> Plan:
        """The plan a recording was made with: its inventory (read leniently when it no
        longer validates), the profiles as recorded (else the default), the interval."""
        from sparktop.record.tick import (
            header_engine_profiles,
            header_inventory,
            header_layout,
            header_profile,
        )

        recorded = header_profile(header)
        profile, problem = (recorded, "") if recorded is not None else _load(None, None)
        interval = header.get("interval_s")
        interval_s = float(interval) if isinstance(interval, int | float) and interval > 0 else 1.0
        inventory = header_inventory(header)
        if inventory is not None:
            plan = cls._of_inventory(inventory, interval_s, header_engine_profiles(header))
            describes = inventory.profile is not None and recorded is not None
        else:
            name, groups = header_layout(header)
            plan = cls.from_layout(name or "replay", groups, profile=None, interval_s=interval_s)
            describes = False
        return plan._with_profile(profile, problem, describes=describes)

    def _with_profile(self, profile: Profile | None, problem: str, *, describes: bool) -> Plan:
        """This plan with its profile; the engines without their own get its limits when it
        ``describes`` them (an engine's own profile always describes it)."""
        limits = _limits(profile) if describes else Limits()
        engines = tuple(
            replace(e, profile_limits=limits if e.profile is None else _limits(e.profile))
            for e in self.engines
        )
        return replace(
            self,
            profile=profile,
            profile_problem=problem,
            profile_describes=describes and profile is not None,
            engines=engines,
        )

    # -- derived -------------------------------------------------------------------------

    @property
    def profile_name(self) -> str:
        return self.profile.name if self.profile is not None else ""

    @property
    def tp_groups(self) -> dict[str, tuple[str, ...]]:
        """Engine → its tensor-parallel nodes, head first (engines without nodes left out)."""
        return {e.name: e.tp_nodes for e in self.engines if e.tp_nodes}

    def engine(self, name: str) -> EnginePlan | None:
        return next((e for e in self.engines if e.name == name), None)

    def profile_for(self, engine: str) -> Profile | None:
        """The profile that serves ``engine``: its own, else the plan's."""
        own = self.engine(engine)
        return own.profile if own is not None and own.profile is not None else self.profile

    def profile_name_for(self, engine: str) -> str:
        profile = self.profile_for(engine)
        return profile.name if profile is not None else ""

    def matched_for(self, engine: str) -> MatchedExpected | None:
        """``engine``'s window-matched expected row (its profile's; None: no profile)."""
        own = self.engine(engine)
        return own.matched if own is not None and own.matched is not None else self.matched

    @property
    def own_profiles(self) -> dict[str, Profile]:
        """Engine → its own profile (engines the plan's profile serves left out)."""
        return {e.name: e.profile for e in self.engines if e.profile is not None}

    def row(self, sample: EngineSample) -> WindowExpected | str:
        """A :data:`~sparktop.sweep.expected.matched.RowFn`: ``sample``'s expected row from
        its engine's profile, or why there is none."""
        matched = self.matched_for(sample.engine)
        if matched is None:
            return self.profile_problem or NO_PROFILE
        return matched(sample)

    def max_num_seqs(self) -> dict[str, float]:
        """Engine → ``max_num_seqs`` declared outside the server (engines without one left out)."""
        out: dict[str, float] = {}
        for engine in self.engines:
            value, _origin = engine.limit("max_num_seqs")
            if is_num(value):
                out[engine.name] = float(value)
        return out

    # -- what it builds ------------------------------------------------------------------

    def sources(
        self,
        *,
        engine_options: Mapping[str, Any] | None = None,
        ssh_options: Mapping[str, Any] | None = None,
    ) -> list[Source]:
        """Every source: nodes in order (SSH, this machine, Prometheus), then engines; the
        Prometheus nodes and engines share one query hub.

        ``engine_options`` go to every HTTP :class:`~sparktop.sources.engines.source.EngineSource`
        (``first_window_s`` for one-shot commands); ``ssh_options`` to every SSH source
        (e.g. ``backoff_cap_s``).
        """
        nodes, engines = self._prometheus()
        return [
            *self.node_sources(nodes, **(ssh_options or {})),
            *self.engine_sources(engines, **(engine_options or {})),
        ]

    def node_sources(
        self, prometheus: Mapping[str, Source] | None = None, **ssh_options: Any
    ) -> list[Source]:
        """The nodes' sources, in order: SSH, Prometheus (``prometheus``: already built, to
        share a hub), or this machine (``local: true``, no inventory)."""
        from sparktop.sources.build import build_node_sources, local_source

        if self.inventory is not None:
            return build_node_sources(self.inventory, prometheus, **ssh_options)
        return [local_source(name) for name in self.nodes]

    def engine_sources(
        self, prometheus: Mapping[str, Source] | None = None, **engine_options: Any
    ) -> list[Source]:
        """One source per engine, with the limits the plan declares for it: HTTP, or read from
        Prometheus (``prometheus``: already built, to share a hub)."""
        from sparktop.sources.engines.source import EngineSource

        if prometheus is None:
            prometheus = self._prometheus()[1]
        return [
            prometheus[e.name]
            if e.config.source == "prometheus"
            else EngineSource(
                e.config,
                inventory_limits=e.inventory_limits,
                profile_limits=e.profile_limits,
                named_on=e.named_on,
                **engine_options,
            )
            for e in self.engines
        ]

    def _prometheus(self) -> tuple[dict[str, Source], dict[str, Source]]:
        if self.inventory is None:
            return {}, {}
        from sparktop.sources.build import prometheus_sources

        declared = {
            e.name: {k: v for k in LIMIT_NAMES if (v := getattr(e.profile_limits, k)) is not None}
            for e in self.engines
        }
        return prometheus_sources(self.inventory, declared)

    def alert_engine(self, *, hold_s: float | None = None) -> AlertEngine:
        """The alert engine for this run; ``hold_s`` overrides the thresholds' (``snapshot``
        judges one poll with 0)."""
        thresholds = self.thresholds if hold_s is None else replace(self.thresholds, hold_s=hold_s)
        return AlertEngine(
            thresholds,
            self.profile,
            self.tp_groups,
            max_num_seqs=self.max_num_seqs(),
            matched=self.matched,
            expected=row_expected(self.row) if self.own_profiles else None,
        )

    def header(self) -> dict[str, Any]:
        """A recording's first line (inventory without secrets, profiles, interval)."""
        from sparktop.record.tick import make_header

        return make_header(self.inventory, self.profile, self.interval_s, self.own_profiles)


def _engine(config: EngineConfig, profile: Profile | None = None) -> EnginePlan:
    return EnginePlan(config, tuple(config.nodes), Limits.from_config(config), profile=profile)


def _matched(profile: Profile | None, matched: MatchedExpected | None) -> MatchedExpected | None:
    """``profile``'s expected row: ``matched`` when it is that profile's, else a new one."""
    if profile is None:
        return None
    return (
        matched if matched is not None and matched.profile is profile else MatchedExpected(profile)
    )


def _engine_profiles(inventory: Inventory) -> dict[str, Profile]:
    """Each engine's own ``profile:`` loaded (one load per name); a UserError located at the
    engine's ``profile:`` line when one does not load."""
    loaded: dict[str, Profile] = {}
    out: dict[str, Profile] = {}
    for i, config in enumerate(inventory.engines):
        name = config.profile
        if name is None:
            continue
        if name not in loaded:
            try:
                loaded[name] = load_named(name)
            except UserError as exc:
                key = f"engines[{i}].profile: {exc}"
                raise UserError(
                    f"{config.profile_at}: {key}" if config.profile_at else key
                ) from None
        out[config.name] = loaded[name]
    return out


def load_named(name: str) -> Profile:
    """The one profile loader: a built-in name, a user profile's name, or a profile file
    (:func:`sparktop.sweep.profiles.loader.load_profile`, with the inventory's guards). Every
    command that takes a profile name (the plan, ``demo``, ``sim``, ``sweep``, the simulator) loads
    it here; ``UserError`` for a bad name or file."""
    return load_profile(name)


def _load(named: Profile | str | None, inventory: Inventory | None) -> tuple[Profile | None, str]:
    """The profile and, when it is None, why. A named profile that fails is a UserError."""
    if isinstance(named, Profile):
        return named, ""
    if named is None:  # nothing names one: the default, for the expected row and the budget
        try:
            return load_named(DEFAULT_PROFILE), ""
        except UserError as exc:
            return None, f"profile: {exc}"
    try:
        return load_named(named), ""
    except UserError as exc:
        where = inventory.profile_at if inventory is not None and inventory.profile == named else ""
        raise UserError(f"{where}: profile: {exc}" if where else str(exc)) from None
