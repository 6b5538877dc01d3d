"""Alerts: rules over the cluster state, hysteresis, alert/event records and delivery.

Textual-free. ``AlertEngine.update(state, now_s)`` returns the events of that update;
``AlertEngine.active()`` the alerts currently up (``Alert.status``: firing or recovering);
``AlertEngine.pending()`` the conditions building up towards ``hold_s``. Thresholds:
:mod:`.thresholds`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparktop.alerts.engine import AlertEngine
    from sparktop.alerts.model import Alert, Event, EventKind, Pending, Severity
    from sparktop.alerts.thresholds import Thresholds

__all__ = ["Alert", "AlertEngine", "Event", "EventKind", "Pending", "Severity", "Thresholds"]

_HOMES = {
    "AlertEngine": "engine",
    "Alert": "model",
    "Event": "model",
    "EventKind": "model",
    "Pending": "model",
    "Severity": "model",
    "Thresholds": "thresholds",
}


def __getattr__(name: str) -> Any:
    # Each name is imported on first use: the engine pulls in every rule and the estimator,
    # and the records and thresholds are not needed by `sparktop budget`, which imports the
    # alert options (a submodule, which runs this package's __init__ first).
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"sparktop.alerts.{home}"), name)
