"""Ctrl-C at any moment of any command, from the first instant, is a clean exit 130: no
``KeyboardInterrupt`` traceback and no death by the signal (the shell's -2), even while the
command line and its modules are still being imported.

The child runs the ``sparktop`` command as installed: ``scripts/sparktop``, the file the
wheel ships as the script (checked below), or ``python -m sparktop``. A ``sitecustomize`` on
the child's ``PYTHONPATH`` adds an audit hook that sends the process SIGINT itself when the
import the test names starts (``*``: the first import the command makes, before any sparktop
code has run): the signal a Ctrl-C delivers, at the same point every run (no sleeps).

What no script can cover is the interpreter's own start-up before it runs one: until Python
installs its handler, SIGINT kills it (no output; the shell's 130), and during ``site`` (the
environment's ``.pth`` files) it prints a traceback. ``benchmarks/bench_ctrl_c.py`` measures
that window: 5–7 ms after the spawn on the 2-core CI VM, against 13–21 ms with the wrapper
pip writes for a ``[project.scripts]`` entry (it imports ``re`` first), and tracebacks up to
~130 ms after the spawn (load 3.7) before the handler came first.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "sparktop"

SITECUSTOMIZE = """\
import os
import sys

_at = os.environ.pop("SPARKTOP_TEST_SIGINT_AT_IMPORT", None)
_started = False


def _hook(event, args):
    global _at, _started
    if event in ("cpython.run_file", "cpython.run_module"):
        _started = True
    elif event == "import" and _started and _at is not None and _at in ("*", args[0]):
        _at = None
        os.kill(os.getpid(), 2)  # SIGINT; importing signal here would import enum early


sys.addaudithook(_hook)
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "cluster.yaml").write_text("nodes: [{name: a, local: true}]\n", encoding="utf-8")
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return tmp_path


def _interrupt_at_import(module: str, command: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``COMMAND`` (a script or ``-m sparktop`` and its arguments) under this Python;
    SIGINT it when the import of ``module`` starts. Returns the exit status and stderr."""
    path = os.pathsep.join(p for p in (str(cwd / "hook"), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, *command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        timeout=60,
        env={
            **os.environ,
            "PYTHONPATH": path,
            "SPARKTOP_TEST_SIGINT_AT_IMPORT": module,
            "TERM": "dumb",
        },
    )
    return proc.returncode, proc.stderr


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
        "*",  # the script's first import: no sparktop code has run yet
        "sparktop.cli",
        "sparktop.commands.monitor",  # while the subcommands' parsers are being built
    ],
)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_ctrl_c_while_starting_exits_130_quietly(workdir: Path, command: str, module: str) -> None:
    status, err = _interrupt_at_import(module, [str(SCRIPT), *COMMANDS[command]], workdir)
    assert (status, err) == (130, "")


@pytest.mark.parametrize(
    ("command", "module"),
    [
        ("snapshot", "sparktop.snapshot"),  # imported by the command once it runs
        ("budget", "sparktop.sweep.budget.budget"),
    ],
)
def test_ctrl_c_while_the_command_imports_exits_130_quietly(
    workdir: Path, command: str, module: str
) -> None:
    status, err = _interrupt_at_import(module, [str(SCRIPT), *COMMANDS[command]], workdir)
    assert (status, err) == (130, "")


def test_ctrl_c_as_python_m_sparktop_starts_exits_130_quietly(workdir: Path) -> None:
    # runpy and the package's __init__ come before __main__ can run: its first import is the
    # earliest point a ``-m`` start can cover.
    command = ["-m", "sparktop", *COMMANDS["budget"]]
    status, err = _interrupt_at_import("sparktop.interrupt", command, workdir)
    assert (status, err) == (130, "")


def test_the_wheel_installs_scripts_sparktop_as_the_command(tmp_path: Path) -> None:
    """The wheel installs ``scripts/sparktop`` as the ``sparktop`` command, and no generated
    wrapper beside it. (hatchling writes the same scripts into the editable wheel of
    ``pip install -e .``; building that one here would need the ``editables`` package.)"""
    pytest.importorskip("hatchling")
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("sparktop-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        shipped = archive.read("sparktop-0.1.0.data/scripts/sparktop")
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")] or [""]
        console_scripts = archive.read(entry_points).decode() if entry_points else ""
    # The installer rewrites '#!python' to the environment's interpreter.
    source = SCRIPT.read_bytes()
    assert shipped.startswith(b"#!python\n")
    assert shipped.split(b"\n", 1)[1] == source.split(b"\n", 1)[1]
    assert "sparktop" not in console_scripts
    assert os.access(SCRIPT, os.X_OK)


def test_the_script_runs_the_command_line(workdir: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--version"], capture_output=True, text=True, check=True
    )
    assert run.stdout.startswith("sparktop ")


@pytest.mark.parametrize(
    "command",
    [
        (),
        ("snapshot",),
        ("budget",),
        ("sweep",),
        ("replay",),
        ("demo",),
        ("sim",),
        ("profiles",),
        ("exporter",),
    ],
)
def test_every_help_lists_its_exit_statuses(
    command: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """Scripts branch on them: each --help says what its statuses mean (a fresh-eyes trial
    found none in 'sparktop --help' and only 0 in the exporter's), in one format, as its
    last section: ``exit status[ (qualifier)]:``, then a row per status, the code in a
    column five wide, its meaning wrapped under itself (they were a table in some, a
    sentence in others, a heading mid-text in one)."""
    from sparktop.cli import main

    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert text.lower().count("exit status") == 1, text
    head = re.search(r"^exit status(?: \([^()\n]+\))?:\n", text, re.MULTILINE)
    assert head is not None, text[-600:]
    rows = text[head.end() :].rstrip("\n").split("\n")
    codes = []
    for row in rows:  # to the end of the help: nothing after the section
        status = re.fullmatch(r"  (\d{1,3}) +(\S.*)", row)
        if status is not None:
            assert len(row) - len(status.group(2)) == 7, row  # meanings in one column
            codes.append(int(status.group(1)))
        else:
            assert re.fullmatch(r" {7}\S.*", row), row  # a meaning wrapped under itself
        assert len(row) <= 95, row
    assert len(codes) == len(set(codes)) >= 2 and {0, 2} <= set(codes), codes
