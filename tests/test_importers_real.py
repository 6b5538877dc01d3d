"""`profiles --import` on what vllm bench serve, GuideLLM 0.8.1, llama-benchy 0.4.0 and AIPerf
0.13.0 wrote against a real vLLM 0.32.0 (tests/fixtures/importers/real-vllm-0.32.0, captured by
benchmarks/importers_vs_sweep.py; SOURCES.md there says how). Every expected figure is read
from the fixture itself, in the tool's own fields."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from sparktop.cli import main
from sparktop.errors import UserError
from sparktop.sweep.profiles.import_formats import import_profile, import_results
from sparktop.sweep.profiles.loader import load_profile_file
from sparktop.sweep.profiles.profile import Profile

REAL = Path(__file__).parent / "fixtures" / "importers" / "real-vllm-0.32.0"
VLLM = REAL / "vllm-bench"
GUIDELLM = REAL / "guidellm-0.8.1-p512.trimmed.json"
BENCHY = REAL / "llama-benchy-0.4.0.json"
AIPERF = REAL / "aiperf-0.13.0"
LIMITS: dict[str, int | None] = {"max_model_len": 2048, "max_num_seqs": 4}


def imported(tmp_path: Path, *paths: Path) -> Profile:
    out = tmp_path / "imported.yaml"
    out.write_text(import_results(paths, "real", limits=LIMITS), encoding="utf-8")
    return load_profile_file(out)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_vllm_bench_serve_cells_read_as_written(tmp_path: Path) -> None:
    files = sorted(VLLM.glob("*.json"))
    profile = imported(tmp_path, *files)
    rows = {(r.prompt_tokens, r.concurrency): r for r in profile.rows}
    assert len(rows) == len(files) == 9
    for path in files:
        doc = load(path)
        row = rows[(doc["total_input_tokens"] // doc["completed"], doc["max_concurrency"])]
        assert row.ttft_s == pytest.approx(doc["mean_ttft_ms"] / 1000, abs=1e-4)
        assert row.decode_tps == pytest.approx(1000 / doc["mean_tpot_ms"], abs=0.01)
        assert row.aggregate_tps == pytest.approx(doc["output_throughput"], abs=0.01)
        assert row.observations == doc["completed"]
    assert profile.model == "tiny-llama" and profile.output_tokens == 32
    assert not [n for n in profile.notes if "implausible" in n or "approximate" in n]


def test_guidellm_0_8_concurrent_streams_read_as_written(tmp_path: Path) -> None:
    doc = load(GUIDELLM)
    profile = imported(tmp_path, GUIDELLM)
    assert [r.concurrency for r in profile.rows] == [
        b["config"]["strategy"]["streams"] for b in doc["benchmarks"]
    ]
    for row, bench in zip(profile.rows, doc["benchmarks"], strict=True):
        ok = {k: v["successful"] for k, v in bench["metrics"].items() if "successful" in v}
        assert row.prompt_tokens == round(ok["prompt_token_count"]["mean"]) == 512
        assert row.ttft_s == pytest.approx(ok["time_to_first_token_ms"]["mean"] / 1000, abs=1e-4)
        assert row.decode_tps == pytest.approx(1000 / ok["inter_token_latency_ms"]["mean"], 1e-3)
        sched = bench["scheduler_metrics"]
        window = sched["measure_end_time"] - sched["measure_start_time"]
        assert row.aggregate_tps == pytest.approx(
            ok["output_token_count"]["total_sum"] / window, abs=0.01
        )
    assert profile.aggregate_kind == "end-to-end"


def test_llama_benchy_report_of_nine_cells(tmp_path: Path) -> None:
    doc = load(BENCHY)
    profile = imported(tmp_path, BENCHY)
    rows = {(r.prompt_tokens, r.concurrency): r for r in profile.rows}
    assert len(rows) == len(doc["benchmarks"]) == 9
    for run in doc["benchmarks"]:
        row = rows[(run["prompt_size"], run["concurrency"])]
        assert row.ttft_s == pytest.approx(run["e2e_ttft"]["mean"] / 1000, abs=1e-4)
        assert row.decode_tps == pytest.approx(run["tg_req_throughput"]["mean"], abs=0.01)
        assert row.aggregate_tps == pytest.approx(run["tg_throughput"]["mean"], abs=0.01)
    assert profile.aggregate_kind == "decode-only"


def test_aiperf_summaries_read_as_written(tmp_path: Path) -> None:
    files = sorted(AIPERF.rglob("profile_export_aiperf.json"))
    profile = imported(tmp_path, AIPERF)  # the artifact folder: one row per summary below it
    rows = {(r.prompt_tokens, r.concurrency): r for r in profile.rows}
    assert len(rows) == len(files) == 3
    for path in files:
        doc = load(path)
        (phase,) = [p for p in doc["input_config"]["phases"] if p["kind"] == "profiling"]
        row = rows[(round(doc["input_sequence_length"]["avg"]), phase["concurrency"])]
        assert row.ttft_s == pytest.approx(doc["time_to_first_token"]["avg"] / 1000, abs=1e-4)
        assert row.decode_tps == pytest.approx(1000 / doc["inter_token_latency"]["avg"], 1e-3)
        assert row.aggregate_tps == pytest.approx(doc["output_token_throughput"]["avg"], 1e-3)
        assert row.wall_s == pytest.approx(doc["benchmark_duration"]["avg"], abs=0.01)
        assert row.observations == doc["request_count"]["avg"]
    assert profile.aggregate_kind == "end-to-end" and profile.model == "tiny-llama"
    assert "AIPerf results" in profile.source


def test_aiperf_folder_skips_per_phase_copies(tmp_path: Path) -> None:
    run = tmp_path / "artifacts"
    shutil.copytree(AIPERF / "p128-c1", run)
    warmup = run / "phases" / "warmup"
    warmup.mkdir(parents=True)
    shutil.copy(run / "profile_export_aiperf.json", warmup)  # same cell: would be a duplicate
    (row,) = imported(tmp_path, run).rows
    assert (row.prompt_tokens, row.concurrency) == (128, 1)


def _changed(tmp_path: Path, change: dict[str, Any]) -> Path:
    doc = load(AIPERF / "p512-c2" / "profile_export_aiperf.json") | change
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_aiperf_request_rate_run_measures_its_concurrency(tmp_path: Path) -> None:
    doc = load(AIPERF / "p512-c2" / "profile_export_aiperf.json")
    config = doc["input_config"]
    config["phases"] = [{"name": "profiling", "kind": "profiling", "type": "poisson", "rate": 5}]
    path = _changed(tmp_path, {"input_config": config})
    text, _flags = import_profile([path], "rate", limits=LIMITS)
    little = doc["request_throughput"]["avg"] * doc["request_latency"]["avg"] / 1000
    assert f"request-rate run (5 req/s): concurrency {little:.2f} measured" in text
    assert f"- [512, {max(1, round(little))}," in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"is_complete": False, "incomplete_reason": "watchdog"}, "incomplete (watchdog)"),
        ({"inter_token_latency": None}, "no 'inter_token_latency' in this AIPerf summary"),
        ({"inter_token_latency": {"unit": "ms", "avg": 0.0}}, "arrived in one chunk"),
        ({"time_to_first_token": {"unit": "parsecs", "avg": 3.0}}, "not a time unit"),
        ({"input_config": {"phases": []}, "request_throughput": None}, "--concurrency N"),
    ],
)
def test_aiperf_summaries_that_cannot_be_read_are_refused_in_one_line(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as info:
        import_results([_changed(tmp_path, change)], "x", limits=LIMITS)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_profiles_import_cli_reads_every_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, paths in (
        ("vllm", sorted(VLLM.glob("*.json"))),
        ("guidellm", [GUIDELLM]),
        ("benchy", [BENCHY]),
        ("aiperf", [AIPERF]),
    ):
        out = tmp_path / f"{name}.yaml"
        argv = ["profiles", "--import", *map(str, paths), "--name", name, "-o", str(out)]
        assert main(argv) == 0
        profile = load_profile_file(out)
        assert profile.name == name
        assert any("docs/importers.md" in n for n in profile.notes)  # the tool's definitions
    assert "warning:" not in capsys.readouterr().err


def test_a_real_run_whose_answers_came_in_one_chunk_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On two loaded cores the server sent each whole answer in one chunk (TTFT = latency):
    vllm bench serve's TPOT is then 0.004 ms, a decode rate no engine has."""
    path = REAL / "vllm-bench-one-chunk-p128-c2.json"
    doc = load(path)
    profile = imported(tmp_path, path)
    (row,) = profile.rows
    assert row.decode_tps == pytest.approx(1000 / doc["mean_tpot_ms"], abs=0.1)
    (flag,) = [n for n in profile.notes if "implausible" in n]
    assert flag.startswith(f"prompt 128 x concurrency 2 ({path}): implausible: decode ")
    assert f"{1000 / doc['mean_tpot_ms']:,.0f} tok/s per request" in flag
    assert main(["profiles", "--import", str(path), "--name", "x", "-o", str(tmp_path / "x")]) == 0
    assert f"warning: {flag}" in capsys.readouterr().err
