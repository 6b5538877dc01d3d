"""The app's wiring: alert engine → alert bar and events, help coverage, keymap, quit keys,
the palette's theme picker, and the sources used without an inventory."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import Static

from sparktop.model import NodeSample
from sparktop.ui.app import SparktopApp
from sparktop.ui.screens.help import ENGINE_FIELD_HELP, NODE_COLUMN_HELP, all_bindings
from sparktop.ui.views import WIDE_COLUMNS
from sparktop.ui.widgets.event_log import EventLog
from sparktop.ui.widgets.header import AlertBar
from sparktop.ui.widgets.node_table import NodeTable
from tests.ui.fakes import T0, Clock, Scripted, gpu, node, open_budget, plan


async def test_alert_engine_feeds_the_alert_bar_and_events() -> None:
    clock = Clock()
    hot = Scripted(node("spark-1"))
    app = SparktopApp(plan(cluster="test"), [hot], clock=clock, autostart=False)
    app.alert_engine = app.plan.alert_engine()
    async with app.run_test(size=(120, 40)):
        for _ in range(15):  # the thermal case held longer than hold_s (10 s)
            hot.next = node("spark-1", clock.now, gpus=(gpu(
                uuid="GPU-spark-1", sm_clock_mhz=1833.0, temperature_c=91.0, power_w=38.0,
                clock_event_mask=0x20),))  # fmt: skip
            await app.poll_now()
            clock.advance(1)
        bar = app.query_one(AlertBar)
        assert bar.alerts, "no active alert after 15 s of thermal slowdown"
        assert any("spark-1" in a.subject for a in bar.alerts)
        assert "spark-1" in str(bar.render())
        events = app.query_one(EventLog).events
        assert any(e.subject.startswith("spark-1") and "91" in e.message for e in events)


def test_help_explains_every_column_and_every_binding_has_an_id() -> None:
    assert [key for key, _, _ in NODE_COLUMN_HELP] == [c.key for c in WIDE_COLUMNS]
    assert all(source for _, _, source in (*NODE_COLUMN_HELP, *ENGINE_FIELD_HELP))
    ids = [b.id for b in all_bindings(SparktopApp)]
    assert len(ids) == len(set(ids))
    for wanted in (
        "app.pause",
        "app.budget",
        "app.events",
        "app.theme",
        "app.quit",
        "app.help",
        "app.interval_up",
        "budget.concurrency_up",
        "node.details",
    ):
        assert wanted in ids


def test_the_inventory_knows_every_binding_id_the_monitor_and_replay_bind() -> None:
    """``keys:`` is checked by the inventory, before the UI (which it cannot import): its
    list is the ids bound here, no more, no fewer."""
    from sparktop.inventory.binding_ids import BINDING_IDS
    from sparktop.ui.replay import ReplayApp

    bound = {b.id for app in (SparktopApp, ReplayApp) for b in all_bindings(app)}
    assert bound == BINDING_IDS


async def test_an_id_another_screen_binds_is_not_a_problem_here() -> None:
    """replay.* ids in the inventory are valid (the replay applies them) and the live
    monitor neither applies nor reports them; app.pause is applied."""
    from sparktop.inventory import parse_inventory

    text = (
        "cluster: k\nnodes: [{name: spark-1, host: 127.0.0.1}]\n"
        "keys: {app.pause: space, replay.play: x}\n"
    )
    inventory = parse_inventory(text, "k.yaml")
    app = SparktopApp(plan(inventory=inventory), [Scripted(node("spark-1"))], autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        assert not [n for n in app._notifications if "keys" in str(n.message)]
        await pilot.press("space")
        assert app.poller.paused


async def test_ctrl_c_and_q_quit_cleanly() -> None:
    for key in ("ctrl+c", "q"):
        app = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press(key)
            await pilot.pause()
        assert app.return_code == 0


async def test_palette_theme_picker_lists_and_applies_sparktop_themes() -> None:
    app = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_change_theme()
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"high-contrast")
        await app.workers.wait_for_complete()  # the palette's search
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.theme == "sparktop-high-contrast"


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'vllm:num_requests_running{engine="0"} 1.0\n'
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@contextmanager
def metrics_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_without_inventory_this_machine_and_a_local_engine_if_it_answers() -> None:
    from sparktop.plan import Plan
    from sparktop.sources.build import local_engine_answers

    with metrics_server() as url:
        assert local_engine_answers(url)
        sources = Plan.from_inventory(None, local_engine_url=url).sources()
        assert [s.kind for s in sources] == ["node", "engine"]
        assert getattr(sources[1], "url", None) == url
    assert not local_engine_answers(url)  # the server is gone now
    closed = Plan.from_inventory(None).sources()
    assert len(closed) == 1
    assert closed[0].name


async def test_this_machine_without_a_driver_shows_the_notice() -> None:
    from sparktop.model import NodeState

    sample = NodeSample("here", T0, NodeState.NO_DRIVER, "no NVIDIA driver (NVML not found)")
    app = SparktopApp(plan(), [Scripted(sample)], autostart=False, clock=Clock())
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        await pilot.pause()
        notice = app.query_one("#notice")
        assert notice.display
        assert "No NVIDIA driver" in str(notice.render())
        assert "--inventory" in str(notice.render())
        empty = str(app.query_one("#engines .empty").render())
        assert "no inference server answering at http://127.0.0.1:8000" in empty
        table = app.query_one(NodeTable)
        # At 80 columns: the failure reads across the memory and reasons cells (cut with …),
        # the state says it short.
        (key,) = table.row_keys
        assert table.cell_text(key, "mem") == "no NVIDIA driver (NVML not found)"
        drawn = table._row_strip(key).text
        assert " no NVIDIA driver… " in drawn  # one text, cut after a word at the span
        assert "no driver" in table.row_text(table.row_keys[0])[-1]


async def test_with_an_inventory_the_notice_does_not_ask_for_one() -> None:
    from sparktop.inventory import parse_inventory
    from sparktop.model import NodeState

    inventory = parse_inventory("cluster: lab\nnodes: [{name: here, local: true}]\n", "c.yaml")
    sample = NodeSample("here", T0, NodeState.NO_DRIVER, "no NVIDIA driver (NVML not found)")
    app = SparktopApp(plan(inventory=inventory), [Scripted(sample)], autostart=False, clock=Clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()
        notice = str(app.query_one("#notice").render())
        assert "No NVIDIA driver on any node of lab" in notice and "--inventory" not in notice
        empty = str(app.query_one("#engines .empty").render())
        assert empty == "no inference server in the inventory (add one under engines:)"
        table = app.query_one(NodeTable)
        (key,) = table.row_keys
        drawn = table._row_strip(key).text
        assert " no NVIDIA driver (NVML not found) " in drawn  # at 120 columns: whole


class _Tokenize(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        body = b'{"count": 4321, "max_model_len": 1048576, "tokens": []}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


async def test_pasted_text_is_counted_by_the_engines_tokenize_else_estimated() -> None:
    from textual import events

    from sparktop.plan import Plan
    from sparktop.ui.widgets.budget import BudgetPane, PromptInput
    from tests.ui.fakes import engine

    text = "def f(x):\n    return x * 2\n" * 40  # 1,080 characters, multi-line
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Tokenize)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        for urls, method, tokens in (({"dsv41": url}, "exact (/tokenize)", 4321),
                                     ({}, "estimated", 270)):  # fmt: skip
            run = Plan.from_layout("test", {}, urls=urls)
            app = SparktopApp(run, [Scripted(engine())], autostart=False, clock=Clock())
            async with app.run_test(size=(120, 40)) as pilot:
                await app.poll_now()
                await open_budget(pilot)
                app.query_one(PromptInput).post_message(events.Paste(text))
                await pilot.pause()
                await app.workers.wait_for_complete()
                await pilot.pause()
                prompt = app.query_one(BudgetPane).inputs.prompt
                assert (prompt.method, prompt.tokens) == (method, tokens)
    finally:
        server.shutdown()
        server.server_close()


async def test_fed_samples_are_recorded_and_events_are_posted_as_messages() -> None:
    from sparktop.model import NodeState
    from sparktop.ui.messages import EventRecorded

    class Watching(SparktopApp):
        seen: list[EventRecorded]

        def on_event_recorded(self, message: EventRecorded) -> None:
            self.seen.append(message)

    app = Watching(plan(), [], autostart=False, clock=Clock())
    app.seen = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.feed(node("spark-7"))
        await pilot.pause()
        assert "spark-7" in app.state.nodes
        assert app.seen == []
        app.feed(NodeSample("spark-7", T0 + 2, NodeState.UNREACHABLE, "timed out", since_s=T0 + 2))
        await pilot.pause()
        assert [(m.event.subject, m.event.severity) for m in app.seen] == [("spark-7", "critical")]


async def test_with_an_alert_engine_each_failure_is_logged_once() -> None:
    from dataclasses import replace

    from tests.ui.fakes import down, engine

    clock = Clock()
    one, eng = Scripted(node("spark-1")), Scripted(engine())
    app = SparktopApp(plan(cluster="test"), [one, eng], clock=clock, autostart=False)
    app.alert_engine = app.plan.alert_engine()
    assert app.derives_events is False
    async with app.run_test(size=(120, 40)):
        await app.poll_now()
        for _ in range(12):  # down longer than hold_s (10 s)
            clock.advance(1)
            one.next = down("spark-1", clock.now, "Connection refused", since=T0 + 1)
            eng.next = engine(time_s=clock.now)
            await app.poll_now()
        eng.next = replace(engine(time_s=clock.now + 1), restarted=True)
        clock.advance(1)
        await app.poll_now()
        log = app.query_one(EventLog)
        about_node = [e for e in log.events if e.subject == "spark-1"]
        assert len(about_node) == 1, [e.message for e in about_node]
        assert about_node[0].severity == "critical"
        restarts = [e for e in log.events if "restarted" in e.message]
        assert len(restarts) == 1, [e.message for e in restarts]


async def test_help_shows_keys_as_typed_and_low_power_by_the_rule_thresholds() -> None:
    from sparktop.alerts.thresholds import Thresholds
    from sparktop.ui.screens.help import HelpScreen, HelpText

    app = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = app.screen.help_text
        assert isinstance(shown, HelpText)
        text = shown.markdown
        for typed, binding_id in (("?", "app.help"), ("+", "app.interval_up"),
                                  ("[", "budget.prompt_halve"), ("<", "budget.output_halve"),
                                  ("esc", "budget.close"), ("^p", "")):  # fmt: skip
            assert f"| `{typed}` |" in text and (not binding_id or f"`{binding_id}`" in text)
        for internal in ("question_mark", "left_square_bracket", "less_than_sign", "`plus`"):
            assert internal not in text
        t = Thresholds()
        assert (
            f"utilisation ≥ {t.low_power_util_pct:g} %, SM clock under "
            f"{t.low_power_clock_ratio * 100:g} % of its baseline (of max clock when it has none), "
            f"power under {t.low_power_power_w:g} W, and no slowdown reason bit"
        ) in text
        assert "30 W" not in text


async def test_help_opens_on_the_keys_with_tab_arrows_and_the_screenshot_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparktop.ui.screens.help import HelpScreen

    monkeypatch.chdir(tmp_path)
    app = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.help_text.markdown
        keys_at = text.index("## Keys")
        assert keys_at < text.index("## Nodes") and keys_at < text.index("## Budget pane")
        for typed in ("tab / shift+tab", "↑ / ↓", "S"):
            assert f"| `{typed}` |" in text, typed
        assert "`app.screenshot`" in text
        shown = app.screen.query_one("#help-text", Static)
        first_screen = "\n".join(
            "".join(seg.text for seg in line)
            for line in app.screen.help_text._lines[shown.content_region.width][:20]
        )
        assert "Keys" in first_screen and "app.quit" in first_screen
        await pilot.press("escape", "S")
        await pilot.pause()
    assert [p.suffix for p in tmp_path.iterdir()] == [".svg"]


async def test_a_keys_remap_onto_a_used_key_is_named_and_not_applied() -> None:
    from textual.command import CommandPalette

    from sparktop.inventory import parse_inventory

    text = (
        "cluster: k\nnodes: [{name: spark-1, host: 127.0.0.1}]\n"
        "keys: {app.pause: ctrl+p, app.events: q, app.theme: space}\n"
    )
    inventory = parse_inventory(text, "k.yaml")
    app = SparktopApp(plan(inventory=inventory), [Scripted(node("spark-1"))], autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        messages = [str(n.message) for n in app._notifications]
        assert any(
            "app.pause: ctrl+p clashes: ctrl+p is the command palette" in m
            and "app.pause stays on p" in m
            for m in messages
        ), messages
        assert any("app.events: q clashes: q is Quit (app.quit)" in m for m in messages)
        assert not any("app.theme" in m for m in messages)  # space is free
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)  # ctrl+p kept its meaning, said so
        await pilot.press("escape")
        await pilot.press("p")
        assert app.poller.paused
        theme = app.theme
        await pilot.press("space")
        assert app.theme != theme


async def test_interval_keys_step_through_the_pollers_whole_range() -> None:
    from sparktop.poller import MAX_INTERVAL_S, MIN_INTERVAL_S

    app = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("minus", "minus", "minus")
        assert app.poller.interval_s == MIN_INTERVAL_S == 0.2
        for _ in range(10):
            await pilot.press("plus")
        assert app.poller.interval_s == MAX_INTERVAL_S


def test_a_cleared_alert_reads_ok_in_the_events_pane() -> None:
    from sparktop.alerts import Event, EventKind
    from sparktop.alerts.model import Alert, Severity
    from sparktop.ui.widgets.event_log import event_line

    alert = Alert("node.down:spark-4#1", "node.down", "spark-4", Severity.CRITICAL, T0, T0,
                  "unreachable since 00:00:00")  # fmt: skip
    fired = event_line(Event(T0, EventKind.FIRED, alert)).plain
    cleared = event_line(Event(T0 + 20, EventKind.CLEARED, alert.updated(cleared_s=T0 + 20)))
    assert " CRIT spark-4  unreachable" in fired
    assert " ok   spark-4  cleared: unreachable" in cleared.plain


async def test_a_paste_is_inserted_once_and_text_is_counted_not_taken_for_a_path() -> None:
    """Pasting a number puts it in the field once (Textual also runs Input's own paste
    handler); pasted words are prompt text to count, and an ESC in them or in a typed path
    is shown as ␛, never sent raw."""
    from textual import events

    from sparktop.plan import Plan
    from sparktop.ui.widgets.budget import BudgetPane, PromptInput
    from sparktop.ui.widgets.text_block import TextBlock
    from tests.ui.fakes import engine

    app = SparktopApp(
        Plan.from_layout("t", {}), [Scripted(engine())], autostart=False, clock=Clock()
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        field = app.query_one(PromptInput)
        pane = app.query_one(BudgetPane)
        field.post_message(events.Paste("12345"))
        await pilot.pause()
        assert field.value == "12345"  # once, not "1234512345"

        field.value = ""
        field.post_message(events.Paste("hello \x1b[31mworld of prompts"))
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert field.value != "" and pane.error == ""
        assert (
            pane.inputs.prompt.method == "estimated" and pane.inputs.prompt.source == "pasted text"
        )

        field.value = "/nonexistent/\x1bdir"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "\x1b" not in pane.error and "␛" in pane.error
        shown = str(app.query_one("#budget-out", TextBlock).render())
        assert "\x1b" not in shown


async def test_the_budget_pane_takes_no_limit_from_a_profile_nobody_named() -> None:
    """The monitor without ``--profile`` or an inventory ``profile:`` runs on the default
    profile, which describes another setup: an engine that exports no max_num_seqs has it
    unknown in the pane too (its row says ``/?``), not the default profile's 8."""
    from sparktop.model import NA
    from sparktop.plan import Plan
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
    from sparktop.ui.widgets.text_block import TextBlock
    from tests.ui.fakes import engine

    unknown = NA("max_num_seqs not exported; set max_num_seqs in the inventory")
    live = engine(max_num_seqs=unknown, max_num_batched_tokens=unknown)

    async def pane_text(plan: Plan) -> str:
        app = SparktopApp(plan, [Scripted(live)], autostart=False, clock=Clock())
        async with app.run_test(size=(160, 60)) as pilot:
            await app.poll_now()
            await open_budget(pilot)
            await pilot.pause()
            return str(app.query_one("#budget-out", TextBlock).render())

    default = await pane_text(Plan.from_layout("t", {}))
    assert "max_num_seqs 8" not in default and "[profile]\n" not in default.split("TTFT")[0]
    assert "batched 8,192/? [server]" in default
    named = await pane_text(Plan.from_inventory(None, profile=DEFAULT_PROFILE))
    assert "max_num_seqs 8 [profile]" in named and "8,192/8,192 [profile]" in named


async def test_help_is_one_widget_drawn_once_per_width_and_themed() -> None:
    """``?`` showed nothing for 1.5–2.8 s in the demo: Textual's Markdown widget built a widget
    per paragraph, list item and table cell (hundreds) on the event loop. The help is one
    widget now, its text drawn by Rich once per width (0.13–0.26 s to appear in the demo,
    measured in tmux), without Rich's fixed Markdown colours."""
    from rich.console import Console

    from sparktop.ui.screens.help import PLAIN_MARKDOWN, HelpScreen, HelpText

    app = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert len(app.screen.query("*")) <= 4  # scroll view, its scrollbars, the text
        help_text = app.screen.help_text
        assert isinstance(help_text, HelpText) and help_text._lines
        drawn = "\n".join(
            "".join(s.text for s in line) for line in help_text._lines[max(help_text._lines)]
        )
        assert "sparktop help" in drawn and "budget.prompt_halve" in drawn
        assert "in progress" in drawn  # the engine fields' table is in it
    console = Console(width=100, color_system="truecolor", record=True)
    console.print(HelpText("# h\n\n`code` and **bold**\n\n| a | b |\n|---|---|\n| 1 | 2 |"))
    for segment in console._record_buffer:
        style = segment.style
        assert style is None or (style.color is None and style.bgcolor is None), segment
    ours = {k: v for k, v in PLAIN_MARKDOWN.styles.items() if k.startswith("markdown.")}
    assert ours and all(not (v.color or v.bgcolor) for v in ours.values())
