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
    bad_key = "nodes: [{name: a, local: true}]\nkeys:\n  app.help: ctrl+zz\n"
    (tmp_path / "badkey.yaml").write_text(bad_key)
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
        (["--theme", "nosuch", "demo"], "--theme: unknown theme 'nosuch'"),  # before it, too
        (["--theme", "nosuch", "replay", "{d}/cluster.yaml"], "unknown theme 'nosuch'"),
        (["--inventory", "{d}/absent.yaml", "snapshot"], "{d}/absent.yaml: no such file"),
        (["snapshot", "-i", "{d}/badkey.yaml"],
         "{d}/badkey.yaml:3:13: keys.app.help: invalid key 'ctrl+zz': 'zz' is not a key name"),
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


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--theme", "light", "demo", "--theme", "dark"],
         "--theme given twice: 'light' before 'demo', 'dark' after it"),
        (["--serve-metrics", "127.0.0.1:0", "snapshot", "-i", "{d}/cluster.yaml"],
         "--serve-metrics is an option of the monitor: 'sparktop snapshot' does not take it"),
        (["--profile", "2x-spark-dsv4-flash-0731", "profiles"],
         "--profile is an option of the monitor: 'sparktop profiles' does not take it"),
        (["exporter"], "the following arguments are required: -i/--inventory"),
    ],
)  # fmt: skip
def test_refused_by_the_parser_in_one_line(
    files: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([a.replace("{d}", str(files)) for a in argv])
    captured = capsys.readouterr()
    assert exit_.value.code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert expected.replace("{d}", str(files)) in captured.err


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


# A monitor option given before a subcommand: the same as after it, or refused.
GLOBAL_VALUES = {
    "inventory": ["-i", "c.yaml"], "theme": ["--theme", "light"], "interval": ["--interval", "2"],
    "profile": ["--profile", "2x-spark-dsv4-flash-0731"],
    "serve_metrics": ["--serve-metrics", "127.0.0.1:0"], "on_alert": ["--on-alert", "true"],
    "alert_log": ["--alert-log", "a.jsonl"], "bell": ["--bell"], "record": ["--record", "r.zst"],
    "force": ["--force"], "force_tui": ["--force-tui"],
    "endpoints": ["--endpoint", "http://127.0.0.1:8000"], "kind": ["--kind", "sglang"],
    "api_key_env": ["--api-key-env", "TOKEN"],
}  # fmt: skip
OWN_FLAG = {("budget", "endpoints"), ("sweep", "endpoints")}
"""A subcommand with a flag of the monitor's name that means something else there (one
server's URL, not a repeatable list of servers): given before it, refused."""
COMMAND_ARGS = {
    "demo": [], "snapshot": ["-i", "x.yaml"], "budget": ["--prompt-tokens", "5"],
    "sweep": ["--endpoint", "http://127.0.0.1:1", "-o", "s.yaml"], "profiles": [],
    "replay": ["r.zst"], "sim": ["--write-inventory", "s.yaml"], "exporter": ["-i", "x.yaml"],
}  # fmt: skip


def _pairs() -> list[tuple[str, str]]:
    from sparktop import cli

    parser = cli.build_parser()
    tops = [a.dest[len(cli.TOP) :] for a in parser._actions if a.dest.startswith(cli.TOP)]
    assert sorted(tops) == sorted(GLOBAL_VALUES)  # a new monitor option gets a value here
    return [(command, dest) for command in COMMAND_ARGS for dest in tops]


@pytest.mark.parametrize(("command", "dest"), _pairs())
def test_a_monitor_option_before_a_subcommand_means_the_same_as_after_it(
    command: str, dest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparktop import cli

    option, rest = GLOBAL_VALUES[dest], COMMAND_ARGS[command]
    if dest == "inventory" and rest[:1] == ["-i"]:
        rest = rest[2:]  # the command's own required --inventory, given before it instead
    try:
        after = cli.parse_args(cli.build_parser(), [command, *rest, *option])
    except SystemExit as exc:  # the command does not take it: before it is refused too
        assert exc.code == 2
        capsys.readouterr()
        with pytest.raises(SystemExit) as before:
            cli.parse_args(cli.build_parser(), [*option, command, *rest])
        assert before.value.code == 2
        assert f"is an option of the monitor: 'sparktop {command}'" in capsys.readouterr().err
        return
    if (command, dest) in OWN_FLAG:
        with pytest.raises(SystemExit) as refused:
            cli.parse_args(cli.build_parser(), [*option, command, *rest])
        assert refused.value.code == 2
        message = f"'sparktop {command}' takes its own {option[0]} after '{command}'"
        assert message in capsys.readouterr().err
        return
    before = cli.parse_args(cli.build_parser(), [*option, command, *rest])
    assert vars(before) == vars(after)


def test_the_monitor_options_without_a_subcommand_keep_their_names() -> None:
    from sparktop import cli

    args = cli.parse_args(cli.build_parser(), ["--theme", "light", "--bell", "-i", "c.yaml"])
    assert (args.theme, args.bell, str(args.inventory), args.command) == (
        "light", True, "c.yaml", None,
    )  # fmt: skip
    assert not [k for k in vars(args) if k.startswith(cli.TOP)]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:99999", "port 99999 is out of range (1-65535)"),
        ("http://127.0.0.1:0", "port 0 is out of range (1-65535)"),
        ("http://[::1]:0x", "port '0x' is not a number"),
    ],
)
@pytest.mark.parametrize("command", ["sweep", "budget"])
def test_an_endpoint_port_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, url: str, problem: str
) -> None:
    """``sweep`` printed a 60-line ExceptionGroup (``OverflowError``), exit 1; ``budget`` said
    "unreachable (Port out of range)", exit 1."""
    argv = {
        "sweep": ["sweep", "--endpoint", url, "-o", str(tmp_path / "p.yaml"), "--yes"],
        "budget": ["budget", "--prompt-tokens", "5", "--endpoint", url],
    }[command]
    assert _refused(capsys, argv) == f"sparktop: error: --endpoint: {problem}, got '{url}'\n"
