"""The monitor's outputs under hostile conditions: symbolic links, existing recordings, a full
disk (``/dev/full``, or a file that fills up), and an ``--on-alert`` hook that floods stderr,
fails or hangs. Nothing is lost in silence and nothing ends in a traceback."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shlex
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from sparktop.alerts import AlertEngine, EventKind, Thresholds
from sparktop.alerts.delivery import STDERR_TAIL_BYTES, AlertDelivery, parse_command
from sparktop.alerts.outputs import ALERT_LOG_RULE, HOOK_RULE, RECORD_RULE
from sparktop.alerts.pipeline import AlertOutputs, AlertPipeline, add_output_arguments
from sparktop.cli import main
from sparktop.cluster import ClusterState
from sparktop.errors import UserError
from sparktop.record import read_ticks
from sparktop.record.tick import make_header
from sparktop.record.writer import Recorder
from tests.alert_samples import node
from tests.test_alert_delivery import event

DEV_FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not DEV_FULL.exists(), reason="no /dev/full here")


class FillingFile:
    """A file on a disk with ``room`` bytes left: writes past it fail with ENOSPC."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes) -> int:
        if len(self.data) + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.data += data
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True


def _inventory(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text("cluster: c\nnodes:\n  - {name: spark-1, host: 127.0.0.1, port: 1}\n")
    return path


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_output_arguments(parser)
    return parser.parse_args(list(argv))


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- 19.10: symbolic links and existing recordings -------------------------------------------


@pytest.mark.parametrize("option", ["--record", "--alert-log"])
@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling-link"])
def test_outputs_never_write_through_a_symbolic_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, dangling: bool
) -> None:
    target = tmp_path / "bashrc"
    if not dangling:
        target.write_text("precious\n")
    link = tmp_path / "out.jsonl"
    link.symlink_to(target)
    inventory = str(_inventory(tmp_path))
    status = main(["--inventory", inventory, option, str(link), "--force", "--force-tui"])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2
    assert f"{option}: {link} is a symbolic link; not writing through it" in line
    if dangling:
        assert not target.exists()  # nothing created at the link's target either
    else:
        assert target.read_text() == "precious\n"


def test_an_existing_recording_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "run.jsonl"
    old.write_text("yesterday's incident\n")
    status = main(["--inventory", str(_inventory(tmp_path)), "--record", str(old), "--force-tui"])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and "--force" in line and f"{old} exists" in line
    assert old.read_text() == "yesterday's incident\n"

    outputs = AlertOutputs.from_args(_args("--record", str(old), "--force"))
    pipeline = outputs.wrap(AlertEngine(Thresholds(hold_s=0)), make_header())
    pipeline.update(ClusterState(), 1.0)
    outputs.close()
    recording, ticks = read_ticks(old)
    assert recording.header["format"] == "sparktop-recording" and len(ticks) == 1


# -- 19.11: a full disk ---------------------------------------------------------------------------


@needs_dev_full
def test_record_on_a_full_disk_at_start_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--record", "/dev/full", "--force", "--force-tui"]
    status = main(["--inventory", str(_inventory(tmp_path)), *args])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2
    assert line == "sparktop: error: --record: cannot write /dev/full: No space left on device"


def _hot_updates(pipeline: AlertPipeline, count: int, start: float = 0.0) -> list[Any]:
    state, events = ClusterState(), []
    for i in range(count):
        t = start + i
        hot = {"sm_clock_mhz": 1833.0, "clock_event_mask": 0x20} if i % 4 < 2 else {}
        state.apply(node("spark-1", t, **hot))
        events += pipeline.update(state, t)
    return events


def test_a_recording_that_fills_the_disk_is_an_alert_at_once_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    disk = FillingFile(room=4000)
    path = tmp_path / "run.jsonl"
    recorder = Recorder(path, make_header(), flush_s=0.0, raw=disk)  # type: ignore[arg-type]
    outputs = AlertOutputs(AlertDelivery(), path)
    pipeline = AlertPipeline(AlertEngine(Thresholds(hold_s=0)), outputs.delivery, recorder)
    outputs.pipeline = pipeline
    events = []
    for t in range(200):
        events += _hot_updates(pipeline, 1, float(t))
        recorder.sync(5.0)  # each tick written (or failed) before the next: no race in the test
        if recorder.error is not None:
            break
    assert recorder.error == "No space left on device"
    events += _hot_updates(pipeline, 3, 1000.0)  # the next updates show it and count the loss
    assert pipeline.recording_failed
    stopped = [e for e in events if e.alert.rule == RECORD_RULE]
    assert [e.kind for e in stopped] == [EventKind.FIRED]  # once, not every tick
    active = [a for a in pipeline.active() if a.rule == RECORD_RULE]
    assert len(active) == 1 and active[0].severity.value == "critical"
    assert "No space left on device" in active[0].message
    assert f"{recorder.written:,} ticks written" in active[0].message
    assert recorder.lost >= 3 and f"{recorder.lost:,} not recorded" in active[0].message
    outputs.close()  # quitting stays clean
    line = _one_error_line(capsys.readouterr().err)
    assert "stopped: No space left on device" in line and "ticks not recorded" in line
    assert disk.closed


@needs_dev_full
async def test_an_alert_log_on_a_full_disk_is_an_alert_counted_and_quits_cleanly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    outputs = AlertOutputs.from_args(_args("--alert-log", str(DEV_FULL)))
    pipeline = outputs.wrap(AlertEngine(Thresholds(hold_s=0)), make_header())
    events = _hot_updates(pipeline, 12)
    delivery = outputs.delivery
    assert delivery.log_error == "No space left on device" and delivery.log_lost >= 2
    failing = [e for e in events if e.alert.rule == ALERT_LOG_RULE]
    assert [e.kind for e in failing] == [EventKind.FIRED]
    active = [a for a in pipeline.active() if a.rule == ALERT_LOG_RULE]
    assert active and f"{delivery.log_lost:,} events not written" in active[0].message
    outputs.close()
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("alert log /dev/full: ") and "No space left on device" in line


async def test_an_alert_log_that_recovers_clears_its_alert(tmp_path: Path) -> None:
    path = tmp_path / "alerts.jsonl"
    delivery = AlertDelivery(alert_log=path)
    pipeline = AlertPipeline(AlertEngine(Thresholds(hold_s=0)), delivery)
    real = delivery._log
    assert real is not None

    class Full:
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def flush(self) -> None: ...
        def fileno(self) -> int:
            return real.fileno()

        def close(self) -> None: ...

    delivery._log = Full()  # type: ignore[assignment]
    delivery.deliver([event()])
    assert delivery.log_lost == 1 and delivery._log is not None  # reopened
    events = pipeline.update(ClusterState(), 1.0)
    assert [e.kind for e in events if e.alert.rule == ALERT_LOG_RULE] == [EventKind.FIRED]
    delivery.deliver([event(EventKind.CLEARED)])  # the disk has room again
    events = pipeline.update(ClusterState(), 2.0)
    assert [e.kind for e in events if e.alert.rule == ALERT_LOG_RULE] == [EventKind.CLEARED]
    await delivery.aclose()
    assert [json.loads(line)["event"] for line in path.read_text().splitlines()] == ["cleared"]


# -- 19.12: the hook's output is bounded and its failures are events --------------------------


def _python(code: str) -> tuple[str, ...]:
    return parse_command(f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}")


async def test_a_hook_flooding_stderr_is_not_held_in_memory() -> None:
    flood = 16 * 1024 * 1024
    hook = _python(
        "import sys\n"
        f"sys.stderr.buffer.write(b'x' * {flood})\n"
        "sys.stderr.write('\\nlast words\\n')\n"
        "sys.exit(3)\n"
    )
    seen: list[str] = []
    delivery = AlertDelivery(on_alert=hook, on_failure=seen.append, timeout_s=60)
    tracemalloc.start()
    try:
        delivery.deliver([event()])
        await delivery.drain()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == [f"--on-alert: {hook[0]} exited 3: last words"]
    assert peak < flood // 8, f"peak {peak:,} bytes while the hook wrote {flood:,}"
    assert STDERR_TAIL_BYTES <= 4096


async def test_hook_failures_are_events_and_never_fed_back_to_the_hook() -> None:
    delivery = AlertDelivery(on_alert=_python("import sys; sys.exit('boom')"))
    pipeline = AlertPipeline(AlertEngine(Thresholds(hold_s=0)), delivery)
    _hot_updates(pipeline, 1)
    await delivery.drain()
    started = delivery.command_failures
    events = _hot_updates(pipeline, 1, 10.0)
    await delivery.drain()
    failed = [e for e in events if e.alert.rule == HOOK_RULE]
    assert failed and failed[0].subject == "--on-alert" and failed[0].severity.value == "warning"
    assert failed[0].message.endswith("exited 1: boom")
    assert not [a for a in pipeline.active() if a.rule == HOOK_RULE]  # an event, not an alert
    await delivery.aclose()
    # The failure events were not delivered to the hook (which would fail again, forever).
    assert delivery.command_failures - started <= 1


async def test_a_hook_killed_after_its_timeout_is_an_event() -> None:
    delivery = AlertDelivery(on_alert=_python("import time; time.sleep(60)"), timeout_s=0.3)
    pipeline = AlertPipeline(AlertEngine(Thresholds(hold_s=0)), delivery)
    _hot_updates(pipeline, 1)
    await delivery.drain()
    events = [e for e in pipeline.update(ClusterState(), 5.0) if e.alert.rule == HOOK_RULE]
    await delivery.aclose()  # (the node's alert cleared: that event's hook is killed too)
    assert [e.message for e in events] == [f"{delivery.command[0]} killed after 0.3 s"]


def test_recorder_refuses_an_existing_file_itself(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("keep\n")
    with pytest.raises(UserError, match="exists; not overwriting it"):
        Recorder(path, make_header())
    assert path.read_text() == "keep\n"


@pytest.mark.parametrize(
    "argv",
    [["--alert-log"], ["--record", "--force"], ["--record"]],
    ids=["alert-log", "record-forced", "record"],
)
@pytest.mark.parametrize("reader", [False, True], ids=["no-reader", "reader"])
def test_an_output_at_a_fifo_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], reader: bool
) -> None:
    """A FIFO nobody reads made ``--alert-log`` block in open() until killed; one with a
    reader would stall every write once it stops reading. Both: one line, exit 2."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK) if reader else None
    try:
        option, *rest = argv
        command = ["--inventory", str(_inventory(tmp_path)), option, str(fifo), *rest]
        status = main([*command, "--force-tui"])
    finally:
        if held is not None:
            os.close(held)
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2
    if option == "--record" and not rest:
        assert f"{fifo} exists" in line  # a recording is never opened over a path that exists
    else:
        assert f"{option}: {fifo} is a FIFO" in line and "not a regular file" in line


PROC_STATUS = Path("/proc/self/status")


@pytest.mark.skipif(not PROC_STATUS.exists(), reason="no /proc here")
@pytest.mark.parametrize("option", ["--alert-log", "--record"])
def test_an_output_that_cannot_be_appended_to_is_a_clean_error(
    capsys: pytest.CaptureFixture[str], option: str
) -> None:
    """``/proc/self/status`` opens for writing, but append mode's seek fails (EINVAL): it was
    a traceback from ``os.fdopen``, exit 1."""
    status = main(["demo", "--no-tui", option, str(PROC_STATUS), "--force"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert status == 2 and f"sparktop: error: {option}: cannot " in err
    assert f"{PROC_STATUS}: Invalid argument" in err
