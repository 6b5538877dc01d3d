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
