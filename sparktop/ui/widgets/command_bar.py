"""CommandBar: k9s's ``:`` prompt, one line above the Nodes table (see
:mod:`sparktop.ui.command_line` for what it reads)."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


class CommandBar(Input):
    """Shown while a command is typed: Enter posts :class:`Entered` and closes it, Escape
    closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", tooltip="command line: close it, running nothing",
                id="command.close"),
    ]  # fmt: skip

    DEFAULT_CSS = """
    CommandBar {
        display: none;
        height: 1;
        border: none;
        padding: 0 1;
        background: $boost;
    }
    CommandBar.-on { display: block; }
    CommandBar:focus { border: none; }
    """

    class Entered(Message):
        """The line the operator ran (without the ``:``); also posted empty on Escape."""

        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

    def __init__(self, **kwargs: object) -> None:
        super().__init__(
            placeholder=":q, :help, :budget, :node NAME, :details NAME… (Esc closes)",
            select_on_focus=False,  # the typed text goes after the ":"
            **kwargs,  # type: ignore[arg-type]
        )

    def open(self) -> None:
        """Show the bar with the cursor after its ``:`` (typed as in vim and k9s; the line
        is read without it)."""
        self.value = ":"
        self.cursor_position = 1
        self.add_class("-on")
        # At once, as the filter bar: keys typed right after ``:`` (``:q`` from tmux
        # send-keys) must land in the bar, not reach the monitor's own keys.
        self.screen.set_focus(self)

    async def action_submit(self) -> None:
        line = self.value
        self._close()
        self.post_message(self.Entered(line))

    def action_close(self) -> None:
        self._close()
        self.post_message(self.Entered(""))

    def _close(self) -> None:
        self.value = ""
        self.remove_class("-on")
