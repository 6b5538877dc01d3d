"""The budget pane and the keyboard: where the focus goes, which keys work, what the footer
offers, in each state (closed, typing in a field, pane open with no field focused)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from textual import events
from textual.widgets import Input

from sparktop.ui.app import SparktopApp
from sparktop.ui.screens.help import HelpScreen
from sparktop.ui.widgets.body import Body
from sparktop.ui.widgets.budget import BudgetPane, PromptInput
from sparktop.ui.widgets.filter_bar import FilterBar
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.fakes import Clock, Scripted, engine, node, open_budget, plan


def make_app() -> SparktopApp:
    return SparktopApp(
        plan(cluster="test", tp_groups={"dsv41": ["spark-1"]}),
        [Scripted(node("spark-1")), Scripted(engine())],
        clock=Clock(),
        autostart=False,
    )


def footer_hints(app: SparktopApp) -> dict[str, str]:
    """Key → description of what the footer shows now."""
    return {
        key: active.binding.description
        for key, active in app.screen.active_bindings.items()
        if active.binding.show
    }


async def test_b_opens_the_pane_whose_keys_work_at_once_and_a_number_starts_the_field() -> None:
    """The pane opens focused, not its field: the keys the help lists (``]``, ``+``, ``i``)
    work at once (they were typed into the field: ``i200000``), and a number typed right
    after ``b`` still goes to the prompt field."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot, edit=False)
        pane = app.query_one(BudgetPane)
        prompt = app.query_one("#prompt", Input)
        await pilot.press("right_square_bracket", "plus")
        assert (pane.inputs.prompt.tokens, pane.inputs.concurrency) == (16_384, 2)
        assert pane.has_focus and prompt.value == "16384"  # the what-if shows in the field
        await pilot.press("escape")  # closes the pane, as the footer says
        assert not pane.display
        await open_budget(pilot, edit=False)
        await pilot.press(*"125000", "enter")  # typing a number works at once; Enter applies
        assert (pane.inputs.prompt.tokens, pane.inputs.prompt.method) == (125_000, "given")
        assert isinstance(app.focused, PromptInput)  # Enter keeps the cursor in the field
        assert prompt.value == "125000"
        await pilot.press("escape", "plus")  # Escape leaves it: the what-if keys work
        assert pane.has_focus
        assert pane.inputs.concurrency == 3
        await pilot.press("i", "backspace", *"0", "enter")  # i edits what is there
        assert pane.inputs.prompt.tokens == 125_000 and prompt.value == "125000"


async def test_a_path_typed_or_pasted_on_the_pane_goes_to_the_prompt_field(
    tmp_path: object,
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot, edit=False)
        prompt = app.query_one("#prompt", Input)
        await pilot.press(*"/no/such")  # `/` is the filter's key elsewhere
        assert isinstance(app.focused, PromptInput) and prompt.value == "/no/such"
        await pilot.press("escape")
        pane = app.query_one(BudgetPane)
        assert pane.has_focus
        pane.post_message(events.Paste(str(tmp_path)))
        await pilot.pause()
        assert isinstance(app.focused, PromptInput) and prompt.value == str(tmp_path)


KEY_NAMES = {"/": "slash", "~": "tilde", ".": "full_stop", "-": "minus", "+": "plus",
             "[": "left_square_bracket", "]": "right_square_bracket",
             "<": "less_than_sign", ">": "greater_than_sign"}  # fmt: skip


def type_in_one_batch(app: SparktopApp, text: str, *keys: str) -> None:
    """Queue ``text`` and then ``keys`` on the app at once, as the terminal driver does with
    one read of fast typing, a paste or ``tmux send-keys``: none is handled before the last
    is queued (``Pilot.press`` waits after each key, so it never shows this)."""
    for char in text:
        app.post_message(events.Key(KEY_NAMES.get(char, char), char))
    for key in keys:
        app.post_message(events.Key(key, None))


async def until(pilot: object, done: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 60
    while not done():
        assert asyncio.get_running_loop().time() < deadline, what
        await pilot.pause(0.01)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("typed", "applied"),
    [
        ("/no/such", "file /no/such not found"),
        ("120000", (120_000, "given")),
        ("1/2.5]+-[<>", "file 1/2.5]+-[<> not found"),  # what-if keys are text here
        ("~/no/such.txt", "not found"),
    ],
)
async def test_keys_typed_in_one_batch_after_the_first_all_go_into_the_field_in_order(
    typed: str, applied: object
) -> None:
    """The first key moves the focus to the prompt field; the ones queued behind it (sent
    by the terminal in the same read) follow it there in order, and Enter applies them."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot, edit=False)
        pane = app.query_one(BudgetPane)
        prompt = app.query_one("#prompt", Input)
        before = (pane.inputs.concurrency, pane.inputs.output)
        paused = app.poller.paused
        type_in_one_batch(app, typed, "enter")
        await until(pilot, lambda: bool(pane.error) or pane.inputs.prompt.method != "default",
                    "Enter applied nothing")  # fmt: skip
        assert prompt.value == typed and app.focused is prompt
        if isinstance(applied, str):
            assert applied in pane.error
        else:
            assert (pane.inputs.prompt.tokens, pane.inputs.prompt.method) == applied
        assert (pane.inputs.concurrency, pane.inputs.output) == before  # no what-if ran
        assert app.poller.paused == paused and not app.query_one(FilterBar).display


async def test_typing_after_enter_stays_in_the_field_and_never_reaches_the_monitor() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.press(*"4000", "enter")
        pane = app.query_one(BudgetPane)
        assert pane.inputs.prompt.tokens == 4000
        prompt = app.query_one("#prompt", Input)
        await pilot.press(*"/tmp/q", "plus", "b", "p")  # q quits, b closes, p pauses if leaked
        await pilot.pause()
        assert app.is_running and app.return_code is None
        assert prompt.has_focus and prompt.value == "4000/tmp/q+bp"
        assert pane.display and pane.inputs.concurrency == 1
        assert not app.poller.paused


async def test_escape_leaves_the_field_then_closes_the_pane_and_q_quits() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.press("escape")
        pane = app.query_one(BudgetPane)
        assert pane.display and pane.has_focus
        assert app.query_one("#prompt", Input).value == ""  # nothing typed into it
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert pane.has_focus
        await pilot.press("escape")
        assert not pane.display
        assert app.query_one(NodeTable).has_focus
        await pilot.press("b", "b")  # b closes the pane too
        assert not pane.display
        await pilot.press("b", "q")  # q quits from the pane
        await pilot.pause()
    assert app.return_code == 0


async def test_what_if_keys_work_from_the_nodes_table_while_the_pane_is_open() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.press("escape")
        pane = app.query_one(BudgetPane)
        app.query_one(NodeTable).focus()
        await pilot.pause()
        await pilot.press("plus", "greater_than_sign", "right_square_bracket")
        assert pane.inputs.concurrency == 2
        assert pane.inputs.output == 4096  # the CLI's default 2,048, doubled
        assert pane.inputs.prompt.tokens == 16_384
        assert app.poller.interval_s == 1.0  # + went to the budget, not the poll interval
        await pilot.press("escape")  # closes the pane from the table too
        assert not pane.display
        await pilot.press("plus")
        assert app.poller.interval_s == 2.0


async def test_the_footer_offers_what_works_in_each_state() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        closed = footer_hints(app)
        assert closed["plus"] == "+interval" and "escape" not in closed
        assert {"q", "question_mark", "b", "p"} <= set(closed)

        await open_budget(pilot)  # typing in the prompt field
        typing = footer_hints(app)
        assert typing == {"enter": "Apply", "escape": "Done"}

        await pilot.press("escape")  # the pane, no field focused
        pane = footer_hints(app)
        assert pane["plus"] == "+conc" and pane["escape"] == "Close" and pane["i"] == "Edit"
        assert {"q", "question_mark", "b", "p"} <= set(pane)
        assert app.query_one(Body).budget_open


async def test_the_pane_takes_limits_from_the_live_engine_and_explains_its_tags() -> None:
    from types import MappingProxyType

    from sparktop.plan import Plan
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
    from sparktop.ui.widgets.text_block import TextBlock

    limits = MappingProxyType(
        {
            "max_num_seqs": "inventory",
            "max_num_batched_tokens": "profile",
            "max_model_len": "server",
        }
    )
    live = engine(max_num_seqs=32.0, limit_sources=limits)
    # A sample takes a limit from the profile only when the run names it (--profile).
    named = Plan.from_inventory(None, profile=DEFAULT_PROFILE)
    app = SparktopApp(named, [Scripted(live)], clock=Clock(), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.pause()
        text = str(app.query_one("#budget-out", TextBlock).render())
        assert "max_num_seqs 32 [inventory]" in text  # as the engine row's /32, not the profile's 8
        assert "8,192/8,192 [profile]" in text  # the batched limit the sample took from the profile
        assert "output 2,048 tok" in text  # sparktop budget's default
        for tag in ("[given] typed", "[what-if] keys", "[server] live engine", "[profile] sweep",
                    "[here] computed", "[inventory] cluster.yaml"):  # fmt: skip
            assert tag in text


async def test_at_80_columns_the_footer_keeps_q_help_budget_and_pause() -> None:
    from textual.widgets._footer import FooterKey

    def visible_keys() -> set[str]:
        return {
            k.key
            for k in app.query(FooterKey)
            if k.region.width and k.region.right <= 80 and k.region.y == 23
        }

    async def shown(wanted: set[str]) -> set[str]:
        """The keys once the footer shows ``wanted``: on a loaded machine it is composed
        (and fitted) a few idle rounds after the bindings change."""
        keys: set[str] = set()
        for _ in range(100):
            await pilot.pause()
            keys = visible_keys()
            if wanted <= keys:
                break
        return keys

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        important = {"q", "question_mark", "b", "p"}
        assert important <= await shown(important)
        await open_budget(pilot)
        await pilot.press("escape")  # the pane's own keys come first in the footer
        wanted = {"escape", "plus", "i"} | important
        assert wanted <= await shown(wanted)
