"""Options a new user gets wrong are refused in one line with exit 2 before anything starts,
and files that are not what a command reads say what they are (issue 20, item 16)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparktop.cli import main
from tests.test_profiles import GOOD


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "Traceback" not in captured.err
    return captured.err


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "binary.tcss").write_bytes(b"\xff\xfe\x00\x01" * 64)
    (tmp_path / "notes.tcss").write_text("this is not a palette\n")
    (tmp_path / "cluster.yaml").write_text("nodes: [{name: a, local: true}]\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty.json").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--theme", "nosuch"], "--theme: unknown theme 'nosuch' (sparktop's: dark,"),
        (["--theme", "{d}/missing.tcss"], "--theme {d}/missing.tcss: not a usable theme file"),
        (["--theme", "{d}/binary.tcss"], "not a usable theme file"),
        (["demo", "--theme", "nosuch"], "--theme: unknown theme 'nosuch'"),
        (["replay", "{d}/cluster.yaml", "--theme", "nosuch"], "unknown theme 'nosuch'"),
        (["demo", "--no-tui", "--rounds", "-1"], "--rounds must be at least 1, got -1"),
        (["demo", "--no-tui", "--rounds", "0"], "--rounds must be at least 1, got 0"),
        (["demo", "--speed", "1e9"], "--speed must be above 0 and at most 100, got 1e+09"),
        (["sim", "--write-inventory", "{d}/s.yaml", "--speed", "inf"], "at most 100, got inf"),
        (["snapshot", "-i", "{d}/cluster.yaml", "--window", "100000"],
         "--window must be 0 to 600 seconds"),
        (["budget", "--file", "{d}/cluster.yaml", "--tokenizer", "/nonexistent.json"],
         "--tokenizer /nonexistent.json: no such file (expected a tokenizer.json)"),
        (["budget", "--prompt-tokens", "10", "--tokenizer", "{d}/cluster.yaml"],
         "--tokenizer counts --file or --scan-dir"),
        (["profiles", "--import", "{d}/empty.json", "--name", "x"],
         "{d}/empty.json: empty (no benchmark results in it)"),
        (["replay", "{d}", "--summary"], "{d} is a directory, not a recording"),
        (["replay", "/dev/null", "--summary"], "/dev/null is a character device, not a record"),
        (["replay", "{d}/fifo", "--summary"], "{d}/fifo is a FIFO, not a recording"),
        (["replay", "{d}/absent.zst", "--summary"], "no such recording: {d}/absent.zst"),
    ],
)  # fmt: skip
def test_refused_in_one_line(
    files: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    err = _refused(capsys, [a.format(d=files) for a in argv])
    assert expected.format(d=files) in err


def test_a_good_theme_file_and_names_are_accepted() -> None:
    from sparktop.ui.themes import check_theme, themes_dir

    folder = themes_dir()
    assert folder is not None
    for wanted in ("dark", "sparktop-light", "high-contrast", "nord", None):
        check_theme(wanted)
    check_theme(str(next(folder.glob("*.tcss"))))


def test_a_bare_profile_name_that_is_a_file_is_read_as_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mysweep").write_text(GOOD, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["profiles", "mysweep"]) == 0
    assert "mine" in capsys.readouterr().out
    assert main(["budget", "--prompt-tokens", "1000", "--profile", "mysweep"]) == 0
    assert "mine" in capsys.readouterr().out
    (tmp_path / "cluster.yaml").write_text("nodes: [{name: a, local: true}]\nprofile: mysweep\n")
    from sparktop.inventory import load_inventory

    assert load_inventory(tmp_path / "cluster.yaml").profile == str(tmp_path / "mysweep")
