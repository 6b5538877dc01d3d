"""SVG snapshots of the monitor at 120×40 and 80×24 (frozen clock, UTC, scripted sources).

Update after an intended change: ``pytest tests/ui/test_snapshots.py --snapshot-update``,
then look at the SVGs in ``tests/ui/__snapshots__/`` before committing them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from sparktop.alerts.model import Alert, Severity
from sparktop.model import Quantile
from sparktop.ui.app import SparktopApp
from sparktop.ui.events import EventRecord
from tests.ui.fakes import T0, Clock, Scripted, down, engine, gpu, node, plan

CLOCKS = (2509, 2514, 2522, 2518, 2511, 2507, 2516, 2520)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


THROTTLING = Alert(
    id="gpu.throttle:spark-3/gpu0#1", rule="gpu.throttle", subject="spark-3/gpu0",
    severity=Severity.CRITICAL, started_s=T0 + 2, fired_s=T0 + 2, node="spark-3", gpu="gpu0",
    message="throttling at 1,833 MHz, 91 °C: SW thermal slowdown",
)  # fmt: skip


def cluster_app(theme: str | None = None) -> tuple[SparktopApp, object]:
    """Four GB10 nodes (spark-3 throttling, spark-4 down) and one engine, frozen clock."""
    clock = Clock()
    names = ("spark-1", "spark-2", "spark-3", "spark-4")
    nodes = [Scripted(node(n)) for n in names]
    eng = Scripted(engine())
    app = SparktopApp(
        plan(cluster="dspark-4x", tp_groups={"dsv41": list(names)}),
        [*nodes, eng],
        clock=clock,
        autostart=False,
        theme=theme,
    )

    async def feed(pilot: Pilot[object]) -> None:
        for step, mhz in enumerate(CLOCKS):
            t = clock.now
            for i, source in enumerate(nodes):
                g = gpu(uuid=f"GPU-{names[i]}", sm_clock_mhz=float(mhz + 7 * i))
                if i == 2 and step >= 5:
                    g = replace(g, sm_clock_mhz=1833.0, temperature_c=91.0, power_w=38.0,
                                clock_event_mask=0x20)  # fmt: skip
                source.next = node(names[i], t, gpus=(g,))
            if step >= 6:
                nodes[3].next = down("spark-4", t, "Connection refused [errno 111]", T0 + 6)
            decode = 330.0 + 4 * step
            eng.next = engine(
                time_s=t,
                decode_tps=decode,
                kv_usage=0.40 + 0.03 * step,
                ttft_p50=Quantile(9.1),
                kv_free_tokens=5_200_000.0 - 1e5 * step,
                queue_time_mean_s=0.42,
                prefill_time_mean_s=8.61,
                spec_acceptance_rate=0.54,
                spec_mean_accept_len=3.69,
                spec_accept_by_position=(0.8, 0.64, 0.51, 0.41, 0.33),
            )
            await app.poll_now()
            clock.advance(1)
        clock.advance(-1)
        app.add_event(EventRecord(T0 + 5, "warning", "dsv41", "decode 27 % below expected"))
        app.set_active_alerts([THROTTLING])
        for field in app.query(Input):
            field.cursor_blink = False
        await pilot.pause()
        app.tick()
        await pilot.pause()

    return app, feed


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_main_screen(snap_compare: object, size: tuple[int, int]) -> None:
    app, feed = cluster_app()
    assert snap_compare(app, terminal_size=size, run_before=feed)  # type: ignore[operator]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_budget_pane(snap_compare: object, size: tuple[int, int]) -> None:
    app, feed = cluster_app()
    assert snap_compare(app, terminal_size=size, run_before=feed, press=["b", "plus"])  # type: ignore[operator]


@pytest.mark.parametrize("theme", ["sparktop-light", "sparktop-high-contrast"])
def test_themes(snap_compare: object, theme: str) -> None:
    app, feed = cluster_app(theme)
    assert snap_compare(app, terminal_size=(120, 40), run_before=feed)  # type: ignore[operator]


def test_node_detail(snap_compare: object) -> None:
    app, feed = cluster_app()
    assert snap_compare(  # type: ignore[operator]
        app, terminal_size=(120, 40), run_before=feed, press=["down", "down", "enter"]
    )


def test_engine_detail(snap_compare: object) -> None:
    app, feed = cluster_app()

    async def open_details(pilot: Pilot[object]) -> None:
        await feed(pilot)  # type: ignore[operator]
        app.show_engine_details("dsv41")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=open_details)  # type: ignore[operator]
