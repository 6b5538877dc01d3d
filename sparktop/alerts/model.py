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
    ``recovering_since_s`` is when the condition was last seen gone while the alert is still
    up (waiting out the clearing hold; None while the condition holds). ``message`` carries
    the numbers, without repeating the subject; ``values`` the same numbers by name (units in
    the names). While the condition holds they are the latest reading's; while it recovers
    (and in the ``cleared`` event) they are the worst reading's, never a healthy one's.
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
    recovering_since_s: float | None = None

    @property
    def key(self) -> str:
        """``rule:subject`` (``@node`` added when an engine alert blames a node): the same
        for every occurrence of one condition."""
        return alert_key(self.rule, self.subject, self.node, self.gpu)

    @property
    def status(self) -> str:
        """``firing`` (the condition holds), ``recovering`` (gone, clearing hold running) or
        ``cleared``."""
        if self.cleared_s is not None:
            return "cleared"
        return "firing" if self.recovering_since_s is None else "recovering"

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
            "recovering_since_s": self.recovering_since_s,
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
            cleared_s=_opt_float(data.get("cleared_s")),
            node=data.get("node"),
            gpu=data.get("gpu"),
            engine=data.get("engine"),
            values=_frozen({str(k): float(v) for k, v in (data.get("values") or {}).items()}),
            recovering_since_s=_opt_float(data.get("recovering_since_s")),
        )


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def alert_key(rule: str, subject: str, node: str | None, gpu: str | None) -> str:
    """``rule:subject``, plus ``@node`` when an engine alert blames a node (not for GPU or
    port alerts, whose subject already names the node: ``spark-3/gpu0``, ``spark-3/mlx5_0/1``)."""
    base = f"{rule}:{subject}"
    names_node = node is not None and subject.startswith(f"{node}/")
    if node is not None and node != subject and gpu is None and not names_node:
        return f"{base}@{node}"
    return base


@dataclass(frozen=True, slots=True)
class Pending:
    """A condition that holds now but has not held ``hold_s`` yet (no alert, no event).

    ``started_s`` is when it was first seen (wall clock), ``due_s`` when it fires if it keeps
    holding (``started_s + hold_s``); the other fields as in :class:`Alert`, from the latest
    reading. It has the alert bar's shape (``severity``, ``subject``, ``message``,
    ``since_s``), so a UI can list it with a "pending" mark.
    """

    rule: str
    subject: str
    severity: Severity
    message: str
    started_s: float
    due_s: float
    node: str | None = None
    gpu: str | None = None
    engine: str | None = None
    values: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def key(self) -> str:
        """Same as the :attr:`Alert.key` it becomes when it fires."""
        return alert_key(self.rule, self.subject, self.node, self.gpu)

    @property
    def since_s(self) -> float:
        return self.started_s

    @property
    def text(self) -> str:
        return f"{self.subject}: {self.message}"

    def remaining_s(self, now_s: float) -> float:
        """Seconds until it fires if it keeps holding (0 when due)."""
        return max(0.0, self.due_s - now_s)


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
