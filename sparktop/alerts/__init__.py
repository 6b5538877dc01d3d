"""Alerts: rules over the cluster state, hysteresis, alert/event records and delivery.

Textual-free. ``AlertEngine.update(state, now_s)`` returns the events of that update;
``AlertEngine.active()`` the alerts currently up (``Alert.status``: firing or recovering);
``AlertEngine.pending()`` the conditions building up towards ``hold_s``. Thresholds:
:mod:`.thresholds`.
"""

from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.model import Alert, Event, EventKind, Pending, Severity
from sparktop.alerts.thresholds import Thresholds

__all__ = ["Alert", "AlertEngine", "Event", "EventKind", "Pending", "Severity", "Thresholds"]
