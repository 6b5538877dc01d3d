"""k9s's ``/``: one filter over the Nodes table, the engines and the events; Esc clears."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sparktop.ui.widgets.engine_panel import EngineBlock, EnginePanel
from sparktop.ui.widgets.event_log import EventLog
from sparktop.ui.widgets.filter_bar import FilterBar, matches
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.test_snapshots import cluster_app


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_matches_is_case_insensitive_text_anywhere() -> None:
    assert matches("", ["anything"])
    assert matches("SPARK-3", ["node spark-3"])
    assert matches(" thrott ", ["ok", "throttled"])
    assert not matches("spark-9", ["spark-1", "spark-2"])


def event_text(app: object) -> str:
    return "\n".join(app.query_one(EventLog).lines)  # type: ignore[attr-defined]


async def test_slash_filters_nodes_engines_and_events_and_escape_clears() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        table = app.query_one(NodeTable)
        all_rows = list(table.row_keys)
        assert len(all_rows) == 4
        await pilot.press("slash")
        bar = app.query_one(FilterBar)
        assert bar.display and app.focused is bar
        await pilot.press(*"spark-4")
        await pilot.pause()
        rows = list(table.row_keys)
        assert rows and all(k.startswith("spark-4") for k in rows)
        assert app.query_one(EngineBlock).display  # spark-4 is in dsv41's TP group
        events = event_text(app)
        assert "spark-4" in events and "decode 27 %" not in events
        await pilot.press("enter")  # keep it: back to the table, the filter stays
        assert app.focused is table and bar.display
        assert list(table.row_keys) == rows
        await pilot.press("escape")  # Esc on the main screen clears it
        await pilot.pause()
        assert not bar.display and bar.value == ""
        assert sorted(table.row_keys) == sorted(all_rows)
        assert app.query_one(EngineBlock).display
        assert "decode 27 %" in event_text(app)


async def test_a_state_word_filters_and_escape_in_the_bar_clears() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        await pilot.press("slash", *"THROTTLED")
        await pilot.pause()
        table = app.query_one(NodeTable)
        assert [k.split("\x1f")[0] for k in table.row_keys] == ["spark-3"]
        await pilot.press("slash")  # typed into the bar, not a new filter
        assert app.query_one(FilterBar).value == "THROTTLED/"
        await pilot.press("backspace", "escape")
        await pilot.pause()
        assert len(list(table.row_keys)) == 4 and app.focused is table
        await pilot.press("slash", *"dsv41")  # the engine's name: its block stays
        await pilot.pause()
        assert app.query_one(EnginePanel).query_text == "dsv41"
        assert app.query_one(EngineBlock).display
        assert "dsv41" in event_text(app) and "spark-4" not in event_text(app)
        assert app.query_one(EventLog).query_text == "dsv41"


def panel_notes(app: object) -> list[str]:
    panel = app.query_one(EnginePanel)  # type: ignore[attr-defined]
    return [str(n.render()) for n in panel.query(".no-match")]


async def test_an_engine_matches_by_its_tp_nodes_and_an_empty_pane_says_so() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        await pilot.press("slash", *"spark-3")
        await pilot.pause()
        assert app.query_one(EngineBlock).display  # dsv41's TP group holds spark-3
        assert panel_notes(app) == []
        await pilot.press(*"x")  # "spark-3x": nothing holds it
        await pilot.pause()
        assert not app.query_one(EngineBlock).display
        assert panel_notes(app) == ['no engine matches "spark-3x" (Esc clears)']
        await pilot.press("escape")
        await pilot.pause()
        assert app.query_one(EngineBlock).display and panel_notes(app) == []


def test_the_help_screen_lists_the_new_keys_with_their_binding_ids() -> None:
    from sparktop.ui.app import SparktopApp
    from sparktop.ui.screens.help import keys_markdown

    text = keys_markdown({}, lambda b: b.key, SparktopApp)
    for key, binding_id in (
        ("slash", "app.filter"), ("c", "app.curve"), ("enter", "engine.details"),
        ("m", "curve.metric"), ("s", "detail.sort"), ("escape", "filter.clear"),
    ):  # fmt: skip
        assert f"| `{key}` |" in text and f"`{binding_id}`" in text, binding_id


async def test_keys_right_behind_the_slash_land_in_the_bar_and_a_field_still_types_it() -> None:
    from textual import events
    from textual.widgets import Input

    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        paused = app.poller.paused
        for char in "/spark-2p":  # all queued at once, as a fast typist or tmux sends them
            key = {"/": "slash", "-": "minus"}.get(char, char)
            app.post_message(events.Key(key, char))
        await pilot.pause()
        await pilot.pause()
        assert app.query_one(FilterBar).value == "spark-2p"
        assert app.poller.paused == paused  # the p went into the bar, not to Pause
        await pilot.press("escape", "b")
        prompt = app.query_one("#prompt", Input)
        assert type(app.focused).__name__ == "BudgetPane"  # its `/` starts a path
        await pilot.press(*"/tmp")
        assert prompt.value == "/tmp" and not app.query_one(FilterBar).display
