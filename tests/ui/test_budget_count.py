"""The budget pane's count of a directory (a trial typed ``/usr/share``: quitting hung for
minutes while every file was POSTed to the engine's ``/tokenize``): it shows progress, stops
when the pane closes, never holds up quitting, and sends at most the send cap before it falls
back to the local estimate. Against a ``/tokenize`` on 127.0.0.1 that the test holds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from sparktop.plan import Plan
from sparktop.testing.http_stub import serve_threaded
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.body import Body
from sparktop.ui.widgets.budget import BudgetPane
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.fakes import Clock, Scripted, engine, open_budget
from tests.ui.test_app_pilot import static_text

FILES = 40


class _Held(BaseHTTPRequestHandler):
    """Answers the first ``free`` requests at once, then holds each until ``release``."""

    free = 1
    seen: list[int]
    arrived: threading.Semaphore
    release: threading.Event

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(len(body))
        self.arrived.release()
        if len(self.seen) > self.free:
            self.release.wait(120)
        data = json.dumps({"count": len(json.loads(body)["prompt"].split())}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def do_GET(self) -> None:  # no /props: vLLM's /tokenize shape
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def held() -> Iterator[tuple[str, type[_Held]]]:
    handler = type(
        "Held",
        (_Held,),
        {"seen": [], "arrived": threading.Semaphore(0), "release": threading.Event()},
    )
    with serve_threaded(handler) as url:
        try:
            yield url, handler
        finally:
            handler.release.set()  # before the server joins its handler threads


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    for i in range(FILES):
        (root / f"f{i:02}.txt").write_text("word " * 200, encoding="utf-8")
    return root


async def _arrivals(handler: type[_Held], n: int) -> None:
    for _ in range(n):
        assert await asyncio.to_thread(handler.arrived.acquire, True, 30), "no request came"


def _count_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "budget-count"]


async def test_closing_the_pane_stops_the_count_and_progress_is_shown(
    held: tuple[str, type[_Held]], folder: Path
) -> None:
    url, handler = held
    plan = Plan.from_layout("test", {"dsv41": ["spark-1"]}, urls={"dsv41": url})
    app = SparktopApp(plan, [Scripted(engine())], clock=Clock(), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        pane = app.query_one(BudgetPane)
        pane.query_one("#prompt").value = str(folder)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await _arrivals(handler, 2)  # the first file answered, the second held
        await pilot.pause()
        assert pane.counting == f"counting {folder}… 1 file, 1,000 chars so far"
        text = " ".join(static_text(pane.query_one("#budget-out", TextBlock)).split())
        assert "1 file, 1,000 chars so far" in text
        app.query_one(Body).close_budget()
        await pilot.pause()
        assert pane.counting == ""
        handler.release.set()
        for thread in _count_threads():
            await asyncio.to_thread(thread.join, 30)
        assert not _count_threads()
    # The held request was the last: nothing more was read or sent once the pane closed.
    assert len(handler.seen) == 2 and pane.inputs.prompt.method == "default"


def test_quitting_while_a_request_is_held_returns_at_once(
    held: tuple[str, type[_Held]], folder: Path
) -> None:
    """The app in its own interpreter (quitting is ``asyncio.run``'s end, which joined the
    counting thread): ``q`` during a held request ends the process; the server holds it far
    longer than the process is given."""
    url, handler = held
    script = textwrap.dedent(
        f"""
        import asyncio
        from sparktop.plan import Plan
        from sparktop.ui.app import SparktopApp
        from sparktop.ui.widgets.budget import BudgetPane
        from tests.ui.fakes import Clock, Scripted, engine

        plan = Plan.from_layout("test", {{"dsv41": ["spark-1"]}}, urls={{"dsv41": {url!r}}})
        app = SparktopApp(plan, [Scripted(engine())], clock=Clock(), autostart=False)

        async def drive(pilot):
            await app.poll_now()
            await pilot.press("b", "i")
            app.query_one(BudgetPane).query_one("#prompt").value = {str(folder)!r}
            await pilot.press("enter")
            while not app.query_one(BudgetPane).counting.endswith("so far"):
                await asyncio.sleep(0.05)
            print("counting", flush=True)
            await pilot.press("escape", "q")

        app.run(headless=True, size=(120, 40), auto_pilot=drive)
        print("quit", flush=True)
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["counting", "quit"]
    assert len(handler.seen) == 2  # the held one was the last sent


async def test_a_folder_over_the_send_cap_is_estimated_and_says_so(
    held: tuple[str, type[_Held]], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparktop.ui import budget_count

    url, handler = held
    handler.release.set()
    cap = 5 * 1000  # five of the 1,000-byte files
    monkeypatch.setattr(budget_count, "DEFAULT_MAX_SEND_BYTES", cap)
    plan = Plan.from_layout("test", {"dsv41": ["spark-1"]}, urls={"dsv41": url})
    app = SparktopApp(plan, [Scripted(engine())], clock=Clock(), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        pane = app.query_one(BudgetPane)
        pane.query_one("#prompt").value = str(folder)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        prompt = pane.inputs.prompt
        text = " ".join(static_text(pane.query_one("#budget-out", TextBlock)).split())
    assert len(handler.seen) == 5 and sum(handler.seen) < cap + 5 * 100  # JSON framing
    assert prompt.method == "estimated" and prompt.files_counted == FILES
    assert prompt.note.startswith("estimated (send cap): the text is over")
    assert "MiB, the most sparktop sends to /tokenize; sending stopped there" in text
