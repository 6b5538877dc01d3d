"""Alerts: rules over the cluster state, hysteresis, alert/event records and delivery.

Textual-free. ``AlertEngine.update(state, now_s)`` returns the events of that update;
``AlertEngine.active()`` the alerts currently up (``Alert.status``: firing or recovering);
``AlertEngine.pending()`` the conditions building up towards ``hold_s``. Thresholds:
:mod:`.thresholds`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sparktop.alerts.model import Alert, Event, EventKind, Pending, Severity
from sparktop.alerts.thresholds import Thresholds

if TYPE_CHECKING:
    from sparktop.alerts.engine import AlertEngine

__all__ = ["Alert", "AlertEngine", "Event", "EventKind", "Pending", "Severity", "Thresholds"]


def __getattr__(name: str) -> Any:
    # The engine pulls in every rule and the estimator: imported on first use, so that
    # `sparktop --help` and a submodule such as gpu_state stay light.
    if name == "AlertEngine":
        from sparktop.alerts.engine import AlertEngine

        return AlertEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
