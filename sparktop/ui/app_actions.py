"""The monitor's key actions: pause, the poll interval, the panes (budget, events, filter,
command line), the theme, help, screenshots, polling now and quitting, and which of them the
footer offers where (:meth:`KeyActions.check_action`).

A base of :class:`~sparktop.ui.app.SparktopApp` (kept apart so the app's module stays small);
the app declares the bindings that name these actions and sets the attributes below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.widgets import Input

from sparktop.poller import MAX_INTERVAL_S, MIN_INTERVAL_S, Poller
from sparktop.ui.app_details import DetailNavigation
from sparktop.ui.screens.live import LiveScreen
from sparktop.ui.widgets.body import Body
from sparktop.ui.widgets.command_bar import CommandBar
from sparktop.ui.widgets.event_log import EventLog
from sparktop.ui.widgets.filter_bar import FilterBar


class KeyActions(DetailNavigation):
    """The actions the app's bindings name; the app sets these attributes."""

    poller: Poller
    clock: Callable[[], float]
    paused_at: float | None
    keymap: dict[str, str]
    _theme_names: list[str]

    if TYPE_CHECKING:

        def tick(self) -> None: ...

        def focus_main(self) -> None: ...

    INTERVAL_STEPS: ClassVar[tuple[float, ...]] = tuple(
        sorted({MIN_INTERVAL_S, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, MAX_INTERVAL_S})
    )
    """What ``+``/``-`` step through: the poller's whole range (0.2–60 s)."""

    async def poll_now(self) -> None:
        """Poll every source once and render (tests, the ``r`` key)."""
        await self.poller.poll_once()
        self.tick()

    MAIN_SCREEN_ACTIONS = frozenset({"toggle_budget", "toggle_events"})
    """Actions on widgets of the main screen: off (and not offered) on the detail screen."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.MAIN_SCREEN_ACTIONS:
            return self.screen is self.screen_stack[0]
        if action == "show_curve":
            return not (isinstance(self.screen, LiveScreen) and self.screen.DRAWS_CURVE)
        if action in ("filter", "clear_filter", "command"):
            # The budget pane takes ``/`` as the start of a path to count.
            starts_path = action == "filter" and getattr(self.focused, "STARTS_PATHS", False)
            on_main = self.screen is self.screen_stack[0] and not (self.typing() or starts_path)
            return on_main and (
                action != "clear_filter" or bool(self.query_one(FilterBar).query_text)
            )
        # An input types + and - itself; Textual cannot tell these keys are printable, so
        # without this the footer would offer them while typing.
        return not (action == "interval" and self.typing())

    def typing(self) -> bool:
        """True while a text field has the focus (it takes the printable keys)."""
        return isinstance(self.focused, Input)

    def action_toggle_pause(self) -> None:
        if self.poller.paused:
            self.poller.resume()
            self.paused_at = None
        else:
            self.poller.pause()
            self.paused_at = self.clock()
        self.tick()

    def action_interval(self, direction: int) -> None:
        steps = self.INTERVAL_STEPS
        current = self.poller.interval_s
        if direction > 0:
            nxt = next((s for s in steps if s > current + 1e-9), steps[-1])
        else:
            nxt = next((s for s in reversed(steps) if s < current - 1e-9), steps[0])
        self.poller.set_interval(nxt)
        self.view_config = replace(self.view_config, interval_s=self.poller.interval_s)
        self.tick()

    async def action_toggle_budget(self) -> None:
        body = self.query_one(Body)
        if body.budget_open:
            body.close_budget()
        else:
            await body.open_budget()

    def action_filter(self) -> None:
        self.query_one(FilterBar).open()

    def action_command(self) -> None:
        self.query_one(CommandBar).open()

    def action_clear_filter(self) -> None:
        self.query_one(FilterBar).action_clear()

    @on(Input.Changed, "#filter")
    def _filter_changed(self) -> None:
        self.tick()

    @on(FilterBar.Left)
    def _filter_left(self) -> None:
        self.focus_main()

    def action_toggle_events(self) -> None:
        log = self.query_one(EventLog)
        log.display = not log.display

    def action_cycle_theme(self) -> None:
        names = self._theme_names or [self.theme]
        index = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(index + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """Palette → Screenshot: saved in the working directory (or ``path``), not ~/Downloads."""
        from sparktop.ui.screenshot import save_screenshot

        saved = save_screenshot(self, filename, path)
        return None if saved is None else str(saved)

    def action_help(self) -> None:
        # Imported when first opened: it lists every widget's keys, so it imports them all
        # (the budget pane's too, built only when opened).
        from sparktop.ui.screens.help import HelpScreen, keys_markdown

        keys = keys_markdown(self.keymap, self.get_key_display, type(self))
        self.push_screen(HelpScreen(self.view_config.thresholds, keys))

    async def action_poll_now(self) -> None:
        await self.poll_now()

    async def action_quit(self) -> None:
        await self.poller.aclose()
        self.exit(0)

    async def action_interrupt(self) -> None:
        """Ctrl-C: quit like ``q``, with the shell's status for an interrupt (130)."""
        await self.poller.aclose()
        self.exit(130)
