"""Engines only (no nodes): which engine has the focus, and where it goes back to.

The trial that found these: an inventory ``huge`` (slow to answer) then ``good`` focused
``good`` (the first to answer), and after the ``/`` filter the focus went to the hidden
Nodes table, so Enter (offered in the footer) opened nothing."""

from __future__ import annotations

import asyncio

from sparktop.model import EngineState
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EngineBlock, EnginePanel
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.fakes import T0, Scripted, engine, plan


def engines_only() -> tuple[SparktopApp, Scripted, Scripted]:
    slow, fast = Scripted(engine("huge")), Scripted(engine("good"))
    app = SparktopApp(plan(tp_groups={"huge": (), "good": ()}), [slow, fast], autostart=False)
    return app, slow, fast


async def until(app: SparktopApp, done: object) -> None:
    """Wait (bounded) until ``done()`` holds: focus and mounts settle over refreshes."""
    deadline = asyncio.get_running_loop().time() + 30
    while not done():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "never settled"
        await asyncio.sleep(0.01)


def focused_engine(app: SparktopApp) -> str | None:
    return app.focused.engine if isinstance(app.focused, EngineBlock) else None


async def test_the_first_engine_in_inventory_order_takes_the_focus_when_it_answers_late() -> None:
    app, _, fast = engines_only()
    async with app.run_test(size=(120, 40)) as pilot:
        app._record(await fast.sample())  # `good` answers first
        await until(app, lambda: focused_engine(app) == "good")
        unavailable = engine("huge", state=EngineState.UNAVAILABLE, message="timed out")
        app._record(unavailable)  # `huge`, first in the inventory, answers late
        await until(app, lambda: focused_engine(app) == "huge")
        await pilot.press("enter")
        await until(app, lambda: type(app.screen).__name__ == "EngineDetailScreen")
        assert app.screen.engine == "huge"  # type: ignore[attr-defined]


async def test_a_focus_the_operator_moved_stays_where_it_is() -> None:
    app, _, fast = engines_only()
    async with app.run_test(size=(120, 40)) as pilot:
        app._record(await fast.sample())
        await until(app, lambda: focused_engine(app) == "good")
        app._record(engine("huge", time_s=T0))
        await until(app, lambda: focused_engine(app) == "huge")
        await pilot.press("tab")  # the operator moves to `good`
        await until(app, lambda: focused_engine(app) == "good")
        app._record(engine("huge", time_s=T0 + 1))
        app.tick()
        await pilot.pause()
        assert focused_engine(app) == "good"


async def test_leaving_the_filter_focuses_the_first_engine_shown_never_the_hidden_table() -> None:
    app, _, _ = engines_only()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await until(app, lambda: focused_engine(app) == "huge")
        await pilot.press("slash", *"good", "enter")  # keep the filter, back to the engines
        await until(app, lambda: focused_engine(app) == "good")
        assert not app.query_one(NodeTable).has_focus
        panel = app.query_one(EnginePanel)
        assert not panel.blocks["huge"].display
        await pilot.press("enter")
        await until(app, lambda: type(app.screen).__name__ == "EngineDetailScreen")
