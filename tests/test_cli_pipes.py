"""Output piped into a reader that has gone away (``sparktop … --json | head -1``): a quiet
exit with status 141 (128 + SIGPIPE), as ``cat`` gives, never a BrokenPipeError traceback."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sparktop import cli
from tests.test_record import record, ticks

SPARKTOP = Path(cli.__file__).parent


def _closed_port() -> int:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_into_closed_pipe(
    args: list[str], cwd: Path, *, stderr_too: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m sparktop ARGS`` with stdout a pipe whose reader has already exited
    (``| head`` at its worst): the first write fails, every time (a reader that closes after
    a line may or may not close before the writer is done). ``stderr_too``: stderr goes
    into the same pipe (``2>&1 | head``), for commands that write only to stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "sparktop", *args],
            stdout=write_end,
            stderr=write_end if stderr_too else subprocess.PIPE,
            text=True,
            cwd=cwd,
            timeout=120,
        )
    finally:
        os.close(write_end)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


COMMANDS = {
    "help": ["--help"],
    "version": ["--version"],
    "subcommand-help": ["snapshot", "--help"],
    "budget-json": ["budget", "--prompt-tokens", "1000", "--json"],
    "budget-text": ["budget", "--prompt-tokens", "1000"],
    "scan-dir-json": ["budget", "--scan-dir", str(SPARKTOP), "--json"],
    "snapshot-json": ["snapshot", "--inventory", "cluster.yaml", "--json"],
    "snapshot-table": ["snapshot", "--inventory", "cluster.yaml"],
    "snapshot-engine-only": ["snapshot", "--inventory", "engines.yaml"],
    "profiles": ["profiles"],
    "profiles-one": ["profiles", "2x-spark-dsv4-flash-0731"],
    "profiles-json": ["profiles", "2x-spark-dsv4-flash-0731", "--json"],
    "profiles-compare": [
        "profiles",
        "--compare",
        "4x-spark-dsv41-flash-1015",
        "4x-spark-dsv41-flash-1017",
    ],
    "replay-summary": ["replay", "run.jsonl", "--summary"],
    "demo-no-tui": ["demo", "--no-tui", "--nodes", "1", "--rounds", "1"],
    "sim": ["sim", "--write-inventory", "sim.yaml", "--nodes", "1"],
}


@pytest.mark.parametrize("args", list(COMMANDS.values()), ids=list(COMMANDS))
def test_a_closed_stdout_pipe_exits_quietly(args: list[str], tmp_path: Path) -> None:
    """``sparktop COMMAND | head``: 141 on every command (rich's own handler made the tables
    exit 1, which scripts read as "a node did not answer"; argparse made --help exit 0)."""
    (tmp_path / "cluster.yaml").write_text(
        f"cluster: t\nnodes:\n  - {{name: spark-1, host: 127.0.0.1, port: {_closed_port()}}}\n"
    )
    (tmp_path / "engines.yaml").write_text(
        f"cluster: t\nengines:\n  - {{name: e, url: 'http://127.0.0.1:{_closed_port()}'}}\n"
    )
    record(tmp_path / "run.jsonl", ticks(30), interval_s=1.0)
    result = _run_into_closed_pipe(args, tmp_path)
    assert "Traceback" not in result.stderr
    assert "BrokenPipeError" not in result.stderr
    assert result.returncode == 128 + signal.SIGPIPE


def test_the_exporter_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """The exporter writes only its "serving" line, on stderr: ``2>&1 | head`` closes both."""
    (tmp_path / "cluster.yaml").write_text(
        f"cluster: t\nnodes:\n  - {{name: spark-1, host: 127.0.0.1, port: {_closed_port()}}}\n"
    )
    listen = f"127.0.0.1:{_free_port()}"
    args = ["exporter", "--inventory", "cluster.yaml", "--listen", listen]
    result = _run_into_closed_pipe(args, tmp_path, stderr_too=True)
    assert result.returncode == 128 + signal.SIGPIPE


def test_demo_piped_into_head_exits_141(tmp_path: Path) -> None:
    """The issue's own command line, with a real ``head``: its first lines come out, then the
    table's write finds the reader gone."""
    script = f"{shlex.quote(sys.executable)} -m sparktop demo --no-tui --nodes 1 | head -2"
    result = subprocess.run(
        ["bash", "-c", script + '; echo "status ${PIPESTATUS[0]}"'],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    lines = result.stdout.splitlines()
    assert lines[0].startswith("simulated cluster in ") and len(lines) == 3
    assert lines[-1] == f"status {128 + signal.SIGPIPE}"
    assert "Traceback" not in result.stderr


def test_a_broken_pipe_elsewhere_is_not_taken_for_a_closed_stdout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broken connection to a node or engine is a real failure, not a quiet exit."""

    def run(_args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    parser = cli.build_parser()
    parser.set_defaults(_run=run)
    monkeypatch.setattr(cli, "build_parser", lambda commands=cli.COMMANDS: parser)
    with pytest.raises(BrokenPipeError):
        cli.main([])


def test_sweep_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """``sweep`` writes its plan and progress on stderr (stdout stays empty for scripts):
    ``2>&1 | head`` closing early is 141, and no profile is half-written."""
    from sparktop.testing.http_stub import Reply, models_route
    from sparktop.testing.vllm_page import FakeVllm
    from tests.test_snapshot_engines import serving

    fake = FakeVllm()
    routes = {"/metrics": lambda: Reply(body=fake.page()), "/v1/models": models_route()}
    with serving(routes) as url:
        args = ["sweep", "--endpoint", url, "-o", "mine.yaml", "--prompts", "1k"]
        result = _run_into_closed_pipe(
            [*args, "--concurrency", "1", "--yes"], tmp_path, stderr_too=True
        )
    assert result.returncode == 128 + signal.SIGPIPE
    assert not (tmp_path / "mine.yaml").exists()
