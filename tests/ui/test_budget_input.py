"""The budget pane takes its fields as ``sparktop budget`` takes its flags: the same bounds and
parsing (no 2^60 tokens, ``-5`` and ``1e9`` are numbers refused, not file names), a refused
field replaces the figures instead of leaving the old ones under the new text, messages are
phrased for the pane, the untouched default says so, and a typed path is counted exactly by
the live engine's ``/tokenize`` as ``--file … --endpoint`` counts it."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from textual.widgets import Input

from sparktop.plan import Plan
from sparktop.testing.http_stub import serve_threaded
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.budget import BudgetPane
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.fakes import Clock, Scripted, engine, open_budget
from tests.ui.test_app_pilot import make_app, static_text


async def _enter(app: object, pilot: object, field: str, value: str) -> str:
    """Type ``value`` into the pane's ``field`` and press Enter; the pane's text after it."""
    pane = app.query_one(BudgetPane)  # type: ignore[attr-defined]
    box = pane.query_one(f"#{field}", Input)
    box.focus()
    box.value = value
    await pilot.press("enter")  # type: ignore[attr-defined]
    await app.workers.wait_for_complete()  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    return static_text(pane.query_one("#budget-out", TextBlock))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("prompt", str(2**60), "prompt must be at most 1,000,000,000,000, got 1,152,921,"),
        ("prompt", "-5", "prompt must be at least 1, got -5"),
        ("prompt", "1e9", "prompt: expected a whole number, got '1e9'"),
        ("concurrency", "0", "concurrency must be at least 1, got 0"),
        ("concurrency", "-3", "concurrency must be at least 1, got -3"),
        ("output", str(10**13), "output tokens must be at most 1,000,000,000,000"),
    ],
)
async def test_a_refused_field_replaces_the_figures(field: str, value: str, message: str) -> None:
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        before = await _enter(app, pilot, "prompt", "4000")
        assert "4,000 tok" in before and "TTFT" in before
        after = await _enter(app, pilot, field, value)
        assert message in " ".join(after.split())
        assert "TTFT" not in after and "4,000 tok" not in after  # nothing left from before
        assert "not found" not in after  # a number is never taken as a file name
        pane = app.query_one(BudgetPane)
        assert (pane.inputs.prompt.tokens, pane.inputs.concurrency) == (4000, 1)
        fixed = await _enter(app, pilot, field, "2")
        assert "TTFT" in fixed and "!" not in fixed.split("TTFT")[0]


async def test_concurrency_past_max_num_seqs_is_warned_and_keys_stay_in_bounds() -> None:
    app = make_app(Scripted(engine(max_num_seqs=32.0)))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        text = await _enter(app, pilot, "concurrency", "301")
        assert "concurrency 301 > max_num_seqs 32: only 32 run at once" in " ".join(text.split())
        await _enter(app, pilot, "prompt", "999,999,999,999")
        await pilot.press("escape", *["right_square_bracket"] * 3)
        pane = app.query_one(BudgetPane)
        assert pane.inputs.prompt.tokens == 10**12


async def test_the_untouched_default_is_labelled_default() -> None:
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.pause()
        text = static_text(app.query_one(BudgetPane).query_one("#budget-out", TextBlock))
        assert "prompt  8,192 tok  [default]" in text and "[default] not set yet" in text


async def test_a_cleared_prompt_field_goes_back_to_the_default() -> None:
    """The field emptied and Enter: the pane still said the old prompt [given] beside it."""
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        assert "prompt  4,096 tok  [given]" in await _enter(app, pilot, "prompt", "4096")
        text = await _enter(app, pilot, "prompt", "")
        assert "prompt  8,192 tok  [default]" in text and "4,096" not in text


async def test_errors_are_phrased_for_the_pane(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        text = " ".join((await _enter(app, pilot, "prompt", str(fifo))).split())
        assert "is a FIFO, not a regular file" in text
        assert "--" not in text
        empty = tmp_path / "empty.txt"
        empty.write_text("")
        text = " ".join((await _enter(app, pilot, "prompt", str(empty))).split())
        assert "no text to count (0 tokens)" in text


class _Tokenize(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        data = json.dumps({"count": len(body["prompt"].split()), "max_model_len": 131072})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def tokenize_url() -> Iterator[str]:
    with serve_threaded(_Tokenize) as url:
        yield url


async def test_a_typed_file_is_counted_exactly_when_tokenize_answers(
    tmp_path: Path, tokenize_url: str
) -> None:
    path = tmp_path / "prompt.txt"
    path.write_text("word " * 1000, encoding="utf-8")  # 1,000 tokens; the estimate says 1,250
    plan = Plan.from_layout("test", {"dsv41": ["spark-1"]}, urls={"dsv41": tokenize_url})
    app = SparktopApp(plan, [Scripted(engine())], clock=Clock(), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        text = await _enter(app, pilot, "prompt", str(path))
        prompt = app.query_one(BudgetPane).inputs.prompt
        assert (prompt.tokens, prompt.method) == (1000, "exact (/tokenize)")
        assert "1,000 tok" in text and "exact (/tokenize)" in text


async def test_enter_on_a_pasted_count_keeps_its_exact_origin(tokenize_url: str) -> None:
    """A paste counted by ``/tokenize`` leaves its count in the field; Enter on it is the same
    prompt (still ``exact (/tokenize)``), another number typed there is ``given``."""
    from textual import events

    from sparktop.ui.widgets.budget import PromptInput

    plan = Plan.from_layout("test", {"dsv41": ["spark-1"]}, urls={"dsv41": tokenize_url})
    app = SparktopApp(plan, [Scripted(engine())], clock=Clock(), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        app.query_one(PromptInput).post_message(events.Paste("word " * 700 + "\nend"))
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        pane = app.query_one(BudgetPane)
        assert (pane.inputs.prompt.tokens, pane.inputs.prompt.method) == (701, "exact (/tokenize)")
        text = await _enter(app, pilot, "prompt", app.query_one(PromptInput).value)
        assert pane.inputs.prompt.method == "exact (/tokenize)" and "exact (/tokenize)" in text
        await _enter(app, pilot, "prompt", "702")
        assert (pane.inputs.prompt.tokens, pane.inputs.prompt.method) == (702, "given")


class _SlowTokenize(BaseHTTPRequestHandler):
    """Answers ``/tokenize`` only once the test lets it (after the client's deadline)."""

    release: threading.Event

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.release.wait(10)
        data = b'{"count": 3}'
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


async def test_a_slow_tokenize_is_said_as_slow_not_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from textual import events

    from sparktop.sweep.tokens import exact_tokens
    from sparktop.ui.widgets.budget import PromptInput

    monkeypatch.setattr(exact_tokens, "TOKENIZE_DEADLINE_S", 0.5)
    handler = type("Slow", (_SlowTokenize,), {"release": threading.Event()})
    with serve_threaded(handler) as url:
        plan = Plan.from_layout("test", {"dsv41": ["spark-1"]}, urls={"dsv41": url})
        app = SparktopApp(plan, [Scripted(engine())], clock=Clock(), autostart=False)
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                await app.poll_now()
                await open_budget(pilot)
                app.query_one(PromptInput).post_message(events.Paste("a b c\nd"))
                await pilot.pause()
                await app.workers.wait_for_complete()
                await pilot.pause()
                pane = app.query_one(BudgetPane)
                text = " ".join(static_text(pane.query_one("#budget-out", TextBlock)).split())
        finally:
            handler.release.set()  # before the server joins its handler threads
    assert pane.inputs.prompt.method == "estimated"
    assert "/tokenize did not answer within 0.5 s" in text and "unreachable" not in text


async def test_enter_in_another_field_applies_the_prompt_just_typed() -> None:
    """The operator types a prompt, then a concurrency, and presses Enter there: both are the
    question (the prompt used to be dropped until Enter was pressed in its own field)."""
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        pane = app.query_one(BudgetPane)
        pane.query_one("#prompt", Input).value = "40000"
        await pilot.press("tab")  # typing in the concurrency field next
        await pilot.press("backspace", "3", "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert (pane.inputs.prompt.tokens, pane.inputs.prompt.method) == (40000, "given")
        assert pane.inputs.concurrency == 3
        text = static_text(pane.query_one("#budget-out", TextBlock))
        assert "40,000 tok" in text and "conc    3" in text
        out = pane.query_one("#output", Input)
        out.focus()
        out.value = "100"
        await pilot.press("enter")  # the prompt unchanged: kept as it was counted
        assert (pane.inputs.prompt.tokens, pane.inputs.output) == (40000, 100)


async def test_at_80x24_the_pane_opens_under_the_nodes_table() -> None:
    """Under 110 columns the pane used to take the whole body: the nodes were gone while it
    was open. It now sits under the table's header and rows, and the header line stays."""
    from sparktop.ui.widgets.node_table import NodeTable
    from tests.ui.fakes import gpu, node, plan

    nodes = [Scripted(node(f"spark-{i}", gpus=(gpu(),))) for i in range(1, 5)]
    app = SparktopApp(plan(), [*nodes, Scripted(engine())], autostart=False, clock=Clock())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.pause()
        table, pane = app.query_one(NodeTable), app.query_one(BudgetPane)
        assert table.region.height == 5  # its header and the four nodes
        assert pane.region.y >= table.region.bottom and pane.region.height >= 12
        assert pane.region.width >= 78
        header = app.screen.get_widget_at(0, 0)[0]
        assert header.region.y == 0 and header.region.width == 80


def test_pane_lines_fit_80_columns_and_say_no_data_as_the_cli() -> None:
    """A reply or reason longer than the pane breaks between words under the indent (it was
    one group, cut by the terminal at the edge), and a figure without data reads
    ``no data (reason)`` as ``sparktop budget`` says it, the reason given once."""
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
    from sparktop.sweep.tokens import tokens
    from sparktop.ui.budget_view import BudgetInputs, budget_lines

    note = (
        "estimated: endpoint http://192.168.100.10:8015/tokenize did not answer within 10 s "
        "(read timeout), counted from characters instead"
    )
    count = tokens.with_note(tokens.TokenCount(12000, "estimated"), note)
    profile = load_profile(DEFAULT_PROFILE)
    for width in (41, 78):  # the pane beside the table, and under it at 80 columns
        lines = budget_lines(BudgetInputs(count, 40), profile, engine(), width=width)
        texts = ["".join(t for t, _ in line) for line in lines]
        assert max(len(t) for t in texts) <= width
        assert all(t == t.rstrip() for t in texts)
        assert not [t for t in texts if t.startswith(" " * 9)]  # under the indent, not past it
    joined = " ".join(" ".join(t.split()) for t in texts)
    assert note in joined  # every word kept, in order
    reason = "concurrency 40 is outside the measured columns (1, 2, 4, 8); no extrapolation"
    assert f"decode no data ({reason})" in joined
    assert "e2e no data (no TTFT or decode figure)" in joined
    assert "TTFT no data [profile]" in joined  # the same reason, not said a third time
    assert "?" not in joined.split("lesson")[1].split("!")[0]
    assert "no data per request" not in joined
