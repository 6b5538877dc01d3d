"""Deeply nested JSON (``[[[[…]]]]`` a few thousand deep) in files sparktop reads is one more
kind of bad input: a clean one-line error, or a recording that replays up to the damage —
never a ``RecursionError`` traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.jsontext import JsonTooDeep, loads
from sparktop.record import Recording
from tests.test_record import record, ticks

DEEP = "[" * 5000 + "]" * 5000
START = 1_767_000_000.0


def test_loads_turns_the_recursion_into_a_value_error() -> None:
    with pytest.raises(JsonTooDeep) as info:
        loads(DEEP)
    assert isinstance(info.value, ValueError) and info.value.msg == "nested too deeply"
    assert loads("[[1]]") == json.loads("[[1]]")
    with pytest.raises(json.JSONDecodeError):
        loads("[1,")


@pytest.mark.parametrize("layout", ["one document", "json lines"])
def test_profiles_import_of_deep_json_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    path = tmp_path / "results.json"
    good = json.dumps({"backend": "vllm", "max_concurrency": 1})
    path.write_text(DEEP if layout == "one document" else f"{good}\n{DEEP}\n", encoding="utf-8")
    assert main(["profiles", "--import", str(path), "--name", "x"]) == 2
    captured = capsys.readouterr()
    where = str(path) if layout == "one document" else f"{path}:2"
    assert captured.err == f"sparktop: error: {where}: not JSON (nested too deeply)\n"
    assert captured.out == ""


def test_a_deeply_nested_recording_line_replays_up_to_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    record(path, ticks(60, START), flush_s=0.0)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("".join([*lines[:31], DEEP + "\n", *lines[31:]]), encoding="utf-8")
    rec = Recording(damaged)
    assert len(rec) == 30 and rec.stop is not None
    assert (rec.stop.line, rec.stop.reason) == (32, "not valid JSON (nested too deeply)")
    assert main(["replay", str(damaged), "--summary"]) == 0
    out = capsys.readouterr().out
    assert "30 ticks" in out and "replays up to the damage: stopped at line 32" in out
    assert "nested too deeply" in out


def test_a_deeply_nested_header_is_not_a_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text(DEEP + "\n", encoding="utf-8")
    assert main(["replay", str(path), "--summary"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a sparktop recording (not valid JSON (nested too" in err
