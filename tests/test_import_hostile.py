"""``sparktop profiles --import`` on result files with figures no benchmark writes (issue 30,
cases 5 and 6): ``Infinity``/``NaN`` (Python's json writes them) and a 4,001-digit integer
(JSON allows it) are refused in one line naming the file and the field, exit 2, no
traceback; before, ``ValueError: cannot convert float NaN to integer`` and ``OverflowError``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktop.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
VLLM_8B = FIXTURES / "vllm-bench-serve-rate1-qwen3-vl-8b.json"
BENCHY = FIXTURES / "llama-benchy-0.4.0-qwen3.5-9b-llamacpp-pp1024-tg32.json"
HUGE = "9" * 4001


def _edited(source: Path, edit: dict[str, str]) -> str:
    """``source`` with fields replaced by raw JSON text (``Infinity``, a huge integer)."""
    doc = json.loads(source.read_text(encoding="utf-8"))
    marks = {}
    for key in edit:
        marks[key] = f"@@{key}@@"
        target = doc
        *path, last = key.split(".")
        for part in path:
            target = target[int(part)] if part.isdigit() else target[part]
        target[last] = marks[key]
    text = json.dumps(doc)
    for key, raw in edit.items():
        text = text.replace(json.dumps(marks[key]), raw)
    return text


@pytest.mark.parametrize(
    ("source", "edit", "message"),
    [
        (VLLM_8B, {"mean_ttft_ms": "Infinity"}, "'mean_ttft_ms' is Infinity, not a finite"),
        (VLLM_8B, {"mean_tpot_ms": "NaN"}, "'mean_tpot_ms' is NaN, not a finite"),
        (
            VLLM_8B,
            {"request_throughput": "Infinity", "mean_e2el_ms": "Infinity"},
            "request_throughput",
        ),
        (VLLM_8B, {"completed": HUGE}, "'completed' is a 4,001-digit integer, not a finite"),
        (VLLM_8B, {"max_concurrency": HUGE}, "'max_concurrency' is a 4,001-digit integer"),
        (VLLM_8B, {"total_input_tokens": "1e308"}, "'total_input_tokens' is 1e+308"),
        (BENCHY, {"benchmarks.0.context_size": "NaN"}, None),
        (BENCHY, {"benchmarks.0.concurrency": HUGE}, "benchmarks[0]: 'concurrency' is a 4,001"),
        (BENCHY, {"benchmarks.0.response_size": "-Infinity"}, "'response_size' is -Infinity"),
    ],
)
def test_figures_out_of_range_are_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: Path,
    edit: dict[str, str],
    message: str | None,
) -> None:
    path = tmp_path / "result.json"
    path.write_text(_edited(source, edit), encoding="utf-8")
    out = tmp_path / "p.yaml"
    status = main(["profiles", "--import", str(path), "--name", "x", "-o", str(out)])
    err = capsys.readouterr().err
    if message is None:  # a NaN where the field is optional: read as absent, the rest imports
        assert status == 0, err
        return
    assert status == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(path) in err and message in err, err
    assert not out.exists()


def test_a_long_list_of_the_wrong_objects_is_refused_from_its_first_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 34 item 16: a 24 MB list of 3 million ``{"x":1}`` took 669 MB and 8 s to refuse
    (every object built first). A list is only ever a vllm bench sweep summary, whose items
    hold ``mean_ttft_ms``: the first item decides. Shown here on 300,000 items, with the
    memory traced while it is refused: a few times the file, not a dict per item."""
    import tracemalloc

    path = tmp_path / "big.json"
    path.write_text("[" + ",".join(['{"x":1}'] * 300_000) + "]")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        code = main(["profiles", "--import", str(path), "--name", "t"])
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}: a JSON list whose first item is a JSON object with keys x; expected" in err
    assert peak < 6 * size  # the bytes and their text; building 300,000 dicts is ~25x


def test_a_sweep_summary_list_still_reads(tmp_path: Path) -> None:
    doc = json.loads(VLLM_8B.read_text(encoding="utf-8"))
    path = tmp_path / "summary.json"
    path.write_text(json.dumps([doc, doc, doc]))
    out = tmp_path / "p.yaml"
    assert main(["profiles", "--import", str(path), "--name", "s", "-o", str(out)]) == 0
    text = out.read_text()
    assert "name: s\n" in text and "(3 runs)" in text
