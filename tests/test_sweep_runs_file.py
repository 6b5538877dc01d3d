"""The sweep's runs file (``my.yaml.runs.jsonl``, what ``--resume`` continues) is opened as
every file sparktop writes (:mod:`sparktop.outfile`, as ``--record`` and ``--alert-log``
are): a symbolic link in its place is refused, not written through, and a FIFO is refused at
once instead of blocking the sweep until a reader comes; ``--resume`` says so before asking
the server anything."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sparktop.errors import UserError
from sparktop.sweep.runner.sweep_state import Plan, Provenance, RunsFile, read_runs, runs_path
from tests.sweep_helpers import run_cli

PLAN = Plan("http://127.0.0.1:9", "m", (("1K", 1024),), (1,), 16, 1)
PROVENANCE = Provenance("2026-12-05T08:00:00Z", "0", "sparktop sweep", "0.32.0", "random")


def test_a_new_runs_file_is_created_and_reopened_to_append(tmp_path: Path) -> None:
    path = runs_path(tmp_path / "s.yaml")
    RunsFile.create(path, PLAN, PROVENANCE).close()
    RunsFile.reopen(path).close()
    assert read_runs(path) == (PLAN, PROVENANCE, [])
    with pytest.raises(UserError, match=r"exists; not overwriting it \(pass --resume"):
        RunsFile.create(path, PLAN, PROVENANCE)


def test_a_symbolic_link_in_its_place_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "bashrc"
    target.write_text("keep me\n")
    path = runs_path(tmp_path / "s.yaml")
    path.symlink_to(target)
    for attempt in (lambda: RunsFile.reopen(path), lambda: RunsFile.create(path, PLAN, PROVENANCE)):
        with pytest.raises(UserError) as exc:
            attempt()
        assert str(exc.value) == f"--output: {path} is a symbolic link; not writing through it"
    assert target.read_text() == "keep me\n"


async def test_a_fifo_in_its_place_is_refused_at_once(tmp_path: Path) -> None:
    path = runs_path(tmp_path / "s.yaml")
    os.mkfifo(path)
    opening = asyncio.create_task(asyncio.to_thread(RunsFile.reopen, path))
    done, _ = await asyncio.wait({opening}, timeout=30)
    if not done:  # blocked in open() waiting for a reader: give it one, then fail
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        (await opening).close()
        pytest.fail("opening the runs file blocked on a FIFO with no reader")
    with pytest.raises(UserError) as exc:
        opening.result()
    assert str(exc.value) == (
        f"--output: {path} is a FIFO with no reader, not a regular file; pass a file to write"
    )


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
async def test_resume_refuses_it_before_asking_the_server(tmp_path: Path, kind: str) -> None:
    """The endpoint is a closed port: a sweep that got as far as asking it would fail with
    exit 1 (cannot connect), after reading a FIFO for its writer."""
    out = tmp_path / "s.yaml"
    path = runs_path(out)
    if kind == "symlink":
        RunsFile.create(tmp_path / "elsewhere.jsonl", PLAN, PROVENANCE).close()
        path.symlink_to(tmp_path / "elsewhere.jsonl")
    else:
        os.mkfifo(path)
    status, _, err = await run_cli(
        tmp_path, "sweep", "--endpoint", "http://127.0.0.1:9", "-o", str(out), "--resume",
        "--yes", timeout_s=60,
    )  # fmt: skip
    assert status == 2, err
    said = "is a symbolic link; not writing through it" if kind == "symlink" else "a FIFO"
    assert f"--output: {path} " in err and said in err, err
    assert "Traceback" not in err
