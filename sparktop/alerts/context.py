"""Shared types of the alert rules: findings, the rule context, the expected row, and the
:class:`Rule` record every rule is declared with (:func:`rule`: the ids it emits and the
:class:`Scope` of each)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.host_track import HostTracker
from sparktop.alerts.model import Severity, alert_key
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import EngineSample


@dataclass(frozen=True, slots=True)
class Expected:
    """The profile's expected row for an engine's live prompt length and concurrency.

    ``ttft_s`` seconds, ``decode_tps`` per-stream decode tok/s; None where the profile has
    no data (the estimator said "no data"). ``*_low`` / ``*_high``: the estimator's
    uncertainty band (same units; None: no band, the % threshold alone decides). A live value
    inside the band is not a deficit. ``prompt_tokens`` / ``concurrency`` are the window's mean
    load (:mod:`sparktop.sweep.expected.matched`); ``load`` says it in words and ``window_s`` how
    long the window is (None: the instant reading, no window yet). ``model_note``: set when the
    profile looks like another model's (:func:`sparktop.sweep.expected.matched.model_mismatch`).
    """

    prompt_tokens: float
    concurrency: float
    ttft_s: float | None = None
    decode_tps: float | None = None
    ttft_low_s: float | None = None
    ttft_high_s: float | None = None
    decode_low_tps: float | None = None
    decode_high_tps: float | None = None
    window_s: float | None = None
    load: str = ""
    model_note: str = ""


ExpectedFn = Callable[[EngineSample], Expected | None]
"""Maps a live engine sample to its expected row (or None without a profile / live data)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A condition that holds now. ``instant`` findings fire without waiting ``hold_s``.

    ``subject`` is what the alert is about (``spark-3/gpu0``, ``spark-3``, ``dsv41``);
    ``node``/``gpu``/``engine`` name the parts; an engine finding may name the node to blame.
    ``score`` says how bad this reading is, comparable only between findings of one rule
    (higher is worse: % below baseline, °C, KV %, requests waiting, deficit %), rounded as
    the message shows it; the alert keeps the message of its worst moment (the latest of
    equal ones) for while it clears. ``clear_after_s`` overrides
    ``hold_s`` for clearing, for conditions whose input is already smoothed over a window
    (a windowed rate, a fitted slope): None means ``hold_s``.
    """

    rule: str
    subject: str
    severity: Severity
    message: str
    node: str | None = None
    gpu: str | None = None
    engine: str | None = None
    values: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    instant: bool = False
    score: float = 0.0
    clear_after_s: float | None = None

    @property
    def key(self) -> str:
        """What hysteresis tracks: ``rule:subject``, plus ``@node`` when the finding names a
        node other than its subject (a different straggler is a different alert)."""
        return alert_key(self.rule, self.subject, self.node, self.gpu)


@dataclass(slots=True)
class RuleContext:
    """Everything a rule may read.

    ``tp_groups`` maps engine → its tensor-parallel nodes (head first);
    ``max_num_seqs`` engine → the limit from the inventory/profile when the sample lacks it;
    ``profile_baseline_mhz`` the sweep's loaded SM clock (fallback before a GPU has its own).
    """

    state: ClusterState
    thresholds: Thresholds
    counters: CounterTracker
    tp_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    max_num_seqs: Mapping[str, float] = field(default_factory=dict)
    profile_baseline_mhz: float | None = None
    expected: ExpectedFn | None = None
    gpu_views: list[Any] | None = None
    """Every GPU's view, built once per evaluation by :func:`sparktop.alerts.gpu_rules.gpu_views`
    (a context lives for one evaluation of one state)."""
    host: HostTracker = field(default_factory=HostTracker)
    """RDMA ports seen up and the onsets of peer facts (the alert engine keeps one)."""
    peer_power: list[Any] | None = None
    peer_fabric: list[Any] | None = None
    """Peer facts, built once per evaluation by :mod:`sparktop.alerts.peers`."""


Check = Callable[[RuleContext], Iterable[Finding]]
"""A rule's body: reads the context, yields the findings that hold now."""


class Scope(enum.Enum):
    """What a rule id reads, which decides what becomes of its alert while that source fails
    (:class:`~sparktop.alerts.engine.AlertEngine`)."""

    SOURCE = "source"
    """Whether a node or engine answers at all (``node.down``, ``engine.down``, …): the
    finding comes and goes with the failure itself; ``snapshot`` counts it as "could not
    look" (exit 1, not 3)."""
    NODE = "node"
    """A node's readings (GPU, memory, fabric): neither fires nor clears while the node's
    poll fails."""
    ENGINE = "engine"
    """An engine's page: cleared while the engine's scrape fails (``engine.down`` stands for
    it)."""
    ENGINE_NODE = "engine+node"
    """An engine's page about one node of its TP group (``tp.straggler``): cleared while the
    engine's scrape fails, frozen while that node's poll fails."""


class UndeclaredRule(RuntimeError):
    """A rule emitted an id it did not declare (a programming error, caught by the tests)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule as registered: ``check`` and the ``scopes`` of every id it may emit. Calling it
    runs ``check`` and refuses a finding whose id it did not declare. Built by :func:`rule`."""

    check: Check
    scopes: Mapping[str, Scope]

    @property
    def name(self) -> str:
        return f"{self.check.__module__}.{getattr(self.check, '__qualname__', self.check)}"

    def __call__(self, ctx: RuleContext) -> Iterator[Finding]:
        for finding in self.check(ctx):
            if finding.rule not in self.scopes:
                declared = ", ".join(sorted(self.scopes))
                raise UndeclaredRule(
                    f"{self.name} emitted {finding.rule!r}, which it does not declare "
                    f"(declared: {declared})"
                )
            yield finding


def rule(scopes: Mapping[str, Scope]) -> Callable[[Check], Rule]:
    """Declare a rule where it is defined, with every id it emits and the scope of each::

        @rule({"kv.usage": Scope.ENGINE, "queue.pool_bound": Scope.ENGINE})
        def pool_rule(ctx: RuleContext) -> Iterator[Finding]: ...

    Raises ``TypeError`` at import when ``scopes`` is empty or a value is not a
    :class:`Scope`: a rule cannot be registered without saying what it reads."""
    declared = dict(scopes)
    if not declared:
        raise TypeError("a rule must declare the ids it emits and the Scope of each")
    for rule_id, scope in declared.items():
        if not isinstance(scope, Scope):
            raise TypeError(f"rule id {rule_id!r}: scope must be a Scope, not {scope!r}")

    def register(check: Check) -> Rule:
        return Rule(check, MappingProxyType(declared))

    return register


def scopes_of(rules: Iterable[Rule]) -> Mapping[str, Scope]:
    """Every rule id of ``rules`` and its scope. ``TypeError`` for a rule not registered with
    :func:`rule` (a bare function declares no scope) or an id two rules declare differently."""
    scopes: dict[str, Scope] = {}
    for r in rules:
        if not isinstance(r, Rule):
            name = getattr(r, "__qualname__", repr(r))
            raise TypeError(f"rule {name} declares no scope: define it with @rule({{id: Scope}})")
        for rule_id, scope in r.scopes.items():
            if scopes.setdefault(rule_id, scope) is not scope:
                raise TypeError(
                    f"rule id {rule_id!r} is declared both {scopes[rule_id]} and {scope}"
                )
    return MappingProxyType(scopes)


def unknown_scopes(ctx: RuleContext) -> tuple[frozenset[str], frozenset[str]]:
    """Nodes and engines whose newest sample carries no readings (failed poll/scrape).

    A node's GPU alerts neither fire nor clear while it is unknown; an engine's page alerts
    clear (engine.down stands for it).
    """
    nodes = frozenset(n for n, s in ctx.state.nodes.items() if not s.ok)
    engines = frozenset(e for e, s in ctx.state.engines.items() if not s.judged)
    return nodes, engines
