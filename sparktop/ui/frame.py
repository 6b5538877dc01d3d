"""One wake a tick: the widgets a tick repaints reach the screen within the tick.

In Textual a repaint takes four hops through the event loop: ``refresh()`` posts a
``Prompt`` to the widget's own message queue; the widget wakes, runs its idle handler and
posts ``Update`` to its screen; the screen wakes, marks the widget dirty and resumes its
update timer; the timer's task wakes (twice: the resume, then its 1/60 s slot) and
renders. At 4 nodes that was ~0.3 ms of the monitor's ~3.6 ms of CPU a second for the one
Nodes-table refresh of each tick (``benchmarks/bench_limit.py``).

Inside :func:`frame` a :class:`FramedWidget`'s ``refresh()`` does not prompt its queue;
as the frame ends, each such widget whose only pending work is a repaint is marked dirty on
its screen directly (what its idle handler and the screen's ``Update`` handler would do),
and the current screen's update runs at once (Textual's own ``_on_timer_update``). A
widget with anything else pending (a layout, a scroll, styles, ``call_next`` callbacks),
or a screen that cannot update now (a batch update, not the current screen), takes
Textual's route as before. Outside a frame (a key moving the cursor) nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from textual.dom import NoScreen
from textual.message_pump import MessagePump
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

_framed: list[Widget] | None = None
"""The widgets that asked for a repaint in the open frame (None: no frame is open)."""


class FramedWidget(Widget):
    """A widget whose repaints inside a :func:`frame` are handed to the frame. List it after
    a Textual base (``class T(ScrollView, FramedWidget)``): Textual takes the default CSS
    along the first base only."""

    def check_idle(self) -> None:
        if _framed is not None:
            _framed.append(self)
        else:
            super().check_idle()


@contextmanager
def frame(app: App[Any]) -> Iterator[None]:
    """Collect the repaints asked for inside; hand them to the screen as it ends."""
    global _framed
    if _framed is not None:  # nested (a tick inside a tick): the outer frame ends it
        yield
        return
    framed: list[Widget] = []
    _framed = framed
    try:
        yield
    finally:
        _framed = None
        _end(app, framed)


def _end(app: App[Any], framed: list[Widget]) -> None:
    screens: dict[Screen[Any], None] = {}
    for widget in dict.fromkeys(framed):
        if not _repaint_only(widget, screens):
            MessagePump.check_idle(widget)  # Textual's route
    for screen in screens:
        if screen.is_current and not app._batch_count:
            screen._on_timer_update()
        else:
            MessagePump.check_idle(screen)


def _repaint_only(widget: Widget, screens: dict[Screen[Any], None]) -> bool:
    """If a repaint is all ``widget`` waits for, mark it dirty on its screen (as its idle
    handler and the screen's ``Update`` handler do) and add that screen to ``screens``;
    False when it must take Textual's route."""
    if (
        widget._next_callbacks
        or widget._layout_required
        or widget._scroll_required
        or widget._refresh_styles_required
        or widget._recompose_required
        or widget._parent is None
        or not widget._is_mounted
        or widget._closing
        or not widget._message_queue.empty()
    ):
        return False
    if not widget._repaint_required:
        return True
    try:
        screen = widget.screen
    except NoScreen:
        return False
    widget._repaint_required = False
    if widget.display and screen in screen._compositor:
        screen._dirty_widgets.add(widget)
        screens[screen] = None
    return True
