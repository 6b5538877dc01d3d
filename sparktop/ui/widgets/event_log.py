"""EventLog: newest-first list of events with timestamps and severity colours."""

from __future__ import annotations

from collections import deque
from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from sparktop.ui import format as fmt
from sparktop.ui.events import EventLike
from sparktop.ui.widgets.filter_bar import matches

MAX_EVENTS = 500
"""The pane keeps this many events (oldest dropped); memory stays bounded."""

SEVERITY_STYLE = {
    "critical": "$spark-crit bold",
    "warning": "$spark-warn",
    "info": "$spark-ok",
}
SEVERITY_MARK = {"critical": "CRIT", "warning": "WARN", "info": "info"}


def event_line(event: EventLike) -> Content:
    """``12:03:04 CRIT spark-3  unreachable: …`` — subject and message are plain text. An
    alert's clearing (the engine's ``cleared`` event) reads ``ok``, not its old severity."""
    severity = str(event.severity)
    mark = SEVERITY_MARK.get(severity, severity[:4])
    if str(getattr(event, "kind", "")) == "cleared":
        severity, mark = "info", "ok"
    return Content.assemble(
        (fmt.clock_time(event.time_s), "$spark-dim"),
        " ",
        (mark.ljust(4), SEVERITY_STYLE.get(severity, "")),
        " ",
        (event.subject, "bold"),
        "  ",
        event.message,
    )


class EventLog(VerticalScroll):
    """Events newest first. Rendered only when an event is added (events are rare)."""

    DEFAULT_CSS = """
    EventLog {
        height: 1fr;
        min-height: 3;
        border-top: solid $panel;
        padding: 0 1;
    }
    EventLog > Static { width: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events: deque[EventLike] = deque(maxlen=MAX_EVENTS)
        self._dirty = False
        self.query_text = ""
        """The ``/`` filter: only events whose line holds it are shown ("" shows all)."""

    def compose(self) -> ComposeResult:
        yield Static("no events yet", id="event-lines")

    def add(self, event: EventLike) -> None:
        """Record an event; the pane redraws on the next :meth:`flush` (the UI tick)."""
        self.events.append(event)
        self._dirty = True

    def set_filter(self, query: str) -> None:
        """Show only the events whose line holds ``query`` (from the next :meth:`flush`)."""
        if query != self.query_text:
            self.query_text = query
            self._dirty = True

    def flush(self) -> bool:
        """Redraw if events were added since the last flush; True when it redrew."""
        if not self._dirty:
            return False
        self._dirty = False
        ordered = sorted(self.events, key=lambda e: e.time_s, reverse=True)
        lines = [event_line(e) for e in ordered]
        if self.query_text:
            lines = [line for line in lines if matches(self.query_text, (line.plain,))]
            if not lines:
                lines = [Content(f"no event matches /{self.query_text}").stylize("$spark-dim")]
        self.query_one("#event-lines", Static).update(Content("\n").join(lines))
        return True
