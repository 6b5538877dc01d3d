"""A recording that stops on a full disk is on screen at once: the header's ``REC`` turns into
``✗ REC stopped``, the alert bar and the events pane say why, and quitting is clean."""

from __future__ import annotations

from pathlib import Path

from sparktop.alerts import AlertEngine, Thresholds
from sparktop.alerts.delivery import AlertDelivery
from sparktop.alerts.pipeline import AlertOutputs, AlertPipeline
from sparktop.record.tick import make_header
from sparktop.record.writer import Recorder
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.event_log import EventLog
from sparktop.ui.widgets.header import AlertBar, HeaderBar
from tests.test_outputs_hostile import FillingFile
from tests.ui.fakes import Clock, Scripted, node, plan


async def test_a_full_disk_stops_the_recording_and_says_so_at_once(tmp_path: Path) -> None:
    clock = Clock()
    source = Scripted(node("spark-1"))
    disk = FillingFile(room=3000)
    path = tmp_path / "run.jsonl"
    recorder = Recorder(path, make_header(), flush_s=0.0, raw=disk)  # type: ignore[arg-type]
    outputs = AlertOutputs(AlertDelivery(), path)
    outputs.pipeline = AlertPipeline(AlertEngine(Thresholds()), outputs.delivery, recorder)
    app = SparktopApp(
        plan(cluster="test"), [source], outputs.pipeline, clock=clock, autostart=False
    )
    async with app.run_test(size=(140, 40)) as pilot:
        await app.poll_now()
        assert "● REC" in str(app.query_one(HeaderBar).render())
        while recorder.error is None:  # each tick written (or failed) before the next
            source.next = node("spark-1", clock.now)
            clock.advance(1)
            await app.poll_now()
            assert recorder.sync(5.0) or recorder.error is not None
        await app.poll_now()  # the next tick shows it
        await pilot.pause()
        header = str(app.query_one(HeaderBar).render())
        assert "✗ REC stopped" in header and "● REC" not in header
        bar = app.query_one(AlertBar)
        assert any(a.subject == "recording" for a in bar.alerts)
        # The bar shows what fits of it (cut after a word: the path is as long as tmp_path).
        assert any("No space left on device" in a.message for a in bar.alerts)
        assert str(bar.render()).startswith("▲ recording recording to ")
        events = app.query_one(EventLog).events
        assert any("No space left on device" in e.message for e in events)
        await pilot.press("q")
    outputs.close()


async def test_rec_and_paused_fit_an_80_column_header_with_long_names() -> None:
    """On an 80-column terminal the line is cut at its end: the states come before the long
    cluster and profile names, so ``● REC`` and ``⏸ PAUSED`` are on screen."""
    run = plan(cluster="a-long-cluster-name-x")
    app = SparktopApp(run, [Scripted(node("spark-1"))], clock=Clock(), autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.recording = True
        app.poller.pause()
        app.tick()
        await pilot.pause()
        bar = app.query_one(HeaderBar)
        line = "".join(seg.text for seg in bar.render_line(0))
        assert "● REC" in line[:80] and "⏸ PAUSED" in line[:80], line
