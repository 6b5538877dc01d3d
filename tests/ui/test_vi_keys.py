"""k9s/vim habits in the Nodes table: j/k move the cursor, g/G jump to the ends; ``keys:``
cannot take those keys; the help lists them."""

from __future__ import annotations

from sparktop.ui.app import SparktopApp
from sparktop.ui.keymap import checked_keymap
from sparktop.ui.replay import ReplayApp
from sparktop.ui.screens.help import all_bindings, keys_markdown
from sparktop.ui.screens.node_detail import NodeDetailScreen
from sparktop.ui.views import row_key
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.fakes import Clock, Scripted, node, plan


def make_app() -> SparktopApp:
    sources = [Scripted(node(f"spark-{i}")) for i in (1, 2, 3)]
    return SparktopApp(plan(cluster="test"), sources, clock=Clock(), autostart=False)


def at(table: NodeTable, name: str) -> bool:
    return table.cursor_key() == row_key(name, f"GPU-{name}")


async def test_j_k_g_G_move_the_cursor_and_enter_opens_the_row() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        table = app.query_one(NodeTable)
        table.focus()
        await pilot.press("j", "j")
        assert at(table, "spark-3")
        await pilot.press("k")
        assert at(table, "spark-2")
        await pilot.press("g")
        assert at(table, "spark-1")
        await pilot.press("G")
        assert at(table, "spark-3")
        await pilot.press("k", "enter")
        assert isinstance(app.screen, NodeDetailScreen)
        assert app.screen.node == "spark-2"


async def test_help_lists_the_vi_keys() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)):
        text = keys_markdown({}, app.get_key_display, SparktopApp)
    assert "| `k / j` | up / down in the Nodes table" in text
    assert "| `g / G` | first / last row" in text


def test_keys_cannot_remap_onto_the_cursor_keys_but_replay_keeps_its_g() -> None:
    bindings = all_bindings(SparktopApp)
    applied, problems = checked_keymap({"app.theme": "j"}, bindings)
    assert "app.theme" not in applied
    assert any("j is moving in the Nodes table" in p for p in problems)

    replay = all_bindings(ReplayApp)
    applied, problems = checked_keymap({"replay.start": "g"}, replay)
    assert applied == {"replay.start": "g"} and problems == []
