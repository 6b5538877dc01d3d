"""The curve screen (``c``), Enter on an engine block, and the curve under NO_COLOR."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from textual.widgets import Input

from sparktop.ui.screens.curve import CurveScreen
from sparktop.ui.screens.engine_detail import EngineDetailScreen
from sparktop.ui.widgets.curve import CurvePlot
from sparktop.ui.widgets.engine_panel import EngineBlock
from tests.ui.fakes import open_budget
from tests.ui.test_snapshots import cluster_app


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def test_c_draws_the_profile_with_the_live_window_on_it() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CurveScreen) and screen.engine == "dsv41"
        plot = screen.query_one(CurvePlot)
        assert plot.curve is not None and plot.curve.metric == "ttft_s"
        assert [ln.concurrency for ln in plot.curve.lines] == list(app.plan.profile.concurrencies)  # type: ignore[union-attr]
        live = plot.live
        assert live is not None and live.live == pytest.approx(9.1)  # the sample's TTFT p50
        assert live.prompt_tokens == pytest.approx(3800.0)
        drawn = plot.render().plain  # type: ignore[union-attr]
        assert "◆" in drawn and "1k" in drawn and "prompt tokens" in drawn
        for c in app.plan.profile.concurrencies:  # type: ignore[union-attr]
            assert str(c) in drawn
        caption = str(screen.query_one("#curve-caption").render())
        assert "live p50 9.10 s" in caption
        builds = plot.builds
        app.tick()  # the same sample: nothing drawn again
        await pilot.pause()
        assert plot.builds == builds
        await pilot.press("m")
        await pilot.pause()
        assert plot.curve.metric == "aggregate_tps"
        assert "not compared" in str(screen.query_one("#curve-caption").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, CurveScreen)


async def test_enter_on_the_engine_block_opens_its_details_and_c_its_curve() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        block = app.query_one(EngineBlock)
        while app.focused is not block:  # Tab from the Nodes table reaches the block
            await pilot.press("tab")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen) and app.screen.engine == "dsv41"
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CurveScreen) and app.screen.engine == "dsv41"
        await pilot.press("escape", "escape")
        assert app.focused is block


async def test_no_color_draws_the_curve_without_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app, feed = cluster_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        await pilot.press("c")
        await pilot.pause()
        text = app.screen.query_one(CurvePlot).render()
        assert "◆" in text.plain  # type: ignore[union-attr]
        # the lines are told apart by their digits, not colours: no colour in any span
        assert all(
            span.style == "" or getattr(span.style, "color", None) is None
            for span in text.spans  # type: ignore[union-attr]
        )


async def test_the_budget_pane_marks_the_typed_context_on_the_curve() -> None:
    from sparktop.sweep.estimator.estimator import estimate
    from sparktop.ui.widgets.budget_curve import BudgetCurve

    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        await open_budget(pilot)
        field = app.query_one("#prompt", Input)
        field.value = "65536"
        await pilot.press("enter", "escape", "plus", "plus", "plus")  # concurrency 1 → 4
        await app.workers.wait_for_complete()
        await pilot.pause()
        box = app.query_one(BudgetCurve)
        typed = box.typed
        assert typed is not None
        assert (typed.prompt_tokens, typed.concurrency) == (65536.0, 4.0)
        want = estimate(app.plan.profile, 65536, 4).ttft_s  # type: ignore[arg-type]
        assert typed.expected.value == pytest.approx(want.value, rel=0.02)
        plot = box.query_one(CurvePlot)
        assert plot.typed == typed and plot.curve is not None
        assert plot.curve.prompt_range[0] <= 65536 <= plot.curve.prompt_range[1]
        assert "▲" in plot.render().plain  # type: ignore[union-attr]
        assert "▲ 65,536 tok × 4: TTFT" in str(box.query_one(".typed").render())


async def test_the_budget_curve_is_drawn_once_the_pane_opens() -> None:
    from sparktop.ui.widgets.budget_curve import BudgetCurve

    app, feed = cluster_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        # closed: the pane is not built, nor the profile fitted, for a pane nobody sees
        assert not app.query(BudgetCurve)
        await open_budget(pilot)
        await pilot.pause()
        box = app.query_one(BudgetCurve)
        assert box.typed is not None and box.typed.prompt_tokens == 8192.0
        assert box.query_one(CurvePlot).curve is not None


def test_a_live_figure_known_to_its_bucket_is_drawn_over_the_bucket() -> None:
    from textual_plotext import Plot

    from sparktop.sweep.estimator.estimator import estimate
    from sparktop.sweep.expected.curve import OperatingPoint, profile_curve
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
    from sparktop.ui.curve_plot import curve_caption, draw_curve

    profile = load_profile(DEFAULT_PROFILE)
    curve = profile_curve(profile, include=(7000.0,))
    fig = estimate(profile, 7000, 5).ttft_s
    live = OperatingPoint("ttft_s", 7000.0, 5.4, fig, live=7.5, live_label="p50",
                          live_low=5.0, live_high=7.5, live_text="5–7.5 s")  # fmt: skip
    plot = Plot()
    draw_curve(plot, curve, live=live, colours=None, size=(100, 30))
    drawn = plot.build()
    assert "┃" in drawn and "◆" in drawn and "○" in drawn
    caption = curve_caption(curve, live)[1]
    assert "◆ live p50 5–7.5 s (┃ its histogram bucket)" in caption


async def test_the_palette_opens_an_engines_curve() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        await pilot.press("ctrl+p", *"curve dsv41")
        await app.workers.wait_for_complete()  # the palette's search
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, CurveScreen) and app.screen.engine == "dsv41"
        assert app.screen.query_one(CurvePlot).curve is not None
