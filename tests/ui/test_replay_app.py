"""The replay monitor: the recorded cluster's name and TP groups, playback keys, its footer."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktop.inventory import parse_inventory
from sparktop.record import Recording
from sparktop.record.replay import ReplaySource
from sparktop.ui.replay import ReplayApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.header import HeaderBar
from sparktop.ui.widgets.node_table import NodeTable
from sparktop.ui.widgets.text_block import TextBlock
from tests.test_record import record, ticks
from tests.ui.fakes import open_budget

INVENTORY = """\
cluster: dspark-2x
nodes:
  - {name: spark-1, host: 10.0.0.1}
  - {name: spark-2, host: 10.0.0.2}
engines:
  - name: dsv41
    url: http://10.0.0.1:8015
    nodes: [spark-1, spark-2]
    max_num_seqs: 32
    max_num_batched_tokens: 8192
"""


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    inventory = parse_inventory(INVENTORY, "cluster.yaml")
    record(path, ticks(30), inventory=inventory, interval_s=1.0)
    return path


def texts(app: ReplayApp) -> tuple[str, str, str]:
    table = app.query_one(NodeTable)
    tp = [table.cell_text(k, "tp") for k in table.row_keys]
    block = app.query_one(EnginePanel).blocks["dsv41"]
    lines = str(block.query_one(".engine-lines", TextBlock).render())
    return str(app.query_one(HeaderBar).render()), " ".join(tp), lines


async def test_replay_shows_the_recorded_cluster_and_its_tp_groups(recording: Path) -> None:
    # Limits named *_tokens are kept in the recorded inventory (they are not secrets).
    assert b'"max_num_batched_tokens":8192' in recording.read_bytes().split(b"\n")[0]
    app = ReplayApp(ReplaySource(Recording(recording)), speed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space")
        await pilot.pause()
        app.tick()
        await pilot.pause()
        app.tick()
        header, tp, engine = texts(app)
        assert "dspark-2x" in header and "replay" not in header
        assert tp == "dsv41·0 dsv41·1"
        assert "TP spark-1  spark-2" in engine


async def test_replay_keys_home_and_g_restart_and_no_interval_in_the_footer(
    recording: Path,
) -> None:
    app = ReplayApp(ReplaySource(Recording(recording)), speed=1.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("space", "right")  # pause, then 10 s on
        await pilot.pause()
        assert app.replay.position_s == 10.0
        await pilot.press("home")  # the Nodes table has the focus and binds home itself
        await pilot.pause()
        assert app.replay.position_s == 0.0
        await pilot.press("right", "g")
        await pilot.pause()
        assert app.replay.position_s == 0.0
        shown = {k: a.binding.description for k, a in app.screen.active_bindings.items()}
        assert "plus" not in shown and "minus" not in shown  # no poll interval in a replay
        interval = app.poller.interval_s
        await pilot.press("plus")
        assert app.poller.interval_s == interval

        await open_budget(pilot)
        await pilot.press(*"my prompt", "left", "home")  # typing in the budget field
        await pilot.pause()
        assert app.replay.position_s == 0.0 and not app.playing
        assert app.query_one("#prompt").value == "my prompt"  # type: ignore[attr-defined]
