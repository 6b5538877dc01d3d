"""The tick's frame: repaints reach the screen within the frame, anything else goes as in
Textual; the tick itself comes from the event loop."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.content import Content
from textual.screen import Screen

from sparktop.ui.app import SparktopApp
from sparktop.ui.frame import frame
from sparktop.ui.widgets.line_table import LineColumn, LineTable
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.fakes import Scripted, node, plan


class FramedApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TextBlock("first\nsecond", id="text")
        yield LineTable()

    def on_mount(self) -> None:
        table = self.query_one(LineTable)
        table.set_columns([LineColumn("a", "A", 8)])
        table.add_row("r0", {"a": ("zero", "")}, 0)


def shown(app: App[None]) -> str:
    """The screen's text, rendered from its widgets as they are now."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_a_repaint_in_a_frame_is_drawn_as_the_frame_ends() -> None:
    """A cell and a line changed in a frame are on the screen as it ends: no message to
    either widget, no screen update left waiting for its timer."""
    app = FramedApp()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        table, text = app.query_one(LineTable), app.query_one(TextBlock)
        written: list[object] = []
        display = app._display

        def counted(screen: Screen[object], renderable: object) -> None:
            written.append(renderable)
            display(screen, renderable)  # type: ignore[arg-type]

        app._display = counted  # type: ignore[method-assign]
        with frame(app):
            table.update_cell("r0", "a", ("changed", ""))
            text.set_lines([Content("first"), Content("later")])
            assert not written  # nothing drawn inside the frame
        assert len(written) == 1  # one screen update, within the frame's end
        assert table._message_queue.empty() and text._message_queue.empty()
        assert not app.screen._dirty_widgets
        assert not (table._repaint_required or text._repaint_required)
        assert "changed" in shown(app) and "later" in shown(app)


async def test_a_layout_in_a_frame_takes_textuals_route() -> None:
    """A change that needs a layout (a text growing a line) is not drawn by the frame: the
    widget's own idle handler asks for the layout, and the screen shows it after."""
    app = FramedApp()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        text = app.query_one(TextBlock)
        with frame(app):
            text.set_lines([Content("first"), Content("second"), Content("third")])
        assert text._layout_required  # left for Textual
        await pilot.pause()
        assert text.size.height == 3
        assert "third" in shown(app)


async def test_outside_a_frame_a_repaint_is_textuals() -> None:
    """Outside a frame (a key moving the cursor) the refresh goes through the widget's
    queue as in Textual, and is drawn after."""
    app = FramedApp()
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        table = app.query_one(LineTable)
        table.update_cell("r0", "a", ("outside", ""))
        assert table._repaint_required
        await pilot.pause()
        assert "outside" in shown(app)


async def test_the_monitor_ticks_from_the_loop_until_it_ends() -> None:
    """The monitor's tick comes from the event loop on its own (no Textual timer), and no
    tick is left scheduled once the app has ended."""
    app = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
    ticked = asyncio.Event()
    async with app.run_test(size=(80, 24)):
        tick = app.tick

        def counted() -> None:
            tick()
            ticked.set()

        app.tick = counted  # type: ignore[method-assign]
        await asyncio.wait_for(ticked.wait(), 30)
        assert app.ticks >= 2  # the one at mount, then the loop's
        assert not any(t.name == "ui-tick" for t in app._timers)
    assert app._tick_handle is not None and app._tick_handle.cancelled()
