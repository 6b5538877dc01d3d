"""``--inventory`` and ``--profile`` given a pipe: a named FIFO nobody writes to fails at once
with one line naming it (it used to block the open forever); a pipe with a writer, as from
``<(cat cluster.yaml)``, is read to its end however slow the writer."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sparktop import inputfile
from sparktop.cli import main
from sparktop.errors import UserError
from sparktop.inventory import Inventory, load_inventory
from sparktop.sweep.profiles.loader import load_profile, load_profile_file
from sparktop.sweep.profiles.profile import Profile
from tests.fifo_helpers import finishes

INVENTORY = "cluster: piped\nnodes:\n  - {name: spark-1, host: 127.0.0.1}\n"
PROFILE_FILE = (
    Path(inputfile.__file__).parent / "sweep" / "profiles" / "2x-spark-dsv4-flash-0731.yaml"
)
NOTHING_WRITTEN = "a FIFO with nothing written to it in 0.2 s (no writer?)"


@pytest.fixture(autouse=True)
def short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputfile, "FIFO_WAIT_S", 0.2)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    os.mkfifo(path)
    return path


def test_a_fifo_with_no_writer_fails_the_inventory_with_one_line(fifo: Path) -> None:
    error = finishes(lambda: load_inventory(fifo), fifo)
    assert isinstance(error, UserError)
    assert str(error).startswith(f"{fifo}: cannot read: {NOTHING_WRITTEN}; pass a regular file")


def test_a_fifo_with_no_writer_fails_the_profile_with_one_line(fifo: Path) -> None:
    error = finishes(lambda: load_profile(str(fifo)), fifo)
    assert isinstance(error, UserError)
    assert str(error).startswith(f"cannot read profile {fifo}: {NOTHING_WRITTEN}")


@pytest.mark.parametrize(
    "argv",
    [["budget", "--prompt-tokens", "1000", "--profile"], ["snapshot", "--inventory"]],
    ids=["budget-profile", "snapshot-inventory"],
)
def test_the_commands_exit_2_on_a_fifo_with_no_writer(
    argv: list[str], fifo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert finishes(lambda: main([*argv, str(fifo)]), fifo) == 2
    err = capsys.readouterr().err
    assert err.startswith("sparktop: error: ") and str(fifo) in err and NOTHING_WRITTEN in err
    assert err.count("\n") == 1


def test_a_named_fifo_whose_writer_comes_is_read(
    fifo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def write() -> None:
        with open(fifo, "w") as pipe:  # blocks until the loader opens its end
            pipe.write(INVENTORY)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    monkeypatch.setattr(inputfile, "FIFO_WAIT_S", 20.0)  # the writer only has to be scheduled
    inventory = finishes(lambda: load_inventory(fifo), fifo)
    writer.join(20)
    assert isinstance(inventory, Inventory), inventory
    assert [n.name for n in inventory.nodes] == ["spark-1"]


@pytest.fixture
def slow_pipe() -> Iterator[Callable[[bytes], str]]:
    """A pipe like ``<(cat file)``: the path ``/dev/fd/N`` of its read end; a thread writes
    the data and closes, later than the FIFO wait (a writer like ``ssh host cat``)."""
    fds: list[int] = []
    threads: list[threading.Thread] = []

    def make(data: bytes) -> str:
        read_end, write_end = os.pipe()
        fds.append(read_end)

        def write() -> None:
            time.sleep(inputfile.FIFO_WAIT_S * 2)  # slower than a named FIFO may be
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)

        threads.append(threading.Thread(target=write, daemon=True))
        threads[-1].start()
        return f"/dev/fd/{read_end}"

    yield make
    for thread in threads:
        thread.join(20)
    for fd in fds:
        os.close(fd)


def test_a_pipe_with_a_slow_writer_is_read_to_its_end(
    slow_pipe: Callable[[bytes], str],
) -> None:
    path = slow_pipe(INVENTORY.encode())
    inventory = finishes(lambda: load_inventory(Path(path)), Path(path))
    assert isinstance(inventory, Inventory), inventory
    assert inventory.cluster == "piped"

    path = slow_pipe(PROFILE_FILE.read_bytes())
    profile = finishes(lambda: load_profile_file(Path(path)), Path(path))
    assert isinstance(profile, Profile), profile
    assert profile.name == "2x-spark-dsv4-flash-0731"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for <(…)")
def test_process_substitution_works_for_both_options(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a node that refuses at once: snapshot exits 1, still prints
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(INVENTORY.replace("127.0.0.1}", f"127.0.0.1, port: {port}}}"))
    script = (
        '"$0" -m sparktop budget --prompt-tokens 1000 --profile <(cat "$1") && '
        '"$0" -m sparktop snapshot --inventory <(cat "$2")'
    )
    result = subprocess.run(
        ["bash", "-c", script, sys.executable, str(PROFILE_FILE), str(inventory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "profile 2x-spark-dsv4-flash-0731" in result.stdout
    lines = result.stdout.splitlines()
    assert any(line.startswith("piped ") for line in lines)  # the snapshot's cluster header
    assert "spark-1  unreachable" in lines[-1]
    assert result.returncode == 1, result.stderr  # the node did not answer
