"""``replay`` on a decompression bomb (issue 30, case 4): a recording whose header line is
followed by gigabytes without a newline, a few hundred KB compressed. Before: 120 s, RSS
2.56 GB, killed. Now the line-length cap is checked while reading: one line, exit 2, in
bounded time and memory."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import zstandard

from sparktop.cli import main
from sparktop.record.reader import MAX_LINE_BYTES, Recording
from sparktop.record.tick import make_header
from tests.test_record import record, ticks

BOMB_GIB = 8


def _bomb(path: Path) -> None:
    """The header, then 8 GiB of ``x`` with no newline: one 128 MiB frame (or gzip member)
    repeated 64 times. The file is a few hundred KB."""
    header = (json.dumps(make_header()) + "\n").encode()
    block = b"x" * (128 << 20)
    if path.suffix == ".zst":
        compress = zstandard.ZstdCompressor(level=19).compress
    else:
        compress = lambda data: gzip.compress(data, 9, mtime=0)  # noqa: E731
    frame = compress(block)
    repeats = (BOMB_GIB << 30) // len(block)
    path.write_bytes(compress(header) + frame * repeats)
    assert path.stat().st_size < 64 << 20


@pytest.mark.parametrize("name", ["bomb.jsonl.zst", "bomb.jsonl.gz"])
def test_a_decompression_bomb_is_refused_in_bounded_time_and_memory(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    _bomb(path)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        status = main(["replay", str(path), "--summary"])
        elapsed_s = time.perf_counter() - started
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "the recording holds no ticks" in err
    assert f"line 2 is longer than {MAX_LINE_BYTES >> 20} MiB" in err, err
    assert peak < 4 * MAX_LINE_BYTES, f"peak {peak >> 20} MiB"
    assert elapsed_s < 15, elapsed_s


def test_a_long_line_after_good_ticks_stops_there(tmp_path: Path) -> None:
    """The cap is damage like any other: what came before still replays."""
    path = tmp_path / "long.jsonl"
    record(path, ticks(3), flush_s=0.0)
    with path.open("ab") as fh:
        fh.write(b'{"t": 1, "pad": "' + b"y" * (MAX_LINE_BYTES + 10) + b'"}\n')
    rec = Recording(path)
    assert len(rec) == 3
    assert rec.stop is not None and rec.stop.line == 5
    assert "longer than" in rec.stop.reason


CHILD = """
import sys, time
from pathlib import Path
from sparktop.record.tick import make_header
from sparktop.record.writer import Recorder
from tests.test_record import ticks

items = ticks(2)
recorder = Recorder(Path(sys.argv[1]), make_header(), flush_s=1.0)
recorder.write(items[0])
time.sleep(0.1)
recorder.write(items[1])
print("wrote", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("name", ["killed.jsonl.zst", "killed.jsonl.gz", "killed.jsonl"])
def test_kill_9_loses_nothing_handed_over_0_7_s_before(tmp_path: Path, name: str) -> None:
    """The writer flushed at most once a second, so a tick written just after a flush
    waited up to a second: ``kill -9`` lost 0.5-2.6 s of ticks. Now the queue going idle
    flushes it (at most every 0.2 s): the tick is there 0.7 s later, before the old flush."""
    path = tmp_path / name
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"wrote\n"
        time.sleep(0.7)  # the writer flushes 0.1 s after it; it waited up to 1 s
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    rec = Recording(path)
    assert len(rec) == 2, rec.stop
