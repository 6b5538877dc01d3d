"""Output piped into a reader that has gone away (``sparktop … --json | head -1``): a quiet
exit with status 141 (128 + SIGPIPE), as ``cat`` gives, never a BrokenPipeError traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sparktop import cli

SPARKTOP = Path(cli.__file__).parent


def _closed_port() -> int:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m sparktop ARGS`` with stdout a pipe whose reader has already exited:
    the first write fails, every time (a reader that closes after a line may or may not
    close before the writer is done)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "sparktop", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            timeout=60,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["budget", "--prompt-tokens", "1000", "--json"],
        ["budget", "--prompt-tokens", "1000"],
        ["budget", "--scan-dir", str(SPARKTOP), "--json"],
        ["snapshot", "--inventory", "cluster.yaml", "--json"],
    ],
    ids=["budget-json", "budget-text", "scan-dir-json", "snapshot-json"],
)
def test_a_closed_stdout_pipe_exits_quietly(args: list[str], tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        f"cluster: t\nnodes:\n  - {{name: spark-1, host: 127.0.0.1, port: {_closed_port()}}}\n"
    )
    result = _run_into_closed_pipe(args, tmp_path)
    assert "Traceback" not in result.stderr
    assert "BrokenPipeError" not in result.stderr
    assert result.returncode == 128 + signal.SIGPIPE


def test_a_broken_pipe_elsewhere_is_not_taken_for_a_closed_stdout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broken connection to a node or engine is a real failure, not a quiet exit."""

    def run(_args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    parser = cli.build_parser()
    parser.set_defaults(_run=run)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    with pytest.raises(BrokenPipeError):
        cli.main([])
