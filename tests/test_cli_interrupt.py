"""Ctrl-C at any moment of any command, from the first instant, is a clean exit 130: no
``KeyboardInterrupt`` traceback and no death by the signal (the shell's -2), even while the
command line and its modules are still being imported.

The child runs the console script's entry (``sparktop.__main__:run``) under
``python -X importtime``, which prints a line as each import finishes; SIGINT is sent on the
line named by the test, so each case interrupts the same moment every run (no sleeps)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ENTRY = "from sparktop.__main__ import run; run()"


def _interrupt_on_import(module: str, args: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``sparktop ARGS``; send SIGINT once ``module`` has been imported. Returns the exit
    status and stderr without the import-time lines."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-c", ENTRY, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "TERM": "dumb"},
    )
    assert proc.stderr is not None
    other: list[str] = []
    sent = False
    try:
        for line in proc.stderr:
            if not line.startswith("import time:"):
                other.append(line)
            elif not sent and line.rsplit("|", 1)[1].strip() == module:  # at any depth
                proc.send_signal(signal.SIGINT)
                sent = True
        status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sent, f"{module} was never imported"
    return status, "".join(other)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text("nodes: [{name: a, local: true}]\n", encoding="utf-8")
    return tmp_path


COMMANDS = {
    "monitor": ["--inventory", "cluster.yaml"],
    "demo": ["demo"],
    "snapshot": ["snapshot", "--inventory", "cluster.yaml"],
    "budget": ["budget", "--prompt-tokens", "1000"],
    "profiles": ["profiles"],
    "sim": ["sim", "--write-inventory", "sim.yaml"],
}


@pytest.mark.parametrize(
    "module",
    [
        "sparktop.__main__",  # the first instant our code runs: nothing else is imported yet
        "sparktop.cli",
        "sparktop.commands.monitor",  # while the subcommands' parsers are being built
    ],
)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_ctrl_c_while_starting_exits_130_quietly(workdir: Path, command: str, module: str) -> None:
    status, err = _interrupt_on_import(module, COMMANDS[command], workdir)
    assert (status, err) == (130, "")


@pytest.mark.parametrize(
    ("command", "module"),
    [
        ("snapshot", "sparktop.snapshot"),  # imported by the command once it runs
        ("budget", "sparktop.sweep.budget"),
    ],
)
def test_ctrl_c_while_the_command_imports_exits_130_quietly(
    workdir: Path, command: str, module: str
) -> None:
    status, err = _interrupt_on_import(module, COMMANDS[command], workdir)
    assert (status, err) == (130, "")
