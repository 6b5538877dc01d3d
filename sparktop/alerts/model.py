"""Alert and event records: what the alert engine produces and every delivery consumes.

Both are frozen and serialise to plain JSON objects (``to_json()``) for ``--on-alert``,
``--alert-log`` and recordings; ``from_json()`` reads them back (replay).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any


class Severity(enum.StrEnum):
    """How urgent an alert is; ``rank`` orders them (info < warning < critical)."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class EventKind(enum.StrEnum):
    """What happened to an alert: it fired, got worse, or cleared."""

    FIRED = "fired"
    ESCALATED = "escalated"
    CLEARED = "cleared"


def _frozen(values: Mapping[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True, slots=True)
class Alert:
    """One occurrence of a rule's condition on one subject, from onset to clearing.

    ``id`` is unique per occurrence (``key#n``); ``key`` (``rule:subject``, plus ``@node``
    when an engine alert blames a node) is the same for every occurrence. ``subject`` is
    readable: ``spark-3`` (node), ``spark-3/gpu0`` (GPU), ``dsv41`` (engine);
    ``node``/``gpu``/``engine`` name the parts (``gpu`` is the GPU key, its UUID).
    ``started_s`` is when the condition was first seen (wall clock), ``fired_s`` when it had
    held ``hold_s``, ``cleared_s`` when it had been absent ``hold_s`` (None while active).
    ``message`` carries the numbers, without repeating the subject; ``values`` the same
    numbers by name (units in the names).
    """

    id: str
    rule: str
    subject: str
    severity: Severity
    started_s: float
    fired_s: float
    message: str
    cleared_s: float | None = None
    node: str | None = None
    gpu: str | None = None
    engine: str | None = None
    values: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def key(self) -> str:
        """``rule:subject`` (``@node`` added when an engine alert blames a node): the same
        for every occurrence of one condition."""
        base = f"{self.rule}:{self.subject}"
        if self.node is not None and self.node != self.subject and self.gpu is None:
            return f"{base}@{self.node}"
        return base

    @property
    def text(self) -> str:
        """``subject: message`` on one line (messages do not repeat the subject)."""
        return f"{self.subject}: {self.message}"

    @property
    def since_s(self) -> float:
        """Onset time (what the alert bar ages from)."""
        return self.started_s

    @property
    def active(self) -> bool:
        return self.cleared_s is None

    def age_s(self, now_s: float) -> float:
        """Seconds since onset (until clearing when cleared)."""
        end = now_s if self.cleared_s is None else self.cleared_s
        return max(0.0, end - self.started_s)

    def updated(self, **changes: Any) -> Alert:
        if "values" in changes:
            changes["values"] = _frozen(changes["values"])
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rule": self.rule,
            "subject": self.subject,
            "severity": self.severity.value,
            "started_s": self.started_s,
            "fired_s": self.fired_s,
            "cleared_s": self.cleared_s,
            "message": self.message,
            "node": self.node,
            "gpu": self.gpu,
            "engine": self.engine,
            "values": dict(self.values),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Alert:
        """Inverse of :meth:`to_json`; raises ``KeyError``/``ValueError`` on a bad record."""
        return cls(
            id=str(data["id"]),
            rule=str(data["rule"]),
            subject=str(data["subject"]),
            severity=Severity(data["severity"]),
            started_s=float(data["started_s"]),
            fired_s=float(data["fired_s"]),
            message=str(data["message"]),
            cleared_s=None if data.get("cleared_s") is None else float(data["cleared_s"]),
            node=data.get("node"),
            gpu=data.get("gpu"),
            engine=data.get("engine"),
            values=_frozen({str(k): float(v) for k, v in (data.get("values") or {}).items()}),
        )


@dataclass(frozen=True, slots=True)
class Event:
    """A line for the events pane: an alert fired, escalated or cleared at ``time_s``.

    ``alert`` is the alert as it was at that moment (cleared ones carry ``cleared_s``).
    """

    time_s: float
    kind: EventKind
    alert: Alert

    @property
    def severity(self) -> Severity:
        return self.alert.severity

    @property
    def subject(self) -> str:
        return self.alert.subject

    @property
    def message(self) -> str:
        if self.kind is EventKind.CLEARED:
            return f"cleared: {self.alert.message}"
        return self.alert.message

    def to_json(self) -> dict[str, Any]:
        return {
            "time_s": self.time_s,
            "event": self.kind.value,
            "severity": self.severity.value,
            "subject": self.subject,
            "message": self.message,
            "alert": self.alert.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Event:
        return cls(
            time_s=float(data["time_s"]),
            kind=EventKind(data["event"]),
            alert=Alert.from_json(data["alert"]),
        )
