"""`sparktop profiles --import` on real published result files of llama-benchy, GuideLLM,
vllm bench serve (request-rate runs) and a vllm bench sweep folder (tests/fixtures/importers,
sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.errors import UserError
from sparktop.sweep.profiles.import_formats import import_results
from sparktop.sweep.profiles.loader import load_profile_file
from sparktop.sweep.profiles.profile import Profile

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
BENCHY = FIXTURES / "llama-benchy-0.4.0-qwen3.5-9b-llamacpp-pp1024-tg32.json"
GUIDE_SYNC = FIXTURES / "guidellm-0.5.0-qwen3-0.6b-synchronous.trimmed.json"
GUIDE_C4 = FIXTURES / "guidellm-0.5.0-qwen3-0.6b-concurrent4.trimmed.json"
VLLM_8B = FIXTURES / "vllm-bench-serve-rate1-qwen3-vl-8b.json"
VLLM_3B = FIXTURES / "vllm-bench-serve-rate1-qwen2.5-vl-3b.json"
SWEEP = FIXTURES / "vllm-bench-sweep"
NO_LIMITS: dict[str, int | None] = {
    "kv_pool_tokens": None,
    "max_model_len": None,
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
}


def imported(tmp_path: Path, *paths: Path, name: str = "mine") -> Profile:
    out = tmp_path / f"{name}.yaml"
    out.write_text(import_results(paths, name, limits=NO_LIMITS), encoding="utf-8")
    return load_profile_file(out)


def test_llama_benchy_report(tmp_path: Path) -> None:
    profile = imported(tmp_path, BENCHY)
    (row,) = profile.rows
    doc = json.loads(BENCHY.read_text())["benchmarks"][0]
    assert (row.prompt_tokens, row.concurrency) == (1024, 1)
    assert row.ttft_s == pytest.approx(doc["e2e_ttft"]["mean"] / 1000, abs=1e-4)
    assert row.prefill_tps == pytest.approx(1024 / row.ttft_s, rel=1e-3)
    assert row.decode_tps == pytest.approx(doc["tg_req_throughput"]["mean"], abs=0.01)
    assert row.aggregate_tps == pytest.approx(doc["tg_throughput"]["mean"], abs=0.01)
    assert row.observations == 15 and profile.output_tokens == 32
    assert profile.aggregate_kind == "decode-only"
    assert profile.model == "Qwen3.5-9B-Q4_K_M-llamacpp"
    assert "llama-benchy" in profile.source


def test_guidellm_synchronous_and_concurrent_runs(tmp_path: Path) -> None:
    profile = imported(tmp_path, GUIDE_SYNC, GUIDE_C4)
    assert [(r.prompt_tokens, r.concurrency) for r in profile.rows] == [(264, 1), (264, 4)]
    sync, four = profile.rows
    assert sync.ttft_s == pytest.approx(0.1962, abs=1e-4)
    assert sync.decode_tps == pytest.approx(1000 / 20.59245331422209, abs=0.01)
    assert four.aggregate_tps == pytest.approx(9984 / 60.0, abs=0.01)  # output ÷ the window
    assert four.observations == 78 and four.wall_s == 60.0
    assert profile.aggregate_kind == "end-to-end" and profile.output_tokens == 128
    assert not any("approximate" in n for n in profile.notes)


def test_request_rate_runs_use_the_measured_concurrency_and_say_so(tmp_path: Path) -> None:
    profile = imported(tmp_path, VLLM_8B, VLLM_3B)
    (row,) = profile.rows  # both measure ~4 in flight at 200 tokens: the second is dropped
    doc = json.loads(VLLM_8B.read_text())
    little = doc["request_throughput"] * (95.6344293046277 + 27.911832109121164 * 127) / 1000
    assert row.concurrency == round(little) == 4
    assert (row.prompt_tokens, row.decode_tps) == (200, pytest.approx(1000 / 27.9118, abs=0.01))
    notes = "\n".join(profile.notes)
    assert f"concurrency {little:.2f} measured" in notes and "peak 12" in notes
    assert "approximate" in notes and "dropped" in notes


def test_a_request_rate_run_without_a_peak_says_no_peak(tmp_path: Path) -> None:
    """A result without ``max_concurrent_requests`` (older vllm bench) has no "peak None"."""
    doc = json.loads(VLLM_8B.read_text())
    del doc["max_concurrent_requests"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(doc))
    notes = "\n".join(imported(tmp_path, older).notes)
    assert "measured (request throughput x mean latency" in notes
    assert "peak" not in notes and "None" not in notes


def test_a_vllm_bench_sweep_folder(tmp_path: Path) -> None:
    profile = imported(tmp_path, SWEEP)
    (row,) = profile.rows
    assert "run=0.json" in profile.source or "BENCH--request_rate=1.0" in profile.source
    assert (row.prompt_tokens, row.concurrency) == (200, 4)
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    with pytest.raises(UserError, match=r"without run=N\.json or profile_export_aiperf\.json"):
        import_results([empty], "x", limits=NO_LIMITS)


def test_tools_whose_aggregates_differ_are_not_mixed(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="mix aggregates"):
        import_results([BENCHY, GUIDE_C4], "x", limits=NO_LIMITS)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            json.dumps([{"a": 1, "b": 2}, {"a": 3}, {"a": 4}]),
            "a JSON list whose first item is a JSON object with keys a, b; expected a "
            "llama-benchy report, a GuideLLM benchmarks.json, a vllm bench result or an AIPerf "
            "profile_export_aiperf.json",
        ),
        (json.dumps({"rows": []}), "a JSON object with keys rows; expected a llama-benchy"),
        ("sparktop_profile: 1\n", "other.json:1: not JSON"),
        ("", "other.json: empty (no benchmark results in it)"),
        ("[" * 100_000, "not JSON (nested too deeply)"),
    ],
)
def test_other_files_are_refused_in_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "other.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError) as info:
        import_results([path], "x", limits=NO_LIMITS)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_profiles_import_cli_writes_a_profile_budget_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "benchy.yaml"
    assert main(["profiles", "--import", str(BENCHY), "--name", "benchy", "-o", str(out)]) == 0
    assert main(["budget", "--prompt-tokens", "1024", "--profile", str(out), "--json"]) == 0
    budget = json.loads(capsys.readouterr().out)
    assert budget["profile"]["name"] == "benchy"
    assert budget["time"]["ttft_s"]["basis"] == "exact"


TENSTORRENT = FIXTURES / "vllm-bench-serve-tenstorrent-test-sample.json"


def test_a_test_sample_with_impossible_decode_is_flagged_with_its_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = imported(tmp_path, TENSTORRENT)
    (row,) = profile.rows  # kept: a flag is a doubt, not a refusal
    assert row.decode_tps == pytest.approx(1000 / 0.010592051617808856, abs=0.01)
    (flag,) = [n for n in profile.notes if "implausible" in n]
    assert flag.startswith(f"prompt 127 x concurrency 64 ({TENSTORRENT}): implausible: ")
    assert "decode 94,410 tok/s per request" in flag and "above 10,000" in flag
    out = tmp_path / "tt.yaml"
    assert main(["profiles", "--import", str(TENSTORRENT), "--name", "tt", "-o", str(out)]) == 0
    assert f"warning: {flag}\n" in capsys.readouterr().err


@pytest.mark.parametrize(
    "fixture", [BENCHY, GUIDE_SYNC, GUIDE_C4, VLLM_8B, VLLM_3B, SWEEP], ids=lambda p: p.name
)
def test_real_published_results_raise_no_flag(tmp_path: Path, fixture: Path) -> None:
    assert not [n for n in imported(tmp_path, fixture).notes if "implausible" in n]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"mean_ttft_ms": 0.4}, "TTFT 0.400 ms is below 1 ms"),
        ({"mean_ttft_ms": 0.06}, "prefill 3,333,333 tok/s per request is above 1,000,000"),
        ({"output_throughput": 600.0}, "aggregate 600.0 tok/s is 4.2x concurrency x"),
    ],
)
def test_each_implausible_value_names_its_reason(
    tmp_path: Path, changes: dict[str, float], reason: str
) -> None:
    doc = json.loads(VLLM_8B.read_text()) | {"max_concurrency": 4} | changes
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    flags = [n for n in imported(tmp_path, path).notes if "implausible" in n]
    assert any(f"prompt 200 x concurrency 4 ({path}): implausible: {reason}" in f for f in flags)
