"""The live app driven with Pilot and injected scripted sources (no network, frozen clock)."""

from __future__ import annotations

from dataclasses import replace

from textual.command import CommandPalette
from textual.widgets import Input, Label, Static

from sparktop.alerts.model import Alert, Severity
from sparktop.inventory import parse_inventory
from sparktop.model import EngineState
from sparktop.ui.app import SparktopApp
from sparktop.ui.events import EventRecord
from sparktop.ui.screens.help import HelpScreen
from sparktop.ui.screens.node_detail import NodeDetailScreen
from sparktop.ui.views import NARROW_COLUMNS, WIDE_COLUMNS, row_key
from sparktop.ui.widgets.budget import BudgetPane
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.event_log import EventLog
from sparktop.ui.widgets.header import AlertBar, HeaderBar
from sparktop.ui.widgets.node_table import NodeTable
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.fakes import (
    T0,
    Clock,
    Hung,
    Scripted,
    disabled_engine,
    down,
    engine,
    gpu,
    node,
    open_budget,
    plan,
)


def make_app(*sources: Scripted, clock: Clock | None = None, **kwargs: object) -> SparktopApp:
    return SparktopApp(
        plan(cluster="test", tp_groups={"dsv41": ["spark-1", "spark-2"]}),
        list(sources),
        clock=clock or Clock(),
        autostart=False,
        **kwargs,  # type: ignore[arg-type]
    )


def cell_text(table: NodeTable, node_name: str, column: str, gpu_key: str | None = None) -> str:
    key = f"GPU-{node_name}" if gpu_key is None else gpu_key
    return table.cell_text(row_key(node_name, key), column)


def static_text(widget: Static | TextBlock) -> str:
    return str(widget.render())


async def test_rows_appear_and_update_in_place_keeping_the_cursor() -> None:
    clock = Clock()
    sources = [Scripted(node(f"spark-{i}")) for i in (1, 2, 3)]
    app = make_app(*sources, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        table = app.query_one(NodeTable)
        assert table.row_count == 3
        assert [c.key for c in WIDE_COLUMNS] == [c.key for c in table.columns]
        table.move_cursor(1)
        await pilot.pause()
        assert table.cursor_key() == row_key("spark-2", "GPU-spark-2")
        before = set(table.row_keys)

        clock.advance(1)
        sources[1].next = node(
            "spark-2", clock.now, gpus=(gpu(uuid="GPU-spark-2", temperature_c=77.0),)
        )
        sources[0].next = node("spark-1", clock.now)
        sources[2].next = node("spark-3", clock.now)
        written = app.cells_written
        await app.poll_now()

        assert set(table.row_keys) == before  # same keyed rows, nothing re-added
        assert table.cursor_key() == row_key("spark-2", "GPU-spark-2")
        assert cell_text(table, "spark-2", "temp") == "77"
        # Only what changed was written (the temperature, the trend sparklines), not every cell.
        # (Summed over ticks: under load the 1 s UI timer can render the new samples before
        # poll_now's own tick does, leaving that tick nothing to write.)
        assert 0 < app.cells_written - written < len(WIDE_COLUMNS) * 3


async def test_node_unreachable_then_recovered() -> None:
    clock = Clock()
    one, two = Scripted(node("spark-1")), Scripted(node("spark-2"))
    app = make_app(one, two, clock=clock)
    async with app.run_test(size=(120, 40)):
        await app.poll_now()
        table = app.query_one(NodeTable)
        clock.advance(5)
        two.next = down("spark-2", clock.now, "Connection refused [errno 111]")
        one.next = node("spark-1", clock.now)
        await app.poll_now()

        state = cell_text(table, "spark-2", "state")
        assert state.startswith("down ")
        # The message reads across the empty memory and reasons cells.
        # One text across the memory, reasons and trend cells (no gaps where words broke).
        assert cell_text(table, "spark-2", "mem") == "Connection refused [errno 111]"
        assert cell_text(table, "spark-2", "why") == ""
        drawn = table._row_strip(row_key("spark-2", "GPU-spark-2")).text
        assert " Connection refused [errno 111] " in drawn
        assert cell_text(table, "spark-1", "state") == "ok"
        log = app.query_one(EventLog)
        assert [(e.severity, e.subject) for e in log.events] == [("critical", "spark-2")]

        clock.advance(10)
        two.next = node("spark-2", clock.now)
        one.next = node("spark-1", clock.now)
        await app.poll_now()
        assert cell_text(table, "spark-2", "state") == "ok"
        assert table.row_count == 2
        last = log.events[-1]
        assert (last.severity, last.subject) == ("info", "spark-2")
        assert "recovered after 10 s" in last.message


async def test_stale_node_is_marked_with_its_age() -> None:
    clock = Clock()
    app = make_app(Scripted(node("spark-1")), clock=clock)
    async with app.run_test(size=(120, 40)):
        await app.poll_now()
        clock.advance(12)
        app.tick()
        assert cell_text(app.query_one(NodeTable), "spark-1", "state") == "stale 12 s"


async def test_engine_404_shows_metrics_disabled_and_logs_it() -> None:
    clock = Clock()
    eng = Scripted(engine())
    app = make_app(Scripted(node("spark-1")), eng, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()  # the engine block mounts, then renders on the next tick
        app.tick()
        block = app.query_one(EnginePanel).blocks["dsv41"]
        assert "running 8/8" in static_text(block.query_one(".engine-lines", TextBlock))

        clock.advance(1)
        eng.next = disabled_engine("dsv41", clock.now)
        await app.poll_now()
        text = static_text(block.query_one(".engine-lines", TextBlock))
        assert "metrics disabled" in text
        assert "404" in text and "SGLang" not in text  # a vLLM server: no SGLang advice
        assert "running" not in text
        events = app.query_one(EventLog).events
        assert events[-1].subject == "dsv41"
        assert events[-1].severity == "warning"


async def test_expected_strip_compares_with_the_profile_row() -> None:
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()
        app.tick()
        block = app.query_one(EnginePanel).blocks["dsv41"]
        strip = static_text(block.query_one("ExpectedStrip", TextBlock))
        # The 4-Spark profile's 4K × 8 row (3,800 prompt tokens): TTFT 8.43 s, exact.
        # A scripted sample has no load history: the load of this scrape, said so.
        assert "for running 8 × 3,800 prompt tokens, load at this scrape" in strip
        assert "exact" in strip
        assert "TTFT 8.43 s p50 8.43 s +0%" in strip
        # No like column for the live rate: shown without a deviation, and why.
        assert "agg 361.0 live e2e 361.0 (not compared: the profile's is" in strip
        assert "ttft_s" not in strip and "aggregate_tps" not in strip  # keys: --json
        assert "decode-only" in strip


async def test_budget_what_if_keys_change_the_numbers() -> None:
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.press("escape")  # leave the prompt field: the what-if keys work
        pane = app.query_one(BudgetPane)
        assert pane.display and pane.has_focus
        out = pane.query_one("#budget-out", TextBlock)
        first = static_text(out)
        assert "8,192 tok" in first and "conc    1" in first

        await pilot.press("plus", "plus")
        assert pane.inputs.concurrency == 3
        assert app.poller.interval_s == 1.0  # + went to the pane, not the poll interval
        assert "conc    3" in static_text(out)

        await pilot.press("right_square_bracket")
        assert pane.inputs.prompt.tokens == 16_384
        doubled = static_text(out)
        assert "16,384 tok" in doubled
        assert "5.72M free" in doubled  # the live pool's free part, from the server

        await pilot.press("left_square_bracket", "left_square_bracket", "minus")
        assert (pane.inputs.prompt.tokens, pane.inputs.concurrency) == (4096, 2)


async def test_budget_counts_a_typed_directory(tmp_path: object) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "a.py").write_text("x = 1\n" * 400)
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(120, 40)) as pilot:
        await open_budget(pilot)
        prompt = app.query_one("#prompt", Input)
        assert prompt.has_focus
        prompt.value = str(folder)
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        pane = app.query_one(BudgetPane)
        assert pane.inputs.prompt.method == "estimated"
        assert pane.inputs.prompt.tokens == 600  # 2,400 characters ÷ 4
        assert "1 file," in static_text(pane.query_one("#budget-out", TextBlock))


async def test_help_and_palette_open() -> None:
    app = make_app(Scripted(node("spark-1")), Scripted(node("spark-2")))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"node spark-2")
        await app.workers.wait_for_complete()  # the palette's search
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one(NodeTable).cursor_key() == row_key("spark-2", "GPU-spark-2")


async def test_node_detail_screen_shows_fields_and_probe_output() -> None:
    fallback = "one-shot: the stream nvidia-smi -lms exited 2 before its first row: Invalid"
    app = make_app(Scripted(node("spark-1", probe=fallback)))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailScreen)
        raw = static_text(app.screen.query_one("#raw", Static))
        assert "GPU-spark-1, NVIDIA GB10" in raw
        how = app.screen.query_one("#raw-label", Label).render()
        assert str(how) == f"last probe output · read by {fallback}"
        await pilot.press("escape")
        assert not isinstance(app.screen, NodeDetailScreen)


async def test_theme_cycle_and_switch() -> None:
    app = make_app(Scripted(node("spark-1")))
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.theme == "sparktop-dark"
        await pilot.press("t")
        assert app.theme != "sparktop-dark" and app.theme.startswith("sparktop-")
        app.theme = "sparktop-light"
        await pilot.pause()
        assert app.theme_variables["spark-warn"].lower() == "#a35200"
        app.theme = "nord"  # a Textual theme without sparktop's variables still works
        await pilot.pause()
        assert app.theme_variables["spark-warn"]


async def test_unknown_or_bad_theme_falls_back_with_a_notification(tmp_path: object) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "broken.tcss"
    bad.write_text("$primary: not-a-colour;\n")
    for wanted in ("no-such-theme", str(bad)):
        app = make_app(Scripted(node("spark-1")), theme=wanted)
        async with app.run_test(size=(120, 40)):
            assert app.theme == "sparktop-dark"
            assert any("using sparktop-dark" in str(n.message) for n in app._notifications)


async def test_inventory_keys_remap_bindings() -> None:

    text = (
        "cluster: keys-test\nnodes: [{name: spark-1, host: 127.0.0.1}]\nkeys: {app.pause: space}\n"
    )
    inventory = parse_inventory(text, "k.yaml")
    app = SparktopApp(
        plan(inventory=inventory), [Scripted(node("spark-1"))], clock=Clock(), autostart=False
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")
        assert app.poller.paused
        assert "PAUSED" in static_text(app.query_one(HeaderBar))


async def test_untrusted_text_is_never_markup() -> None:
    clock = Clock()
    name = "[bold]n1[/"
    bad = Scripted(down(name, T0, "[red]boom[/red] [link=x]"))
    app = make_app(bad, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()
        table = app.query_one(NodeTable)
        assert cell_text(table, name, "node", gpu_key="") == name
        assert cell_text(table, name, "mem", gpu_key="") == "[red]boom[/red] [link=x]"
        assert "[red]boom[/red]" in str(app.query_one(EventLog).events[0].message)


async def test_control_characters_from_a_node_never_reach_the_terminal() -> None:
    # An OSC title sequence and a clipboard write (OSC 52) in a failure message and a name,
    # and bidi controls and zero-width characters that would reorder or hide the text.
    bidi = "\u202e\u2066\u2069\u200b\u200f\u2028\u2029"
    message = f"boom \x1b]0;pwned\x07 \x1b]52;c;ZWNobyBoaQ==\x07 \x9b2J {bidi}"
    name = "n\x1b[2J1"
    app = make_app(Scripted(down(name, T0, message)), clock=Clock())

    def drawn() -> tuple[str, str]:
        """What the terminal is sent for the current screen, and its plain text."""
        strips = app.screen._compositor.render_strips()
        return "".join(s.render(app.console) for s in strips), "".join(s.text for s in strips)

    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()
        for _ in ("main screen", "detail screen"):
            sent, text = drawn()
            # Textual itself sends CSI (ESC [) colour codes only; none of ours get through.
            assert "\x1b]" not in sent and "\x07" not in sent and "\x9b" not in sent
            assert "\x1b[2J" not in sent
            assert not any(ch in sent for ch in bidi)
            assert "n␛[2J1" in text  # shown, as symbols
            await pilot.press("enter")
            await pilot.pause()
        assert isinstance(app.screen, NodeDetailScreen)


async def test_long_names_widen_their_columns_and_are_cut_with_a_mark_when_they_cannot() -> None:
    names = [f"dgx-spark-{i:02d}" for i in range(1, 5)]
    app = SparktopApp(
        plan(cluster="test", tp_groups={"deepseek-v41-flash": names}),
        [Scripted(node(n, gpus=(gpu(uuid=f"GPU-{n}"),))) for n in names],
        clock=Clock(),
        autostart=False,
    )
    async with app.run_test(size=(160, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()
        text = "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert all(name in text for name in names)  # room to spare: the full names
        assert "deepseek-v41-flash·3" in text
        await pilot.resize_terminal(120, 40)  # the wide set only just fits: cut, with …
        await app.poll_now()
        await pilot.pause()
        text = "\n".join(s.text for s in app.screen._compositor.render_strips())
        assert "dgx-spark…" in text and "dgx-spark-01" not in text
        assert "deep…·3" in text  # the rank is kept, the group name is cut


async def test_a_hung_node_does_not_block_the_others() -> None:
    hung, fine = Hung("spark-9"), Scripted(node("spark-1"))
    app = SparktopApp(plan(cluster="test"), [hung, fine], clock=Clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await hung.started.wait()
        await fine.polled.wait()
        app.tick()
        await pilot.pause()
        table = app.query_one(NodeTable)
        assert table.row_count == 1
        assert cell_text(table, "spark-1", "state") == "ok"


async def test_inventory_nodes_hold_their_place_until_their_first_poll_answers() -> None:
    """Rows did appear in the order the first answers came in, then jump into place."""
    first, second, third = Hung("spark-1"), Hung("spark-2"), Scripted(node("spark-3"))
    nodes = ", ".join(f"{{name: spark-{i}, host: 127.0.0.{i}}}" for i in (1, 2, 3))
    inventory = parse_inventory(f"cluster: test\nnodes: [{nodes}]\n", "cluster.yaml")
    app = SparktopApp(plan(inventory=inventory), [first, second, third], clock=Clock())
    async with app.run_test(size=(120, 40)) as pilot:
        await first.started.wait()
        await third.polled.wait()
        app.tick()
        await pilot.pause()
        table = app.query_one(NodeTable)
        keys = [
            row_key("spark-1", None),
            row_key("spark-2", None),
            row_key("spark-3", "GPU-spark-3"),
        ]
        assert list(table.row_keys) == keys
        assert table.cell_text(keys[0], "state") == "waiting…"
        assert "first poll in progress" in table.cell_text(keys[1], "mem")
        assert cell_text(table, "spark-3", "state") == "ok"
        table.focus()
        table.move_cursor(0)
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, NodeDetailScreen)


async def test_events_api_and_alert_bar_accept_generic_records() -> None:
    app = make_app(Scripted(node("spark-1")))
    async with app.run_test(size=(120, 40)):
        app.add_event(EventRecord(T0, "warning", "spark-1", "clock 1,833 MHz (−27 %)"))
        app.tick()
        lines = "\n".join(app.query_one(EventLog).lines)
        assert "WARN spark-1  clock 1,833 MHz" in lines

        class Active:
            severity, subject, message, since_s = "critical", "dsv41", "KV 95 %", T0 - 30

        app.set_active_alerts([Active()])
        bar = static_text(app.query_one(AlertBar))
        assert "dsv41" in bar and "KV 95 %" in bar and "30 s" in bar


async def test_narrow_terminal_uses_the_narrow_columns() -> None:
    app = make_app(Scripted(node("spark-1")))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        await pilot.pause()
        app.tick()
        table = app.query_one(NodeTable)
        assert [c.key for c in table.columns] == [c.key for c in NARROW_COLUMNS]
        assert cell_text(table, "spark-1", "mem") == "U 105/122G"


async def test_pause_freezes_staleness_and_interval_keys_step() -> None:
    clock = Clock()
    app = make_app(Scripted(node("spark-1")), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("p")
        clock.advance(30)
        app.tick()
        assert cell_text(app.query_one(NodeTable), "spark-1", "state") == "ok"
        await pilot.press("p", "plus", "plus")
        assert app.poller.interval_s == 5.0
        await pilot.press("minus")
        assert app.poller.interval_s == 2.0


def test_engine_failure_states_have_distinct_events() -> None:
    from sparktop.ui.events import transition_events

    ok = engine()
    gone = replace(ok, state=EngineState.UNREACHABLE, message="timed out")
    events = transition_events(ok, gone)
    assert [(e.severity, e.message) for e in events] == [
        ("critical", "scrape unreachable: timed out")
    ]
    restarted = replace(ok, restarted=True)
    assert transition_events(ok, restarted)[0].message == "server restarted (counters reset)"


async def test_row_state_and_palette_say_throttled_and_low_power() -> None:
    from textual.command import CommandList

    hot = gpu(uuid="GPU-spark-2", sm_clock_mhz=1833.0, temperature_c=91.0, clock_event_mask=0x20)
    stuck = gpu(uuid="GPU-spark-3", sm_clock_mhz=513.0, power_w=15.0, utilization_pct=100.0)
    sources = [
        Scripted(node("spark-1")),
        Scripted(node("spark-2", gpus=(hot,))),
        Scripted(node("spark-3", gpus=(stuck,))),
    ]
    app = make_app(*sources)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        table = app.query_one(NodeTable)
        assert cell_text(table, "spark-1", "state") == "ok"
        assert cell_text(table, "spark-2", "state") == "throttled"
        assert cell_text(table, "spark-3", "state") == "low-power?"

        await pilot.press("ctrl+p", *"node spark-2")
        await app.workers.wait_for_complete()  # the palette's search
        await pilot.pause()
        options = app.screen.query_one(CommandList)
        texts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any("Jump to spark-2 in the Nodes table (throttled)" in t for t in texts), texts


def alert(
    severity: str, subject: str, message: str, age_s: float = 30.0, recovering: bool = False
) -> Alert:
    """An active alert as the alert engine makes it, ``age_s`` old at ``T0``."""
    started = T0 - age_s
    return Alert(
        id=f"test:{subject}#1", rule="test", subject=subject, severity=Severity(severity),
        started_s=started, fired_s=started, message=message,
        recovering_since_s=T0 if recovering else None,
    )  # fmt: skip


async def test_alert_bar_counts_and_puts_the_most_severe_first() -> None:

    app = make_app(Scripted(node("spark-1")))
    async with app.run_test(size=(80, 24)) as pilot:
        app.set_active_alerts(
            [
                alert("warning", "dsv41", "decode 27 % below expected", 5),
                alert("critical", "spark-3/gpu0", "throttling at 1,833 MHz", 40),
                alert("warning", "spark-2/gpu0", "temperature 86 °C", 2),
            ]
        )
        await pilot.pause()
        bar = static_text(app.query_one(AlertBar))
        assert bar.startswith("3 alerts (1 critical): ▲ spark-3/gpu0 throttling at 1,833 MHz 40 s")
        # Then the warnings, newest first.
        subjects = [a.subject for a in app.query_one(AlertBar).alerts]
        assert subjects == ["spark-3/gpu0", "spark-2/gpu0", "dsv41"]
        # On screen at 80 columns: the count and the critical alert are both visible, and
        # the line ends after a word.
        line = app.query_one(AlertBar).render_line(0).text.strip()
        assert len(line) <= 80
        assert line.startswith("3 alerts (1 critical): ▲ spark-3/gpu0 throttling")
        assert line == "3 alerts (1 critical): ▲ spark-3/gpu0 throttling at 1,833 MHz 40 s…"


async def test_alert_bar_marks_recovering_alerts_and_puts_them_last() -> None:
    """A recovering alert keeps its worst reading as message: it must say it is recovering."""

    app = make_app(Scripted(node("spark-1")))
    async with app.run_test(size=(120, 40)) as pilot:
        app.set_active_alerts(
            [
                alert("critical", "dsv41", "KV cache 100.0 % full", recovering=True),
                alert("critical", "spark-3/gpu0", "throttling at 1,833 MHz"),
            ]
        )
        await pilot.pause()
        bar = static_text(app.query_one(AlertBar))
        assert bar.index("▲ spark-3/gpu0") < bar.index("✓ dsv41 recovering, was: KV cache")


async def test_clock_trend_and_detail_plots_are_on_a_fixed_scale_and_say_na() -> None:
    from sparktop.model import NA
    from sparktop.ui.widgets.plot import Plot

    clock = Clock()
    source = Scripted(node("spark-1"))
    app = make_app(source, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        for mhz in (2498, 2521, 2505, 2512, 2500, 2519, 2510):  # healthy jitter
            g = gpu(uuid="GPU-spark-1", sm_clock_mhz=float(mhz), power_w=NA("[N/A]"))
            source.next = node("spark-1", clock.now, gpus=(g,))
            await app.poll_now()
            clock.advance(1)
        table = app.query_one(NodeTable)
        assert cell_text(table, "spark-1", "trend") == "▇▇▇▇▇▇▇"

        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailScreen)
        await pilot.pause()
        clock_plot = app.screen.query_one("#plot-sm_clock_mhz", Plot)
        assert (clock_plot.low, clock_plot.high) == (0.0, 3003.0)
        assert len(set(clock_plot.render().plain.split("\n")[0].strip())) == 1  # flat top row
        power = app.screen.query_one("#plot-power_w", Plot)
        assert power.values == ()
        assert power.render().plain == "n/a (power W: [N/A])"


async def test_detail_screen_says_throttled_and_offers_only_keys_that_work_there() -> None:
    from sparktop.ui.widgets.body import Body

    hot = gpu(uuid="GPU-spark-1", sm_clock_mhz=1833.0, temperature_c=91.0, clock_event_mask=0x20)
    app = make_app(Scripted(node("spark-1", gpus=(hot,))))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("enter")
        assert isinstance(app.screen, NodeDetailScreen)
        assert static_text(app.screen.query_one("#status", Static)).startswith("throttled")
        shown = {k for k, a in app.screen.active_bindings.items() if a.binding.show}
        assert "b" not in shown and "e" not in shown  # the budget and events are elsewhere
        await pilot.press("b", "e")
        await pilot.press("escape")
        assert not app.query_one(Body).budget_open
        assert app.query_one(EventLog).display


async def test_node_detail_shows_the_last_good_fields_with_their_own_time_dimmed() -> None:
    """A node that went down keeps its last good GPU fields on the detail screen, dimmed and
    headed with the time they were read (not stamped with the failed poll's time)."""
    from textual.widgets import DataTable

    from sparktop.hostmodel import GpuProcess
    from sparktop.ui import format as fmt

    clock = Clock()
    held = (GpuProcess(41000, "python3", "GPU-spark-1", 103_426.0, 83.0),)
    source = Scripted(node("spark-1", clock.now, processes=held))
    app = make_app(source, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeDetailScreen)
        label = app.screen.query_one("#fields-label", Label)
        assert str(label.render()) == "GPU fields"
        assert "driver 580.95.05" in static_text(app.screen.query_one("#title", Static))
        await pilot.press("escape")

        clock.advance(42)
        source.next = down("spark-1", clock.now)
        await app.poll_now()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeDetailScreen)
        heading = str(screen.query_one("#fields-label", Label).render())
        assert heading == f"GPU fields (last good reading at {fmt.clock_time(T0)}, 42 s before)"
        table = screen.query_one("#fields", DataTable)
        cell = table.get_cell("sm_clock_mhz", "1")
        assert str(cell) == "2,509" and cell.style == "dim"
        title = static_text(screen.query_one("#title", Static))
        assert f"polled {fmt.clock_time(clock.now)}" in title and "sampled" not in title
        # The driver and the memory line keep their last known values, with their own time.
        assert f"driver 580.95.05 (at {fmt.clock_time(T0)})" in title
        memory = static_text(screen.query_one("#memory", Static))
        assert memory.startswith("unified: used ") and "n/a" not in memory.split("\n")[0]
        assert f"last known, read at {fmt.clock_time(T0)}" in memory
        # The GPU processes too: the last known ones with their time, not "none".
        procs = static_text(screen.query_one("#processes", Static))
        assert "41000" in procs and "python3" in procs
        assert procs.endswith(f"last known, read at {fmt.clock_time(T0)}")


async def test_node_detail_of_a_failure_not_rechecked_says_when_it_was_checked() -> None:
    """Issue 20: while the source backs off, the details say the failure is as last checked,
    and when the next try is, beside since when the node is down."""
    from sparktop.ui import format as fmt

    clock = Clock()
    repeated = replace(
        down("spark-1", clock.now, "connection refused", since=clock.now - 40),
        checked_s=clock.now - 12,
        retry_s=clock.now + 9,
    )
    app = make_app(Scripted(repeated), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeDetailScreen)
        status = static_text(screen.query_one("#status", Static))
        since = fmt.clock_time(clock.now - 40)
        assert status == (
            f"unreachable since {since}: connection refused · checked 12 s ago, next try in 9 s"
        )


async def test_node_detail_of_a_node_never_seen_healthy_says_why_processes_are_unknown() -> None:
    """A node down from the first poll has no processes to show: n/a with the reason, not
    "GPU processes none" (which says the GPU runs nothing)."""
    clock = Clock()
    app = make_app(Scripted(down("spark-1", clock.now)), clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeDetailScreen)
        procs = static_text(screen.query_one("#processes", Static))
        assert procs == "n/a (no healthy poll of this node yet: unreachable)"


def test_the_slowdown_counters_row_fits_an_80_column_screen() -> None:
    """The node details' counters row was ``sw_thermal_us=12300000.0, hw_thermal_us=…``
    (over 100 columns, cut at 80): nvidia-smi's names (as snapshot and the alerts write them),
    seconds, the counters at 0 together, one n/a when none is known."""
    from sparktop.model import SlowdownCounters
    from sparktop.ui.gpu_fields import counters_text

    text = counters_text(SlowdownCounters(12_300_000.0, 0.0, 987_654_321.0, 0.0))
    assert text == "sw_thermal_slowdown 12.3 s · sw_power_cap 987.7 s · others 0 s"
    assert len("  counters  ") + len(text) <= 80
    assert counters_text(SlowdownCounters(0.0, 0.0, 0.0, 0.0)) == "0 s in each"
    assert counters_text(SlowdownCounters()) == "n/a (not queried)"


async def test_an_engines_only_monitor_says_there_are_no_nodes_not_an_empty_header() -> None:
    """An inventory with engines and no nodes drew the Nodes table's header over no rows; one
    line now says why there is no table, the engine takes the focus (Enter opens its
    details, q still quits), and a monitor with a node keeps its table."""
    from sparktop.ui.notices import NO_NODES_TEXT

    app = SparktopApp(plan(tp_groups={"dsv41": ()}), [Scripted(engine())], autostart=False)
    async with app.run_test(size=(120, 30)) as pilot:
        await app.poll_now()
        await pilot.pause()
        await pilot.pause()
        assert not app.query_one(NodeTable).display
        line = app.query_one("#no-nodes", Static)
        assert line.display and static_text(line) == NO_NODES_TEXT
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "no nodes in the inventory" in screen and "SM MHz" not in screen
        assert app.focused is app.query_one(EnginePanel).blocks["dsv41"]
        await pilot.press("enter")
        await pilot.pause()
        assert type(app.screen).__name__ == "EngineDetailScreen"
    with_node = SparktopApp(plan(), [Scripted(node("spark-1"))], autostart=False)
    async with with_node.run_test(size=(120, 30)):
        assert with_node.query_one(NodeTable).display
        assert not with_node.query_one("#no-nodes", Static).display
        assert with_node.focused is with_node.query_one(NodeTable)


async def test_node_detail_names_gpu_fields_in_standard_terms_not_internal_keys() -> None:
    """The GPU fields table showed our snake_case keys (``sm_clock_mhz``, ``clock_event_mask``)
    with raw floats; it now says each field's standard term with its unit, the value in that
    unit, and the nvidia-smi field it is read from; GB10's memory figures point at the
    unified memory section."""
    from dataclasses import fields as dc_fields

    from textual.widgets import DataTable

    from sparktop.model import GpuSample
    from sparktop.ui.gpu_fields import GPU_FIELDS

    assert list(GPU_FIELDS) == [f.name for f in dc_fields(GpuSample)]  # every field labelled
    throttled = gpu(sm_clock_mhz=1832.0, clock_event_mask=0x20, power_w=37.84)
    app = make_app(Scripted(node("spark-1", gpus=(throttled,))))
    async with app.run_test(size=(140, 44)) as pilot:
        await app.poll_now()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeDetailScreen)
        table = app.screen.query_one("#fields", DataTable)
        rows = {
            str(table.get_row(key)[0]): [str(c) for c in table.get_row(key)[1:]]
            for key in table.rows
        }
        assert not [label for label in rows if "_" in label], rows
        assert rows["SM clock MHz"] == ["1,832", "clocks.sm"]
        assert rows["power W"] == ["37.8", "power.draw"]
        assert rows["clock-event reasons"] == ["0x20 sw_thermal_slowdown",
                                               "clocks_event_reasons.active"]  # fmt: skip
        assert rows["memory used MiB"][0] == "n/a ([N/A]; unified memory: see memory below)"
        assert rows["GPU processes' memory MiB"][0] == "101,200"
        assert [str(c.label) for c in table.columns.values()][-1] == "nvidia-smi field"
