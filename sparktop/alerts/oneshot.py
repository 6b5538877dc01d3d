"""Alerts for a one-shot poll (``sparktop snapshot``): the conditions present *now*.

A single poll has no duration, so ``hold_s`` does not apply: every condition the rules find
in the snapshot's samples is reported as an active alert. Rules that need history (the KV
slope, slowdown-counter growth, a GPU's own loaded baseline) cannot fire from one poll; the
profile's baseline clock stands in for the GPU's own, and engine rates come from the
server's lifetime counters when there is no earlier scrape.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sparktop.alerts import gpu_state
from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.gpu_state import GpuState
from sparktop.alerts.model import Alert, Severity
from sparktop.alerts.rules import SCOPES, Scope, ids_in
from sparktop.cluster import ClusterState
from sparktop.model import Sample

if TYPE_CHECKING:
    from sparktop.snapshot import Snapshot

ALL_WELL_EXIT = 0
"""``sparktop snapshot``: everything answered and nothing is listed."""
NOT_ANSWERED_EXIT = 1
"""``sparktop snapshot``: some node or engine did not answer (the rest is still printed)."""
CRITICAL_EXIT = 3
"""``sparktop snapshot`` exit status when any critical alert is active."""
DEGRADED_EXIT = 4
"""``sparktop snapshot``: everything answered, nothing critical, but something is not well
(a node or engine not ``ok``: throttled, low power, no GPU data; or a warning listed)."""


def snapshot_exit_status(snap: Snapshot) -> int:
    """``sparktop snapshot``'s exit status, most urgent first: :data:`CRITICAL_EXIT` (a
    critical condition in what answered), :data:`NOT_ANSWERED_EXIT`, :data:`DEGRADED_EXIT`,
    else :data:`ALL_WELL_EXIT`. A node that answered without GPU data (no NVIDIA driver on a
    CPU-only machine) is degraded, not "did not answer"."""
    if any_critical(snap.alerts):
        return CRITICAL_EXIT
    if not snap.answered:
        return NOT_ANSWERED_EXIT
    return DEGRADED_EXIT if snap.degraded else ALL_WELL_EXIT


def alerts_now(samples: Iterable[Sample], engine: AlertEngine, now_s: float) -> tuple[Alert, ...]:
    """Every alert condition in ``samples`` (most severe first) as ``engine`` judges them;
    ``snapshot`` passes the plan's engine with hold time 0 (the monitor's rules, at once)."""
    return judge_now(samples, engine, now_s)[0]


def judge_now(
    samples: Iterable[Sample], engine: AlertEngine, now_s: float
) -> tuple[tuple[Alert, ...], dict[str, dict[str, GpuState]]]:
    """:func:`alerts_now` and each answering node's GPU states (node → GPU key → state) as
    the monitor's ``state`` column judges them, with ``engine``'s thresholds and baseline."""
    state = ClusterState()
    for sample in samples:
        state.apply(sample)
    engine.update(state, now_s)
    ctx = gpu_state.context(state, engine.thresholds, engine.profile_baseline_mhz)
    return engine.active(), gpu_state.gpu_states(ctx, tuple(state.nodes.values()))


AVAILABILITY_RULES = ids_in(SCOPES, Scope.SOURCE)
"""Rules about a source not answering (declared :attr:`Scope.SOURCE`); ``snapshot`` reports
those with exit status 1, not 3."""


def any_critical(alerts: Iterable[Alert]) -> bool:
    """True when a critical alert is active about something that *did* answer.

    A node or engine that did not answer already makes ``snapshot`` exit 1; exit 3 is kept for
    conditions seen in the data (a throttled TP member in decode deficit, a full KV pool with
    requests waiting), so a cron job can tell "could not look" from "looked and it is bad".
    """
    return any(a.severity is Severity.CRITICAL and a.rule not in AVAILABILITY_RULES for a in alerts)
