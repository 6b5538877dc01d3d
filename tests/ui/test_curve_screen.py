"""The curve screen (``c``), Enter on an engine block, and the curve under NO_COLOR."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sparktop.ui.screens.curve import CurveScreen
from sparktop.ui.screens.engine_detail import EngineDetailScreen
from sparktop.ui.widgets.curve import CurvePlot
from sparktop.ui.widgets.engine_panel import EngineBlock
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
