"""The monitor at 80×24 stays readable: the header keeps the sample age whole (the profile's
name gives way), a failed or pending node's message is cut at a word with ``…`` (it read
``first poll not answe``), and wider terminals show the whole text."""

from __future__ import annotations

import pytest

from sparktop.inventory import parse_inventory
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.cell_fit import fit_words
from tests.ui.fakes import Clock, Hung, Scripted, down, node, plan

SSH_FAILURE = "not an SSH server (it closed the connection)"


async def screen_at(width: int, height: int) -> list[str]:
    """The lines drawn for three inventory nodes: one never answering, one down, one ok."""
    hung, failed, ok = Hung("spark-1"), Scripted(node("spark-2")), Scripted(node("spark-3"))
    failed.next = down("spark-2", ok.next.time_s, SSH_FAILURE, ok.next.time_s)
    nodes = ", ".join(f"{{name: spark-{i}, host: 127.0.0.{i}}}" for i in (1, 2, 3))
    inventory = parse_inventory(f"cluster: this machine\nnodes: [{nodes}]\n", "cluster.yaml")
    app = SparktopApp(plan(inventory=inventory), [hung, failed, ok], clock=Clock())
    async with app.run_test(size=(width, height)) as pilot:
        await hung.started.wait()
        await ok.polled.wait()
        await failed.polled.wait()
        app.tick()
        await pilot.pause()
        lines = [strip.text for strip in app.screen._compositor.render_strips()]
        app.save_screenshot(f"narrow-{width}x{height}.svg", "/tmp")
        return lines


def row(lines: list[str], name: str) -> str:
    return next(line for line in lines if line.startswith(f" {name} "))


async def test_at_80_columns_messages_end_on_a_word_and_the_age_stays() -> None:
    lines = await screen_at(80, 24)
    assert "first poll in progress" in row(lines, "spark-1")
    assert "not an SSH server… " in row(lines, "spark-2")
    header = lines[0]
    assert header.rstrip().endswith("newest 0.0 s"), header
    assert "profile 4x-spark-dsv41-fl" in header and "…" in header


async def test_wider_terminals_show_the_whole_message_and_profile() -> None:
    """The message's span widens into the room the columns leave (it was cut at 200)."""
    for size in ((100, 30), (200, 50)):
        lines = await screen_at(*size)
        assert "profile 4x-spark-dsv41-flash-1017  every 1 s  newest 0.0 s" in lines[0], size
        assert SSH_FAILURE in row(lines, "spark-2"), size
        assert row(lines, "spark-2").split()[-1] == "00:00:00", size  # its state still beside


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (23, "not an SSH server…"),  # not "not an SSH server (it…"
        (30, "not an SSH server…"),
        (40, "not an SSH server (it closed the…"),
        (44, SSH_FAILURE),
        (10, "not an…"),
        (5, "not…"),
        (3, "no…"),  # no word ends in the right half: cut where it falls
    ],
)
def test_a_message_is_cut_after_a_word(width: int, shown: str) -> None:
    assert fit_words(SSH_FAILURE, width) == shown.ljust(width)
    assert fit_words("first poll not answered yet", 23) == "first poll not…".ljust(23)


def test_the_alert_bar_is_cut_after_a_word() -> None:
    from textual.content import Content

    from sparktop.ui.widgets.header import cut_at_word

    line = Content.assemble(
        ("2 alerts (1 critical):", "bold"), " ", ("▲ spark-3/gpu0", "red"),
        " throttling at 1,833 MHz, 91 °C: SW thermal slowdown 5 s  │  ▲ spark-4 unreachable",
    )  # fmt: skip
    assert cut_at_word(line, 78).plain.endswith("91 °C: SW…")  # not "SW thermal slowd…"
    assert cut_at_word(line, 46).plain == "2 alerts (1 critical): ▲ spark-3/gpu0…"
    assert cut_at_word(line, 0) is line and cut_at_word(line, 200) is line
    assert cut_at_word(line, 78).spans  # the styles kept
