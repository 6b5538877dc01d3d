"""The first-screen benchmark's clock: it stops when the screen shows the data, read through
a real pty as a terminal reads it, and a tool that never shows it is named."""

from __future__ import annotations

import re
import sys

import pytest

from benchmarks import bench_first_screen


def test_the_clock_stops_when_the_data_is_on_the_screen() -> None:
    # The marker is drawn in pieces with colour codes between them, as a TUI draws it.
    script = (
        "import sys, time\n"
        "sys.stdout.write('starting\\n'); sys.stdout.flush(); time.sleep(0.3)\n"
        "sys.stdout.write('\\x1b[1mrunning\\x1b[0m 3/\\x1b[32m32\\x1b[0m\\n'); sys.stdout.flush()\n"
        "sys.stdin.read(1)\n"
    )
    seconds, rss_mb = bench_first_screen.first_data_s(
        [sys.executable, "-c", script], bench_first_screen.SPARKTOP_DATA, b"q", settle_s=0.5
    )
    assert seconds >= 0.3
    assert 1 < rss_mb < 500  # a Python interpreter's, read while it ran


def test_a_tool_that_exits_without_data_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_first_screen, "TIMEOUT_S", 20.0)
    with pytest.raises(RuntimeError, match="no data on screen"):
        bench_first_screen.first_data_s(
            [sys.executable, "-c", "print('nothing here')"], re.compile("never"), b"q"
        )
