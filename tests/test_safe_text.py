"""Text from nodes and servers never reaches a terminal raw, whichever command prints it.

The rule (``sparktop.safe_text``), then each human-readable output: the snapshot table of a
loopback node whose GPU name carries OSC 0 (window title), OSC 52 (clipboard write) and bidi
controls, errors on stderr, the budget, profiles and a replay summary.
"""

from __future__ import annotations

import io
import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text

from sparktop.cli import main
from sparktop.record.tick import make_header
from sparktop.safe_console import PrintableConsole
from sparktop.safe_text import (
    cut_credentials,
    dumps_printable,
    json_printable,
    printable,
    printable_lines,
    without_credentials,
)
from tests.ssh_helpers import GB10_CSV, ClientFiles, FakeNvidiaSmi, client_files
from tests.test_record import record, ticks
from tests.test_snapshot import _inventory, _Loop, _start

OSC_TITLE = "\x1b]0;pwned\x07"
OSC_CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # "echo pwned" into the clipboard
BIDI = "\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u200e\u200f\u2028\u2029\ufeff\u061c"
HOSTILE = f"GB10{OSC_TITLE}{OSC_CLIPBOARD}\x9b2J{BIDI}\x7f\U000e0041"


def invisible(text: str) -> list[str]:
    """Characters a terminal could act on or that hide/reorder text (line feeds aside)."""
    return [
        f"U+{ord(c):04X}"
        for c in text
        if c != "\n" and not c.isprintable() and unicodedata.category(c) != "Zs"
    ]


# -- the rule ------------------------------------------------------------------------------------


def test_every_control_bidi_and_zero_width_character_becomes_one_visible_cell() -> None:
    shown = printable(HOSTILE)
    assert invisible(shown) == []
    assert shown.startswith("GB10␛]0;pwned␇␛]52;c;")
    assert len(shown) == len(HOSTILE)  # one symbol per character: widths stay right
    assert printable("\t\n\r") == "␉␊␍" and printable("\u2028") == "␤"
    assert printable("\u202e") == "\ufffd" and printable("\x85") == "\ufffd"
    plain = "NVIDIA GB10 · 2,509 MHz · 55 °C · 深度"
    assert printable(plain) is plain  # the common case costs one check
    assert printable("a\u00a0b\u3000c") == "a\u00a0b\u3000c"  # other spaces are harmless
    assert printable(printable(HOSTILE)) == printable(HOSTILE)


def test_multi_line_text_keeps_its_line_feeds_only() -> None:
    assert printable_lines("a\x1b[2J\nb\u202ec\n") == "a␛[2J\nb\ufffdc\n"


def test_json_stays_the_same_document_and_cannot_act_on_a_terminal() -> None:
    doc = {"message": HOSTILE, "unit": "°C", "n": [1, 2]}
    text = dumps_printable(doc, indent=2)
    assert invisible(text) == [] and json.loads(text) == doc
    assert "°C" in text and "\\u202e" in text and "\\udb40\\udc41" in text  # readable, lossless
    assert json_printable('"ok"') == '"ok"'


def test_the_console_makes_every_segment_printable_and_keeps_styles() -> None:
    out = io.StringIO()
    console = PrintableConsole(file=out, width=80, force_terminal=True, color_system="standard")
    console.print(Text("name ", style="bold") + Text(HOSTILE, style="red"))
    sent = out.getvalue()
    assert "\x1b[1m" in sent  # rich's own styling still reaches the terminal
    assert "\x1b]" not in sent and "\x07" not in sent and invisible(sent.replace("\x1b[", "")) == []
    assert "GB10␛]0;pwned" in sent  # (rich drops the BEL itself)


# -- every command's human-readable output -----------------------------------------------------


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return client_files(tmp_path / "client")


@pytest.fixture
def background() -> Iterator[_Loop]:
    loop = _Loop()
    yield loop
    loop.stop()


def test_snapshot_text_shows_a_hostile_gpu_name_as_symbols(
    tmp_path: Path, files: ClientFiles, background: _Loop, capsys: pytest.CaptureFixture[str]
) -> None:
    # (no U+2028/2029 here: the name is one line of CSV, and those would split it)
    name = HOSTILE.replace("\u2028", "").replace("\u2029", "")
    csv = tmp_path / "hostile.csv"
    csv.write_text(GB10_CSV.read_text().replace("NVIDIA GB10", f"NVIDIA {name}"))
    server = background.run(_start(files, FakeNvidiaSmi(csv)))
    try:
        status = main(["snapshot", "--inventory", str(_inventory(tmp_path, files, [server.port]))])
    finally:
        background.run(server.close())
    out = capsys.readouterr().out
    assert status == 0, out
    assert "\x1b" not in out and "\x07" not in out and invisible(out) == []
    assert "GB10␛]0;pwned␇␛]52;c;ZWNo" in out  # the name is shown, as symbols


def test_warnings_logged_to_stderr_are_printable(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    main(["profiles", "--json"])  # any command: the entry point sets the handler up
    handler = logging.lastResort  # what prints warnings when nothing else is configured
    assert handler is not None
    record = logging.LogRecord("sparktop", logging.WARNING, "", 0, "hook said %s", (HOSTILE,), None)
    line = handler.format(record)
    assert line.startswith("hook said GB10␛]0;pwned␇") and invisible(line) == []


def test_errors_on_stderr_are_printable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / f"prompt{OSC_TITLE}{BIDI}.txt"
    assert main(["budget", "--file", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sparktop: error: ") and invisible(err) == [] and "␛]0;pwned␇" in err
    with pytest.raises(SystemExit):
        main(["budget", "--concurrency", f"x{OSC_CLIPBOARD}"])
    err = capsys.readouterr().err
    assert "invalid" in err and invisible(err) == []


def test_budget_text_and_json_are_printable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / f"src{OSC_TITLE}\u202e"
    folder.mkdir()
    (folder / f"a{OSC_CLIPBOARD}.py").write_text("print('hello')\n" * 50)
    assert main(["budget", "--scan-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "tokens" in out and invisible(out) == []
    assert main(["budget", "--scan-dir", str(folder), "--json"]) == 0
    out = capsys.readouterr().out
    assert invisible(out) == [] and json.loads(out)


def test_profiles_print_hostile_text_as_symbols(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = Path(__file__).parent.parent / "sparktop" / "sweep" / "profiles"
    base = next(iter(sorted(source.glob("*.yaml"))), None)
    if base is None:
        pytest.skip("no built-in YAML profile to start from")
    text = base.read_text()
    assert "\nmodel:" in text
    hostile = text.replace("\nmodel:", '\nmodel: "x\\e]0;pwned\\a\\u202e"\n_model:', 1)
    hostile = "\n".join(line for line in hostile.splitlines() if not line.startswith("_model:"))
    path = tmp_path / "hostile.yaml"
    path.write_text(hostile + "\n")
    for extra in ([], ["--json"]):
        status = main(["profiles", str(path), *extra])
        out = capsys.readouterr()
        assert status == 0, out.err
        assert invisible(out.out) == [] and invisible(out.err) == []
        assert "pwned" in out.out


def test_replay_summary_of_a_hostile_recording_is_printable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    record(path, ticks(30), interval_s=1.0)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["inventory"] = {"cluster": f"c{OSC_TITLE}{BIDI}"}
    header["sparktop_version"] = OSC_CLIPBOARD
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert make_header()["format"] == header["format"]
    assert main(["replay", str(path), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "cluster c␛]0;pwned␇" in out and invisible(out) == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://ops:hunter2@10.0.0.1:8015/x", "http://10.0.0.1:8015/x"),
        ("http://ops@[::1]:8015", "http://[::1]:8015"),
        ("https://a:b@host", "https://host"),
        ("http://10.0.0.1:8015", "http://10.0.0.1:8015"),
        ("not a url", "not a url"),
    ],
)
def test_without_credentials_cuts_only_the_userinfo(url: str, shown: str) -> None:
    assert without_credentials(url) == shown
    assert cut_credentials(f"GET {url}/metrics failed", url) == f"GET {shown}/metrics failed"
