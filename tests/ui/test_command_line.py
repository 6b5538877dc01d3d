"""The ``:`` command line (k9s's): the line read against the monitor's nodes and engines, and
the bar driven through Textual's pilot (``:q`` quits, names jump, a typo is one notice)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from sparktop.ui.command_line import COMMANDS, Resolved, commands_markdown, parse_command
from sparktop.ui.screens.engine_detail import EngineDetailScreen
from sparktop.ui.screens.help import HelpScreen
from sparktop.ui.views import row_key
from sparktop.ui.widgets.budget import BudgetPane
from sparktop.ui.widgets.command_bar import CommandBar
from sparktop.ui.widgets.filter_bar import FilterBar
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.fakes import Scripted, engine, node
from tests.ui.test_app_pilot import make_app

NODES = ("spark-1", "spark-2", "Spark-10")
ENGINES = ("dsv41", "127.0.0.1:8000")


@pytest.mark.parametrize(
    ("line", "resolved"),
    [
        ("q", Resolved("quit", "quit")),
        (":q!", Resolved("quit", "quit")),
        ("  quit ", Resolved("quit", "quit")),
        ("bud", Resolved("budget", "toggle_budget")),  # a unique start of a name
        ("help", Resolved("help", "help")),
        ("node spark-2", Resolved("node", target="spark-2", kind="node")),
        ("spark-2", Resolved("node", target="spark-2", kind="node")),  # a bare name jumps
        ("spark-10", Resolved("node", target="Spark-10", kind="node")),  # case aside
        ("ds", Resolved("engine", target="dsv41", kind="engine")),
        ("127.0.0.1:8000", Resolved("engine", target="127.0.0.1:8000", kind="engine")),
        ("d dsv41", Resolved("details", target="dsv41", kind="engine")),
        ("details spark-1", Resolved("details", target="spark-1", kind="node")),
        ("curve", Resolved("curve", "show_curve")),
        ("curve dsv41", Resolved("curve", target="dsv41", kind="engine")),
        ("", Resolved("")),
    ],
)
def test_a_line_resolves_to_an_action_or_a_name(line: str, resolved: Resolved) -> None:
    assert parse_command(line, NODES, ENGINES) == resolved


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("hlep", "unknown command :hlep (did you mean :help?)"),
        ("xyzzy", "unknown command :xyzzy (:help lists the commands)"),
        ("node spark-9", "no node spark-9 (did you mean :node spark-2?)"),
        ("curve spark-1", "no engine spark-1 (engines: dsv41, 127.0.0.1:8000)"),
        ("spark", ":spark names 3: spark-1, spark-2, Spark-10"),
        ("node", ":node needs a node name (:node NAME)"),
        ("pause now", ":pause takes no name (got now)"),
        ("node spark-1 spark-2", ":node takes one name (got spark-1 spark-2)"),
    ],
)
def test_a_line_it_cannot_read_says_why_in_one_line(line: str, said: str) -> None:
    assert parse_command(line, NODES, ENGINES) == said


def test_every_command_is_in_the_help_and_names_are_unique() -> None:
    names = [n for c in COMMANDS for n in (c.name, *c.aliases)]
    assert len(names) == len(set(names))
    text = commands_markdown()
    assert all(f"`:{c.name}" in text for c in COMMANDS)


def app_with_cluster():  # type: ignore[no-untyped-def]
    return make_app(Scripted(node("spark-1")), Scripted(node("spark-2")), Scripted(engine()))


async def test_colon_q_quits() -> None:
    app = app_with_cluster()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        await pilot.press("colon")
        bar = app.query_one(CommandBar)
        assert bar.display and app.focused is bar and bar.value == ":"
        await pilot.press("q", "enter")
        await pilot.pause()
    assert app.return_code == 0


async def test_names_jump_and_commands_run_like_their_keys(tmp_path: Path) -> None:
    app = app_with_cluster()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        table = app.query_one(NodeTable)
        await pilot.press("colon", *"spark-2", "enter")
        await pilot.pause()
        assert table.cursor_key() == row_key("spark-2", "GPU-spark-2")
        assert app.focused is table and not app.query_one(CommandBar).display

        await pilot.press("colon", *"hlep")
        app.save_screenshot("command-line.svg", str(tmp_path))
        await pilot.press("enter")
        await pilot.pause()
        assert [str(n.message) for n in app._notifications][-1] == (
            "unknown command :hlep (did you mean :help?)"
        )
        assert app.focused is table  # nothing else happened

        await pilot.press("colon", *"budget", "enter")
        await pilot.pause()
        assert app.query(BudgetPane) and app.query_one(BudgetPane).display
        await pilot.press("escape", "escape")  # leave the field, close the pane
        await pilot.pause()

        await pilot.press("colon", *"d dsv41", "enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen) and app.screen.engine == "dsv41"
        await pilot.press("escape")
        await pilot.pause()

        await pilot.press("colon", *"help", "enter")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.help_text.markdown
        assert "| `:` | command line, as k9s's" in text and "`app.command`" in text
        assert "## Command line (`:`)" in text and "`:details NAME`" in text
    assert (tmp_path / "command-line.svg").stat().st_size > 0


async def test_escape_closes_the_bar_and_colon_types_in_other_fields() -> None:
    app = app_with_cluster()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        await pilot.press("colon", *"budg", "escape")
        await pilot.pause()
        assert not app.query_one(CommandBar).display and not app.query(BudgetPane)
        await pilot.press("slash", *"a:b")
        assert app.query_one(FilterBar).value == "a:b"  # not a command line
        assert isinstance(app.focused, Input) and not app.query_one(CommandBar).display
