"""Shared types of the alert rules: findings, the rule context, the expected row."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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


Rule = Callable[[RuleContext], Iterable[Finding]]
"""A rule: reads the context, yields the findings that hold now."""


def unknown_scopes(ctx: RuleContext) -> tuple[frozenset[str], frozenset[str]]:
    """Nodes and engines whose newest sample carries no readings (failed poll/scrape).

    A node's GPU alerts neither fire nor clear while it is unknown; an engine's page alerts
    clear (engine.down stands for it).
    """
    nodes = frozenset(n for n, s in ctx.state.nodes.items() if not s.ok)
    engines = frozenset(e for e, s in ctx.state.engines.items() if not s.ok)
    return nodes, engines
