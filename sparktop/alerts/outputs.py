"""The monitor's own outputs failing (``--record``, ``--alert-log``, ``--on-alert``), as alerts.

A recording that stopped (disk full) or an alert log that cannot be written is a lasting
problem: an active alert from the moment it is noticed (the alert bar; ``fired`` in the
events pane), with what was lost so far, until it is resolved (an alert log whose writes
succeed again clears). A hook that failed (non-zero exit, killed after its timeout, could
not start, dropped) is one event each. These events go to the screen and the recording,
never to ``--on-alert`` or ``--alert-log`` themselves (a failing hook must not be fed its own
failures).
"""

from __future__ import annotations

from sparktop.alerts.model import Alert, Event, EventKind, Severity

RECORD_RULE = "output.record"
ALERT_LOG_RULE = "output.alert_log"
HOOK_RULE = "output.on_alert"
RULES = frozenset({RECORD_RULE, ALERT_LOG_RULE, HOOK_RULE})


class OutputProblems:
    """Active output alerts and the events not yet handed out (:meth:`take_events`)."""

    def __init__(self) -> None:
        self._active: dict[str, Alert] = {}
        self._events: list[Event] = []
        self._serial = 0

    def _alert(
        self, rule: str, subject: str, severity: Severity, message: str, now_s: float
    ) -> Alert:
        self._serial += 1
        return Alert(
            id=f"{rule}:{subject}#{self._serial}",
            rule=rule,
            subject=subject,
            severity=severity,
            started_s=now_s,
            fired_s=now_s,
            message=message,
        )

    def hold(self, rule: str, subject: str, message: str, now_s: float, severity: Severity) -> None:
        """The problem holds now: fire it once, then keep its message current."""
        alert = self._active.get(rule)
        if alert is None:
            alert = self._alert(rule, subject, severity, message, now_s)
            self._active[rule] = alert
            self._events.append(Event(now_s, EventKind.FIRED, alert))
        elif alert.message != message:
            self._active[rule] = alert.updated(message=message)

    def resolve(self, rule: str, now_s: float) -> None:
        """The problem is gone: clear its alert (nothing when it was not active)."""
        alert = self._active.pop(rule, None)
        if alert is not None:
            self._events.append(Event(now_s, EventKind.CLEARED, alert.updated(cleared_s=now_s)))

    def once(self, rule: str, subject: str, message: str, now_s: float, severity: Severity) -> None:
        """A problem that happened and is over (one hook run failed): one event."""
        alert = self._alert(rule, subject, severity, message, now_s)
        self._events.append(Event(now_s, EventKind.FIRED, alert.updated(cleared_s=now_s)))

    def active(self) -> tuple[Alert, ...]:
        return tuple(self._active.values())

    def take_events(self) -> list[Event]:
        events, self._events = self._events, []
        return events
