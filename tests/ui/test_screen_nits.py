"""Small things a new user read wrong on the main screen."""

from __future__ import annotations

from sparktop.inventory import parse_inventory
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.header import HeaderBar
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.fakes import Clock, Scripted, engine, node, open_budget, plan


async def test_an_inventory_without_a_cluster_name_says_sparktop_once() -> None:
    for text, expected in (
        ("nodes: [{name: spark-1, host: 127.0.0.1}]\n", "sparktop  profile "),
        ("cluster: lab\nnodes: [{name: spark-1, host: 127.0.0.1}]\n", "sparktop  lab  profile "),
    ):
        inventory = parse_inventory(text, "i.yaml")
        app = SparktopApp(
            plan(inventory=inventory), [Scripted(node("spark-1"))], clock=Clock(), autostart=False
        )
        async with app.run_test(size=(160, 40)):
            await app.poll_now()
            header = str(app.query_one(HeaderBar).render())
        assert header.startswith(expected), header
        assert header.count("sparktop") == 1


async def test_a_one_token_prompt_reads_1_token_in_the_budget_pane() -> None:
    app = SparktopApp(
        plan(cluster="test", tp_groups={"dsv41": ["spark-1"]}),
        [Scripted(node("spark-1")), Scripted(engine())],
        clock=Clock(),
        autostart=False,
    )
    async with app.run_test(size=(160, 60)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.press("1", "enter")
        await pilot.pause()
        text = str(app.query_one("#budget-out", TextBlock).render())
    assert "1 token is less than" in text
    assert "1 tokens" not in text
