"""EventLog: newest-first list of events with timestamps and severity colours."""

from __future__ import annotations

from collections import deque
from typing import Any

from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.visual import Visual

from sparktop.ui import format as fmt
from sparktop.ui.events import EventLike
from sparktop.ui.frame import FramedWidget
from sparktop.ui.widgets.filter_bar import matches

MAX_EVENTS = 500
"""The pane keeps this many events (oldest dropped); memory stays bounded."""

STRIPS_KEPT = 256
"""Rendered rows kept (the rows on screen, and some around them for scrolling)."""

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


class EventLog(ScrollView, FramedWidget):
    """Events newest first, drawn line by line: only the rows on screen are rendered, and
    only when the pane shows them. The lines are rebuilt when an event is added, the filter
    or the width changes (events are rare); what the pane holds is bounded by
    :data:`MAX_EVENTS` lines of text, not by their rendered form (a ``Static`` of all 500
    lines kept every line's strips and re-rendered them all on each event: ~13 kB an
    event, and RSS that kept rising with each re-render)."""

    DEFAULT_CSS = """
    EventLog {
        height: 1fr;
        min-height: 3;
        border-top: solid $panel;
        padding: 0 1;
        overflow-x: hidden;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events: deque[EventLike] = deque(maxlen=MAX_EVENTS)
        self._dirty = False
        self.query_text = ""
        """The ``/`` filter: only events whose line holds it are shown ("" shows all)."""
        self._lines: list[Content] = [Content("no events yet")]
        """The pane's lines before wrapping: one an event shown, or what says there is none."""
        self._rows: list[Content] = []
        self._rows_width = -1
        self._strips: LRUCache[tuple[int, object], Strip] = LRUCache(STRIPS_KEPT)

    @property
    def lines(self) -> tuple[str, ...]:
        """The pane's lines as plain text, newest event first (what it shows, unwrapped)."""
        return tuple(line.plain for line in self._lines)

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
        self._lines = lines or [Content("no events yet")]
        self._rows_width = -1
        self._wrap()
        return True

    def _wrap(self) -> None:
        """The lines wrapped at the pane's width, as a ``Static`` wraps them; the scrollable
        height follows."""
        width = self.scrollable_content_region.width
        if width <= 0 or width == self._rows_width:
            return
        self._rows_width = width
        self._rows = [row for line in self._lines for row in line.wrap(width)]
        self._strips.clear()
        self.virtual_size = Size(width, len(self._rows))
        self.refresh()

    def on_resize(self) -> None:
        self._wrap()

    def render_line(self, y: int) -> Strip:
        self._wrap()
        width = self.scrollable_content_region.width
        index = self.scroll_offset.y + y
        style = self.visual_style
        if index >= len(self._rows) or width <= 0:
            return Strip.blank(max(width, 0), style.rich_style)
        key = (index, (width, style, self.app.theme))
        strip = self._strips.get(key)
        if strip is None:
            strips = Visual.to_strips(self, self._rows[index], width, 1, style)
            strip = strips[0] if strips else Strip.blank(width, style.rich_style)
            self._strips[key] = strip
        return strip
