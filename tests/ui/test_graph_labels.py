"""btop's and k9s's habits: graphs say their scale and time span; GPU processes sort on ``s``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from textual.widgets import Label, Static

from sparktop.history import Series
from sparktop.hostmodel import GpuProcess
from sparktop.model import NA
from sparktop.ui import format as fmt
from sparktop.ui.host_view import PROCESS_SORTS, processes_text, sort_processes
from sparktop.ui.screens.node_detail import NodeDetailScreen
from sparktop.ui.widgets.spark import SparkRow
from tests.ui.fakes import gpu, node
from tests.ui.test_snapshots import cluster_app

PROCS = (
    GpuProcess(300, "vllm", "GPU-a", 900.0, 0.7),
    GpuProcess(100, "python3", "GPU-a", NA("[N/A]"), NA("memory total unknown")),
    GpuProcess(200, "Ray", "GPU-a", 70_000.0, 57.0),
)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_span_and_series_span() -> None:
    series = Series(600)
    assert series.span_s() == 0.0
    for t in range(0, 300, 2):
        series.append(1000.0 + t, float(t))
    assert series.span_s() == 298.0
    assert series.span_s(last=11) == 20.0  # the newest 11 points: 10 steps of 2 s
    assert [fmt.span(s) for s in (7, 99, 130, 3599, 5400, 7200, 36_000)] == [
        "7s", "99s", "2m", "60m", "1h30m", "2h", "10h",
    ]  # fmt: skip


def test_processes_sort_by_each_column_unknown_memory_last() -> None:
    assert [p.pid for p in sort_processes(PROCS, "newest")] == [300, 100, 200]
    assert [p.pid for p in sort_processes(PROCS, "used")] == [200, 300, 100]
    assert [p.pid for p in sort_processes(PROCS, "pid")] == [100, 200, 300]
    assert [p.name for p in sort_processes(PROCS, "name")] == ["python3", "Ray", "vllm"]
    assert processes_text(PROCS, "used").splitlines()[0].split() == ["pid", "▼used", "share",
                                                                      "name"]  # fmt: skip


async def test_engine_sparklines_carry_scale_and_span() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        sparks = app.query_one(SparkRow)
        decode = app.state.history.get("dsv41", "decode_tps")
        top = max(decode.values())
        assert sparks.captions[0] == f"0–{top:,.0f} {fmt.span(decode.span_s(120))}"
        assert sparks.captions[1].startswith("0–100 ")
        line = "".join(seg.text for seg in sparks.render_line(0))
        assert sparks.captions[0] in line and "0–100 7s" in line  # 8 polls, 1 s apart


async def test_s_cycles_the_process_sort_in_node_details() -> None:
    app, feed = cluster_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await feed(pilot)  # type: ignore[operator]
        app.state.apply(node("spark-1", app.clock(), gpus=(gpu(uuid="GPU-spark-1"),),
                             processes=PROCS))  # fmt: skip
        app.show_node_details("spark-1")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, NodeDetailScreen)

        def pids() -> list[str]:
            text = str(screen.query_one("#processes", Static).render())
            return [line.split()[0] for line in text.splitlines()[1:]]

        assert pids() == ["300", "100", "200"]
        seen = []
        for _ in PROCESS_SORTS:
            await pilot.press("s")
            await pilot.pause()
            seen.append((screen.process_sort, pids()))
        assert seen == [
            ("used", ["200", "300", "100"]), ("pid", ["100", "200", "300"]),
            ("name", ["100", "200", "300"]), ("newest", ["300", "100", "200"]),
        ]  # fmt: skip
        heading = str(screen.query_one("#processes-label", Label).render())
        assert "newest first" in heading and "s: sort" in heading
        label = str(screen.query_one("#label-sm_clock_mhz", Label).render())
        assert "axis 0–3003" in label and "7s" in label  # the scale and the time plotted
