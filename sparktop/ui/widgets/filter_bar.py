"""FilterBar: k9s's ``/``: one query narrows the Nodes table, the engines and the events.

The query is case-insensitive text matched anywhere in what a row shows (a node's name, TP
group, state such as ``throttled`` or ``down``, its reasons; an engine's name, model and
state; an event's time, severity, subject and message). Typing filters as it goes; Enter
keeps the filter and goes back to the table; Escape (in the bar, or anywhere on the main
screen while a filter is on) clears it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


def matches(query: str, texts: Iterable[str]) -> bool:
    """True when ``query`` (stripped, case-insensitive) is in any of ``texts``; an empty
    query matches everything."""
    wanted = query.strip().casefold()
    return not wanted or any(wanted in text.casefold() for text in texts)


class FilterBar(Input):
    """The ``/`` field above the Nodes table: shown while a filter is typed or on."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "keep", "Keep filter", tooltip="filter: keep it and go back to the table",
                id="filter.keep"),
        Binding("escape", "clear", "Clear", tooltip="filter: clear it (all rows again)",
                id="filter.clear"),
    ]  # fmt: skip

    DEFAULT_CSS = """
    FilterBar {
        display: none;
        height: 1;
        border: none;
        padding: 0 1;
        background: $boost;
    }
    FilterBar.-on { display: block; }
    FilterBar:focus { border: none; }
    """

    class Left(Message):
        """The operator is done with the bar (Enter or Escape): focus goes back to the table."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(
            placeholder="filter nodes, engines, events (Esc clears)",
            select_on_focus=False,  # typing on after a kept filter extends it
            **kwargs,  # type: ignore[arg-type]
        )

    @property
    def query_text(self) -> str:
        """The filter in force ("" when none)."""
        return self.value.strip() if self.has_class("-on") else ""

    def open(self) -> None:
        """Show the bar with the cursor in it (``/``)."""
        self.add_class("-on")
        # At once, not on the next loop turn as focus() does: keys typed right after ``/``
        # (a paste, a fast typist, tmux send-keys) must land in the bar, not reach the
        # monitor's own keys (``p`` pauses).
        self.screen.set_focus(self)

    def action_keep(self) -> None:
        if not self.value.strip():
            self.action_clear()
            return
        self.post_message(self.Left())

    def action_clear(self) -> None:
        """Clear the filter (``value`` changes: :class:`Input.Changed`) and hide the bar."""
        self.value = ""
        self.remove_class("-on")
        self.post_message(self.Left())
