"""The monitor, ``demo`` and ``replay`` draw a full screen: with stdout on a pipe or a file
they refuse in one line naming the command that prints (exit 2) instead of filling the pipe
with escape sequences and running until killed; ``--force-tui`` draws anyway."""

from __future__ import annotations

import os
import pty
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparktop.cli import main
from tests.test_record import record, ticks


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text("cluster: t\nnodes:\n  - {name: here, local: true}\n")
    record(tmp_path / "run.jsonl", ticks(10), interval_s=1.0)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "instead"),
    [
        (["--inventory", "{d}/cluster.yaml"], "sparktop snapshot --inventory {d}/cluster.yaml"),
        ([], "sparktop snapshot --inventory FILE"),
        (["demo"], "sparktop demo --no-tui"),
        (["replay", "{d}/run.jsonl"], "sparktop replay {d}/run.jsonl --summary"),
    ],
    ids=["monitor", "this-machine", "demo", "replay"],
)
def test_a_screen_command_refuses_a_stdout_that_is_not_a_terminal(
    files: Path, capsys: pytest.CaptureFixture[str], argv: list[str], instead: str
) -> None:
    # Under pytest stdout is captured: not a terminal, as under `| head`.
    status = main([a.format(d=files) for a in argv])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert captured.err.count("\n") == 1
    assert "stdout is not a terminal" in captured.err
    assert f"use '{instead.format(d=files)}'" in captured.err and "--force-tui" in captured.err
    assert not list(files.glob("sparktop-sim-*"))  # the demo started nothing


def test_the_monitor_piped_into_head_ends_at_once(files: Path) -> None:
    """The issue's command line: returns at once with the one line, nothing in the pipe."""
    script = f"{shlex.quote(sys.executable)} -m sparktop --inventory cluster.yaml | head -c 400"
    result = subprocess.run(
        ["bash", "-c", script + '; echo "status ${PIPESTATUS[0]}"'],
        capture_output=True,
        text=True,
        cwd=files,
        timeout=60,
    )
    assert result.stdout == "status 2\n"
    assert result.stderr.startswith("sparktop: error: stdout is not a terminal")
    assert "\x1b" not in result.stderr


def test_force_tui_draws_with_stdout_on_a_pipe(files: Path) -> None:
    """Asked explicitly, the monitor opens: Textual draws on stderr (a terminal here), the
    pipe stays empty, and q quits with 0."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktop", "--inventory", "cluster.yaml", "--force-tui"],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        cwd=files,
        env={**os.environ, "TERM": "xterm-256color"},
    )
    os.close(slave)
    screen = b""

    def drain_until(done: bytes | None) -> None:
        """Read the screen (a full pty would block the app) until ``done`` shows, or until
        the process ends (``None``)."""
        nonlocal screen
        deadline = time.monotonic() + 60
        while (done not in screen) if done is not None else proc.poll() is None:
            assert time.monotonic() < deadline, screen[-2000:]
            if done is not None:
                assert proc.poll() is None, screen[-2000:]
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    screen += os.read(master, 65536)
                except OSError:  # the child closed its side
                    time.sleep(0.1)

    try:
        drain_until(b"Quit")  # the footer: the app is up and takes keys
        os.write(master, b"q")
        drain_until(None)
        assert proc.stdout is not None
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0
    assert out == b""
