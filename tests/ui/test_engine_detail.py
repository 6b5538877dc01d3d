"""The engine block's TTFT split and spec figure, the engine detail screen (opened from the
palette) and the budget pane's "if sent now" lines, driven with Pilot."""

from __future__ import annotations

from textual.widgets import DataTable, Static

from sparktop.model import NA, Quantile
from sparktop.ui.screens.engine_detail import EngineDetailScreen
from sparktop.ui.widgets.budget import BudgetPane
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.ui.fakes import Scripted, engine, open_budget
from tests.ui.test_app_pilot import make_app, static_text

BREAKDOWN = {
    "queue_time_mean_s": 0.42,
    "queue_time_p50": Quantile(0.3, "<"),
    "prefill_time_mean_s": 8.61,
    "prefill_time_p50": Quantile(8.2),
    "decode_time_mean_s": 2.9,
    "e2e_latency_mean_s": 11.93,
    "tpot_mean_s": 0.023,
    "spec_acceptance_rate": 0.54,
    "spec_mean_accept_len": 3.69,
    "spec_accept_by_position": (0.8, 0.64, 0.51, 0.41, 0.33),
    "window_s": 30.0,
}


async def test_engine_block_splits_ttft_and_shows_spec() -> None:
    app = make_app(Scripted(engine(**BREAKDOWN)))
    async with app.run_test(size=(160, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()  # the engine block mounts, then renders on the next tick
        app.tick()
        block = app.query_one(EnginePanel).blocks["dsv41"]
        text = static_text(block.query_one(".engine-lines", TextBlock))
        assert "TTFT p50 8.43 s p95 9.90 s" in text
        assert "means: queue 420 ms + prefill 8.61 s" in text
        assert "spec 54% ×3.69" in text


async def test_engine_block_without_the_breakdown_shows_neither() -> None:
    app = make_app(Scripted(engine()))
    async with app.run_test(size=(160, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()  # the engine block mounts, then renders on the next tick
        app.tick()
        block = app.query_one(EnginePanel).blocks["dsv41"]
        text = static_text(block.query_one(".engine-lines", TextBlock))
        assert "queue" not in text and "spec " not in text


async def test_engine_detail_screen_from_the_palette() -> None:
    reason = "vllm:request_time_per_output_token_seconds not exported by this server"
    app = make_app(Scripted(engine(**{**BREAKDOWN, "tpot_mean_s": NA(reason)})))
    async with app.run_test(size=(140, 50)) as pilot:
        await app.poll_now()
        await pilot.press("ctrl+p", *"details dsv41")
        await app.workers.wait_for_complete()  # the palette's search
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        lines = static_text(app.screen.query_one("#breakdown", Static))
        assert "requests finished in the last 30 s" in lines
        about = "per request it is about queue (mean 420 ms, p50 < 300 ms) + prefill (mean 8.61 s"
        assert f"TTFT p50 8.43 s; {about}" in lines
        assert "by position 80% 64% 51% 41% 33%" in lines
        assert f"per-request TPOT n/a ({reason})" in lines
        table = app.screen.query_one("#fields", DataTable)
        assert str(table.get_cell("tpot_mean_s", "value")) == f"n/a ({reason})"
        assert str(table.get_cell("running", "value")) == "8"
        # No raw Python values (None, False): n/a with the reason, yes/no, durations.
        values = {str(table.get_cell_at((row, 1))) for row in range(table.row_count)}
        assert not values & {"None", "False", "True", ""}, values
        assert str(table.get_cell("restarted", "value")) == "no"
        assert str(table.get_cell("since_s", "value")).startswith("n/a (answering")
        assert str(table.get_cell("window_s", "value")) == "30.00 s"
        await pilot.press("escape")
        assert not isinstance(app.screen, EngineDetailScreen)


async def test_engine_detail_fields_are_labelled_for_people_with_their_units() -> None:
    live = engine(kv_usage=0.00159, prefix_hit_rate=0.8974, itl_mean_s=0.0317,
                  queue_time_mean_s=5.222, since_start=())  # fmt: skip
    app = make_app(Scripted(live))
    async with app.run_test(size=(140, 50)) as pilot:
        await app.poll_now()
        app.show_engine_details("dsv41")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        table = app.screen.query_one("#fields", DataTable)

        def row(key: str) -> tuple[str, str, str]:
            label, value, field = (str(c) for c in table.get_row(key))
            return label, value, field

        assert row("kv_usage") == ("KV cache usage", "0.16 %", "kv_usage")
        assert row("prefix_hit_rate") == ("prefix-cache hit rate", "89.7 %", "prefix_hit_rate")
        assert row("itl_mean_s") == ("ITL mean", "31.7 ms", "itl_mean_s")
        assert row("queue_time_mean_s") == ("queue time mean", "5.22 s", "queue_time_mean_s")
        label, value, _ = row("since_start")
        assert label == "since start" and value.startswith("n/a (") and value != "none"
        assert row("prefill_tps")[1] == "3,534 tok/s"
        # Every row has a label that is not its raw key with underscores, but the limits
        # (max_num_seqs …), which are their standard names.
        for key in table.rows:
            label, _, field = row(str(key.value))
            assert "_" not in label or label == field, (label, field)


async def test_budget_pane_says_what_sending_now_costs() -> None:
    live = engine(waiting=1.0, requests_finished_per_s=0.5, **BREAKDOWN)  # 8 of 8 running
    app = make_app(Scripted(live))
    async with app.run_test(size=(120, 60)) as pilot:
        await app.poll_now()
        await open_budget(pilot)
        await pilot.press("escape")
        out = static_text(app.query_one(BudgetPane).query_one("#budget-out", TextBlock))
        assert "now     TTFT" in out and "at 8 running" in out
        assert " queue  ≈ 4.00 s  scheduler full [server]" in out  # 2 must finish at 0.5/s
        assert "idle    TTFT" in out
        assert "lesson  vs shortest 1,002 tok:" in out and "decode gains +" in out


async def test_engine_detail_title_gives_the_engine_rows_verdict_not_ok_beside_an_alert() -> None:
    """A fresh-eyes trial saw ``engine dsv41  ok`` in the detail screen while the main view
    said ``dsv41  CRIT expected.decode +3``: the screen judged the page alone."""
    from sparktop.alerts.engine import AlertEngine
    from sparktop.alerts.thresholds import Thresholds

    full = engine(kv_usage=0.995, waiting=12.0)  # a full KV cache with requests waiting
    app = make_app(Scripted(full), alerts=AlertEngine(Thresholds(hold_s=0)))
    async with app.run_test(size=(160, 50)) as pilot:
        await app.poll_now()
        await pilot.pause()
        app.tick()
        active = [a for a in app.alert_engine.active() if a.engine == "dsv41"]  # type: ignore[union-attr]
        assert active, "the full KV cache raises an alert on the engine"
        app.show_engine_details("dsv41")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        title = static_text(app.screen.query_one("#title", Static))
        assert "  ok" not in title, title
        assert any(a.rule in title for a in active), (title, [a.rule for a in active])


def test_detail_breakdown_marks_figures_over_the_servers_lifetime() -> None:
    """Nothing finished in the 5 s window, so the figures are the server's lifetime ones (the
    main pane marks them ``70 ms*``): the detail screen said "requests finished in the last
    5 s" above them, beside "finished 0.00/s"."""
    from sparktop.ui.screens.engine_detail import breakdown_lines

    lifetime = ("ttft_p50", "itl_p50", "queue_time_mean_s", "queue_time_p50",
                "prefill_time_mean_s", "prefill_time_p50")  # fmt: skip
    first, ttft, _decode, tpot, *_ = breakdown_lines(
        engine(**{**BREAKDOWN, "window_s": 5.0, "since_start": lifetime})
    )
    assert first == (
        "requests finished in the last 5 s; * since server start (none finished in the window)"
    )
    assert ttft.startswith("TTFT p50 8.43 s*; per request it is about queue (mean 420 ms, p50")
    assert "p50 < 300 ms*) + prefill (mean 8.61 s, p50 8.20 s*)" in ttft
    assert tpot == "per-request TPOT mean 23 ms, p50 n/a (ITL p50 21 ms*)"  # TPOT windowed
    (first, *_) = breakdown_lines(engine(**{**BREAKDOWN, "window_s": None}))
    assert first == "requests finished since server start (no earlier scrape to diff against yet)"
    (first, *_) = breakdown_lines(engine(**BREAKDOWN))
    assert first == "requests finished in the last 30 s"


def test_the_ttft_split_says_it_is_of_finished_requests_and_marks_lifetime_means() -> None:
    """The pool-exhaustion demo showed ``means: queue 0 ms`` beside 8 requests waiting for
    22 s: the means are of the requests that finished, so the label says so, and a mean over
    the server's lifetime carries ``*`` as every other such figure (the snapshot line too)."""
    from sparktop.report.engines import split_line
    from sparktop.ui.engine_views import ttft_split

    live = engine(**{**BREAKDOWN, "waiting": 8.0, "since_start": ("queue_time_mean_s",)})
    text = "".join(t for t, _ in ttft_split(live))
    assert text == "means: queue 420 ms* + prefill 8.61 s"
    assert split_line(live) == (
        "dsv41: means of finished: queue 420 ms* + prefill 8.61 s · spec 54% ×3.69"
    )
