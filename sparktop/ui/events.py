"""Event records for the events pane, and the events the UI derives from sample transitions.

The events pane accepts any object shaped like :class:`EventRecord` (``time_s``, ``severity``,
``subject``, ``message``), so the alert engine's records plug in unchanged. This module is
Textual-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sparktop.alerts.model import Severity
from sparktop.model import EngineSample, EngineState, NodeSample, NodeState, Sample, failure_text


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One line of the events pane: when (wall clock, s), how bad, about what, what happened."""

    time_s: float
    severity: str
    subject: str
    message: str


class _Described(Protocol):
    @property
    def severity(self) -> str: ...
    @property
    def subject(self) -> str: ...
    @property
    def message(self) -> str: ...


class EventLike(_Described, Protocol):
    """What the events pane needs from an event (the alert engine's records fit)."""

    @property
    def time_s(self) -> float: ...


class AlertLike(_Described, Protocol):
    """What the alert bar needs from an active alert: severity, subject, message, since when."""

    @property
    def since_s(self) -> float: ...


_NODE_CRITICAL = {
    NodeState.UNREACHABLE,
    NodeState.SSH_NOT_ANSWERING,
    NodeState.HOST_KEY,
    NodeState.AUTH,
}


def transition_events(previous: Sample | None, sample: Sample) -> list[EventRecord]:
    """Events implied by a new sample given the previous one of the same subject.

    Nodes: a failure starting or changing kind (unreachable, host key, driver mismatch…),
    recovery. Engines: scrape failures, recovery, server restart (``restarted``).
    """
    if isinstance(sample, NodeSample):
        assert previous is None or isinstance(previous, NodeSample)
        return _node_events(previous, sample)
    assert previous is None or isinstance(previous, EngineSample)
    return _engine_events(previous, sample)


def _node_events(prev: NodeSample | None, new: NodeSample) -> list[EventRecord]:
    if not new.ok:
        if prev is not None and prev.state is new.state:
            return []
        severity = Severity.CRITICAL if new.state in _NODE_CRITICAL else Severity.WARNING
        if new.state is NodeState.NO_GPU:
            severity = Severity.WARNING
        return [EventRecord(new.time_s, severity, new.node, failure_text(new.state, new.message))]
    if prev is not None and not prev.ok:
        since = prev.since_s if prev.since_s is not None else prev.time_s
        down = max(0.0, new.time_s - since)
        text = f"recovered after {down:.0f} s ({prev.state})"
        return [EventRecord(new.time_s, Severity.INFO, new.node, text)]
    return []


def _engine_events(prev: EngineSample | None, new: EngineSample) -> list[EventRecord]:
    events: list[EventRecord] = []
    if new.restarted:
        events.append(
            EventRecord(
                new.time_s, Severity.WARNING, new.engine, "server restarted (counters reset)"
            )
        )
    failed = new.state in (
        EngineState.UNREACHABLE,
        EngineState.NOT_ANSWERING,
        EngineState.UNAVAILABLE,
        EngineState.METRICS_DISABLED,
    )
    was_failed = prev is not None and prev.state is not EngineState.OK
    if failed and (prev is None or prev.state is not new.state):
        down = (EngineState.UNREACHABLE, EngineState.NOT_ANSWERING)
        severity = Severity.CRITICAL if new.state in down else Severity.WARNING
        text = failure_text(f"scrape {new.state}", new.message)
        events.append(EventRecord(new.time_s, severity, new.engine, text))
    elif new.state in (EngineState.STALE, EngineState.DEGRADED) and (
        prev is None or prev.state is not new.state
    ):
        head = "metrics stale" if new.state is EngineState.STALE else "metrics degraded"
        events.append(
            EventRecord(new.time_s, Severity.WARNING, new.engine, failure_text(head, new.message))
        )
    elif new.ok and was_failed:
        assert prev is not None
        events.append(
            EventRecord(new.time_s, Severity.INFO, new.engine, f"scrape recovered ({prev.state})")
        )
    return events
