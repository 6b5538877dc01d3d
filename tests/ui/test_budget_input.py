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
from tests.ui.fakes import Clock, Scripted, engine
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
        await pilot.press("b")
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
        await pilot.press("b")
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
        await pilot.press("b")
        await pilot.pause()
        text = static_text(app.query_one(BudgetPane).query_one("#budget-out", TextBlock))
        assert "prompt  8,192 tok  [default]" in text and "[default] not set yet" in text


async def test_errors_are_phrased_for_the_pane(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("b")
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
        await pilot.press("b")
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
        await pilot.press("b")
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

    from sparktop.sweep import exact_tokens
    from sparktop.ui.widgets.budget import PromptInput

    monkeypatch.setattr(exact_tokens, "TOKENIZE_DEADLINE_S", 0.5)
    handler = type("Slow", (_SlowTokenize,), {"release": threading.Event()})
    with serve_threaded(handler) as url:
        plan = Plan.from_layout("test", {"dsv41": ["spark-1"]}, urls={"dsv41": url})
        app = SparktopApp(plan, [Scripted(engine())], clock=Clock(), autostart=False)
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                await app.poll_now()
                await pilot.press("b")
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
