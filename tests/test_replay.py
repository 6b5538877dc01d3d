"""Replay: the timeline (step, seek, next alert), the summary, and the monitor fed from a file."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from sparktop.alerts import Event, EventKind
from sparktop.cli import main
from sparktop.cluster import ClusterState
from sparktop.commands.replay import parse_offset, print_summary
from sparktop.errors import UserError
from sparktop.record import Recording
from sparktop.record.replay import ReplaySource, apply_step, clock_text
from tests.test_record import record, ticks

START = 1_767_000_000.0


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "thermal.jsonl.zst"
    record(path, ticks(60, START), interval_s=1.0)
    return path


def test_stepping_through_rebuilds_the_live_state(recording: Path) -> None:
    source, state = ReplaySource(Recording(recording)), ClusterState()
    steps = 0
    while (step := source.step()) is not None:
        state = apply_step(state, step)
        steps += 1
    assert steps == 60 and source.at_end and source.duration_s == 59.0
    assert state.nodes["spark-2"].time_s == START + 59
    assert len(state.history.get("spark-1/GPU-test-0", "sm_clock_mhz")) == 60
    assert source.step() is None and source.delay_s(1.0) is None


def test_seek_back_and_forth_and_history_comes_back(recording: Path) -> None:
    source = ReplaySource(Recording(recording), rebuild_ticks=20)
    state = ClusterState()
    state = apply_step(state, source.seek(40))
    assert source.position_s == 40.0
    step = source.seek_by(-10)
    assert step.reset and source.position_s == 30.0
    state = apply_step(state, step)
    assert state.nodes["spark-1"].time_s == START + 30
    assert len(state.history.get("spark-1/GPU-test-0", "sm_clock_mhz")) == 20
    forward = source.seek_by(10)
    assert not forward.reset and len(forward.ticks) == 10
    assert source.seek(-5).last is not None and source.index == 0
    assert source.seek(10_000).last is not None and source.at_end


def test_next_alert_and_the_alerts_at_each_offset(recording: Path) -> None:
    source = ReplaySource(Recording(recording))
    step = source.next_alert()
    assert step is not None and step.last is not None
    # the throttle starts at 20 s and holds 5 s before firing
    assert source.position_s == 25.0
    assert [(a.rule, a.subject) for a in step.last.alerts] == [("gpu.throttle", "spark-2/gpu0")]
    assert [e.kind for e in source.events_until()] == [EventKind.FIRED]
    assert source.next_alert() is None  # nothing fires after that
    source.seek(52)
    kinds = [(e.kind, round(e.time_s - START)) for e in source.events_until()]
    assert kinds == [(EventKind.FIRED, 25), (EventKind.CLEARED, 50)]
    current = source.current()
    assert current is not None and current.alerts == ()


def test_label_and_pace(recording: Path) -> None:
    source = ReplaySource(Recording(recording))
    source.seek(42)
    assert source.label(10, paused=False) == "▶ 10× 00:42 / 00:59"
    assert source.label(1, paused=True).startswith("⏸ 1× 00:42")
    assert source.delay_s(10) == pytest.approx(0.1)
    assert clock_text(3723) == "1:02:03"


def test_truncated_recording_replays_to_the_cut_and_says_where(
    recording: Path, tmp_path: Path
) -> None:
    whole = tmp_path / "whole.jsonl"
    record(whole, ticks(60, START), flush_s=0.0)
    data = whole.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) // 2])
    source = ReplaySource(Recording(cut))
    while source.step() is not None:
        pass
    assert 0 < len(source) < 60 and source.at_end
    label = source.label(1, paused=True)
    assert "end of recording (stopped at line" in label and "incomplete" in label


def test_summary_lists_alerts_with_offsets_and_the_damage(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl.gz"
    record(whole, ticks(60, START), flush_s=0.0)
    out = io.StringIO()
    print_summary(ReplaySource(Recording(whole)), out)
    text = out.getvalue()
    assert "60 ticks" in text and "2 alert events" in text
    assert (
        "+00:25  fired     warning  gpu.throttle           spark-2/gpu0  throttling at 1,833 MHz"
        in text
    )
    assert "+00:50  cleared" in text and "damage" not in text
    one = tmp_path / "one.jsonl"
    record(one, ticks(1, START), flush_s=0.0)
    out = io.StringIO()
    print_summary(ReplaySource(Recording(one)), out)
    assert "1 tick from" in out.getvalue() and "0 alert events" in out.getvalue()
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 3 // 5])
    out = io.StringIO()
    print_summary(ReplaySource(Recording(cut)), out)
    assert "replays up to the damage: stopped at line" in out.getvalue()


def test_replay_command_summary_and_errors(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(recording), "--summary"]) == 0
    assert "spark-2/gpu0" in capsys.readouterr().out
    assert main(["replay", str(tmp_path / "missing.zst")]) == 2
    assert "no such recording" in capsys.readouterr().err
    assert main(["replay", str(recording), "--speed", "0"]) == 2
    (tmp_path / "junk.jsonl").write_text("hello\n")
    assert main(["replay", str(tmp_path / "junk.jsonl"), "--summary"]) == 2
    assert "not a sparktop recording" in capsys.readouterr().err


def test_parse_offset() -> None:
    assert parse_offset("90") == 90 and parse_offset("1:30") == 90
    assert parse_offset("0:01:30") == 90
    for bad in ("", "a", "1:2:3:4", "-5"):
        with pytest.raises(UserError):
            parse_offset(bad)


async def test_replay_in_the_monitor_shows_the_recorded_alerts(recording: Path) -> None:
    from sparktop.ui.replay import ReplayApp
    from sparktop.ui.widgets.event_log import EventLog
    from sparktop.ui.widgets.header import AlertBar

    app = ReplayApp(ReplaySource(Recording(recording)), speed=1.0)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("space")  # pause: the keys below move the position
        assert not app.playing
        await pilot.press("n")
        await pilot.pause()
        assert app.replay.position_s == 25.0
        bar = app.query_one(AlertBar)
        assert [(a.rule, a.subject) for a in bar.alerts] == [  # type: ignore[attr-defined]
            ("gpu.throttle", "spark-2/gpu0")
        ]
        pane = app.query_one(EventLog).events
        assert [e.subject for e in pane if isinstance(e, Event)] == ["spark-2/gpu0"]
        timeline = str(app.query_one("#timeline").render())
        assert "00:25 / 00:59" in timeline and "⏸" in timeline
        await pilot.press("right", "right", "right")  # +30 s: cleared at 50 s
        await pilot.pause()
        assert app.replay.position_s == 55.0 and bar.alerts == ()
        await pilot.press("shift+left")
        await pilot.pause()
        assert app.replay.position_s == 0.0
        assert app.state.nodes["spark-2"].time_s == START


def _escape_coded_state(path: Path, line_no: int) -> None:
    """Tick line ``line_no`` (1-based, the header is line 1) with an escape-coded state."""
    lines = path.read_text().splitlines(keepends=True)
    lines[line_no - 1] = lines[line_no - 1].replace(
        '"node":"spark-1",', '"node":"spark-1","state":"\\u001b[31mok",', 1
    )
    path.write_text("".join(lines))


def test_summary_decodes_every_tick_and_stops_where_the_monitor_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "esc.jsonl"
    record(path, ticks(6, START), flush_s=0.0)
    _escape_coded_state(path, 4)
    assert main(["replay", str(path), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "2 ticks from" in out
    assert (
        "replays up to the damage: stopped at line 4: tick does not decode: NodeSample.state" in out
    )
    assert "\x1b" not in out
    # The monitor's own source stops at the same line.
    source = ReplaySource(Recording(path))
    while source.step() is not None:
        pass
    assert len(source) == 2 and str(source.stop) in out


def test_a_recording_whose_first_tick_does_not_decode_is_refused_with_or_without_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "esc.jsonl"
    record(path, ticks(3, START), flush_s=0.0)
    _escape_coded_state(path, 2)
    for summary in (["--summary"], []):
        assert main(["replay", str(path), *summary]) == 2
        err = capsys.readouterr().err
        assert "holds no ticks (stopped at line 2: tick does not decode" in err


async def test_a_replay_without_engines_says_the_recording_has_none(tmp_path: Path) -> None:
    from dataclasses import replace

    from sparktop.ui.replay import ReplayApp
    from sparktop.ui.widgets.engine_panel import EnginePanel

    path = tmp_path / "nodes-only.jsonl"
    record(path, [replace(t, engines=()) for t in ticks(5, START)], flush_s=0.0)
    app = ReplayApp(ReplaySource(Recording(path)), speed=1.0)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("space")
        await pilot.pause()
        assert app.state.nodes  # the nodes replayed
        text = str(app.query_one(EnginePanel).query_one(".empty").render())
        assert text == "the recording has no engine samples up to here"
        assert "tried" not in text and "--endpoint" not in text


def test_summary_names_the_cluster_as_the_live_header_did(tmp_path: Path) -> None:
    from sparktop.inventory import parse_inventory
    from sparktop.plan import THIS_MACHINE

    # --endpoint (no inventory): the live header said "this machine".
    bare = tmp_path / "endpoint.jsonl"
    record(bare, ticks(2, START), flush_s=0.0)
    out = io.StringIO()
    print_summary(ReplaySource(Recording(bare)), out)
    assert f"cluster {THIS_MACHINE}  profile" in out.getvalue()
    inventory = parse_inventory("cluster: lab\nnodes: [{name: spark-1, host: 127.0.0.1}]\n", "i")
    named = tmp_path / "lab.jsonl"
    record(named, ticks(2, START), flush_s=0.0, inventory=inventory)
    out = io.StringIO()
    print_summary(ReplaySource(Recording(named)), out)
    assert "cluster lab  profile" in out.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        ("x.jsonl.zst", b"hello world", "zstd"),  # plain text, its one line unfinished
        ("x.jsonl.zst", b"\xfd7zXZ\x00\x00", "zstd"),  # xz's magic
        ("x.jsonl.gz", b'{"a": 1}\n', "gzip"),
    ],
)
def test_a_file_named_compressed_that_is_not_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes, kind: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    assert main(["replay", str(path), "--summary"]) == 2
    err = capsys.readouterr().err
    assert f"is not a {kind} file" in err and "truncated" not in err


def test_a_plain_recording_named_zst_still_replays(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl.zst"
    record(tmp_path / "plain.jsonl", ticks(3, START), flush_s=0.0)
    path.write_bytes((tmp_path / "plain.jsonl").read_bytes())
    assert len(Recording(path)) == 3
