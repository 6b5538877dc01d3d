"""The context budget: pure computation, JSON shape, and the two commands end to end."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.model import NA, EngineSample, EngineState
from sparktop.report.budget_json import to_json
from sparktop.report.budget_text import render_text
from sparktop.sweep.budget.budget import Origin, compute_budget
from sparktop.sweep.budget.ceiling import Verdict
from sparktop.sweep.estimator.estimator import Basis
from sparktop.sweep.profiles.loader import load_profile
from sparktop.testing.http_stub import serve_threaded
from tests.conftest import PROFILES

TWO = "2x-spark-dsv4-flash-0731"
FOUR = "4x-spark-dsv41-flash-1017"


def test_the_2048_by_6_cliff() -> None:
    b = compute_budget(2048, 6, load_profile(TWO))
    t = b.timing
    assert (t.ttft_s.value, t.prefill_tps.value, t.decode_tps.value) == (6.06, 342, 34.7)
    assert t.aggregate_tps.value == 143.7 and t.ttft_s.basis is Basis.EXACT
    assert b.batched.batched_tokens.value == 12_288 and b.batched.over_limit is True
    assert b.batched.max_concurrency_in_one_batch.value == 4
    assert b.batched.prefill_chunks.value == 1
    assert b.kv.fits and b.kv.total_tokens.value == 6 * (2048 + 2048)
    assert b.ceiling.rejected is False and b.ceiling.over_by_tokens.value == 0
    assert t.total_s.value == pytest.approx(6.06 + 2048 / 34.7)
    assert b.kv.pool_tokens.origin is Origin.PROFILE
    assert b.batched.batched_tokens.origin is Origin.COMPUTED


def test_the_900k_acceptance_point() -> None:
    b = compute_budget(899_994, 1, load_profile(TWO))
    assert b.timing.ttft_s.value == 1028.85 and b.timing.ttft_s.basis is Basis.EXACT
    assert isinstance(b.timing.decode_tps.value, NA)
    assert isinstance(b.timing.aggregate_tps.value, NA)
    assert isinstance(b.timing.total_s.value, NA)
    assert b.batched.prefill_chunks.value == 110  # ceil(899,994 / 8,192)
    assert b.batched.max_concurrency_in_one_batch.value == NA(
        "one prompt alone exceeds the limit: chunked prefill at any concurrency"
    )
    assert b.kv.max_concurrency_by_pool.value == 2  # 2,493,464 // 902,042


def test_over_the_ceiling_without_a_server_gives_both_answers_and_what_to_lower() -> None:
    b = compute_budget(1_048_000, 1, load_profile(TWO), output_tokens=2048)
    assert b.ceiling.rejected is None and b.ceiling.verdict is Verdict.DEPENDS
    assert b.ceiling.over_by_tokens.value == 1_048_000 + 2048 - 1_048_576
    assert b.ceiling.max_prompt_tokens.value == 1_048_576 - 2048
    assert b.ceiling.served_output_tokens == 576  # what vLLM >= 0.32 leaves it
    assert "lower the output to ≤ 576 tokens" in b.ceiling.advice
    assert "vLLM < 0.32 refuses" in b.ceiling.why and "576 tokens" in b.ceiling.why
    assert any("version is not known" in w for w in b.warnings)


def test_kv_pool_does_not_fit_three_near_1m_requests() -> None:
    b = compute_budget(1_000_000, 3, load_profile(TWO), output_tokens=0)
    assert b.kv.fits is False and b.kv.total_tokens.value == 3_000_000
    assert b.kv.pool_used_pct.value == pytest.approx(3_000_000 / 2_493_464 * 100)


def test_overrides_beat_the_profile_and_say_so() -> None:
    b = compute_budget(4096, 2, load_profile(FOUR), 128, kv_pool_tokens=10_000, max_model_len=8000)
    assert b.kv.pool_tokens == dataclasses.replace(b.kv.pool_tokens, value=10_000)
    assert b.kv.pool_tokens.origin is Origin.GIVEN and b.kv.fits is True
    assert b.ceiling.max_model_len.origin is Origin.GIVEN and b.ceiling.rejected is False
    assert b.output_origin is Origin.GIVEN


def test_live_sample_gives_the_free_part_of_the_pool() -> None:
    live = EngineSample(
        "http://x:8000",
        0.0,
        kv_pool_tokens=2_000_000,
        kv_pool_source="cache_config_info",
        kv_free_tokens=10_000,
        max_model_len=65_536,
    )
    b = compute_budget(8000, 2, load_profile(TWO), 0, live=live)
    assert b.kv.free_tokens_now.value == 10_000 and b.kv.free_tokens_now.origin is Origin.SERVER
    assert b.kv.fits_now is False and b.kv.free_used_pct.value == pytest.approx(160.0)
    assert b.kv.pool_tokens.value == 2_000_000 and b.kv.pool_tokens.origin is Origin.SERVER
    assert b.ceiling.max_model_len.value == 65_536


def test_a_pool_the_scrape_took_from_the_inventory_is_not_the_servers() -> None:
    live = EngineSample("e", 0.0, kv_pool_tokens=5, kv_pool_source="inventory", kv_free_tokens=5)
    b = compute_budget(100, 1, load_profile(TWO), live=live)
    assert b.kv.pool_tokens.origin is Origin.PROFILE


def test_unreachable_live_sample_is_marked_no_data() -> None:
    live = EngineSample("http://10.0.0.9:8000", 0.0, EngineState.UNREACHABLE, "connection refused")
    b = compute_budget(1000, 1, load_profile(TWO), live=live)
    reason = getattr(b.kv.free_tokens_now.value, "reason", "")
    assert reason == "endpoint http://10.0.0.9:8000 unreachable: connection refused"
    assert b.kv.fits_now is None and b.kv.pool_tokens.origin is Origin.PROFILE


def test_a_profile_without_limits_says_which_flag_to_pass() -> None:
    bare = dataclasses.replace(
        load_profile(TWO),
        kv_pool_tokens=NA("x"),
        max_model_len=NA("x"),
        max_num_batched_tokens=NA("x"),
    )
    b = compute_budget(1000, 1, bare)
    assert "--kv-pool" in getattr(b.kv.pool_tokens.value, "reason", "")
    assert b.kv.fits is None and b.ceiling.rejected is None and b.batched.over_limit is None
    assert "--max-model-len" in getattr(b.ceiling.max_model_len.value, "reason", "")
    json.dumps(to_json(b))
    render_text(b)


def test_concurrency_above_max_num_seqs_warns_and_has_no_data() -> None:
    b = compute_budget(2048, 8, load_profile(TWO))
    assert any("max_num_seqs 6" in w for w in b.warnings)
    assert isinstance(b.timing.ttft_s.value, NA)
    assert "no data (concurrency 8 is outside the measured columns" in render_text(b)


def test_invalid_numbers_are_refused() -> None:
    with pytest.raises(ValueError):
        compute_budget(0, 1, load_profile(TWO))
    with pytest.raises(ValueError):
        compute_budget(10, 0, load_profile(TWO))


JSON_KEYS = {
    "schema",
    "profile",
    "tokens",
    "concurrency",
    "concurrency_origin",
    "output_tokens",
    "ceiling",
    "kv",
    "batched",
    "send_now",
    "lesson",
    "time",
    "warnings",
    "not_accounted_for",
}


def test_json_shape_is_stable_and_plain() -> None:
    doc = to_json(compute_budget(899_994, 1, load_profile(TWO)))
    assert set(doc) == JSON_KEYS and doc["schema"] == "sparktop.budget/1"
    assert doc["time"]["ttft_s"] == {
        "value": 1028.85,
        "low": 1028.85,
        "high": 1028.85,
        "origin": "from the profile",
        "basis": "exact",
        "how": "exact: the acceptance point (899,994 tokens × 1)",
        "reason": None,
        "band_reason": None,
    }
    fitted = to_json(compute_budget(500_000, 1, load_profile(TWO)))["time"]["ttft_s"]
    assert fitted["basis"] == "fitted" and fitted["low"] < fitted["value"] < fitted["high"]
    assert doc["time"]["decode_tps"]["value"] is None
    assert doc["time"]["decode_tps"]["low"] is None and doc["time"]["decode_tps"]["high"] is None
    assert doc["time"]["decode_tps"]["basis"] == "no data"
    assert set(doc["kv"]) == {
        "pool_tokens",
        "total_tokens",
        "pool_used_pct",
        "fits",
        "max_concurrency_by_pool",
        "max_num_seqs",
        "free_tokens_now",
        "free_used_pct",
        "fits_now",
    }
    assert json.loads(json.dumps(doc)) == doc


# -- the commands --------------------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_done_when_2048_by_6(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "budget", "--prompt-tokens", "2048", "--concurrency", "6", "--profile", TWO
    )
    assert code == 0
    assert "TTFT                      6.06 s · exact" in out
    assert "342 tok/s · exact" in out and "34.7 tok/s · exact" in out
    assert "143.7 tok/s · exact" in out and "exact row (2,048 tokens × 6)" in out
    assert "12,288 > 8,192" in out and "keep concurrency ≤ 4" in out


def test_done_when_899994(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "budget", "--prompt-tokens", "899994", "--profile", TWO)
    assert code == 0
    assert "1,028.85 s (17m 09s) · exact" in out
    assert "decode / request          no data (" in out
    assert "aggregate (end-to-end)    no data (" in out


def test_budget_json_from_the_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("中文" * 5 + "x" * 40, encoding="utf-8")
    code, out, _ = _run(capsys, "budget", "--scan-dir", str(tmp_path), "--ext", "md", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["tokens"]["prompt_tokens"] == 20
    assert (doc["tokens"]["cjk_chars"], doc["tokens"]["other_chars"]) == (10, 40)
    assert doc["tokens"]["files_counted"] == 1 and doc["profile"]["name"] == FOUR


def test_scan_dir_skipped_counts_carry_thousands_separators(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a.md").write_text("some text " * 10, encoding="utf-8")
    for i in range(1_001):
        (tmp_path / f"b{i}.md").write_bytes(b"\x00binary")
    code, out, _ = _run(capsys, "budget", "--scan-dir", str(tmp_path), "--ext", "md")
    assert code == 0
    assert "1 counted, 1,001 skipped (1,001 binary or not UTF-8)" in out, out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prompt-tokens", "-5"], "--prompt-tokens must be at least 1, got -5"),
        (["--prompt-tokens", "10", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["--scan-dir", "/nonexistent/dir"], "directory /nonexistent/dir not found"),
        (["--file", "/nonexistent/file.txt"], "file /nonexistent/file.txt not found"),
        (["--file", "/"], "/ is a directory; use --scan-dir"),
        (["--prompt-tokens", "10", "--profile", "nope"], "unknown profile 'nope'; built-in:"),
        (["--prompt-tokens", "10", "--chars-per-token", "0"], "--chars-per-token must be > 0"),
        (["--prompt-tokens", "10", "--endpoint", "localhost:8000"], "--endpoint must be an http"),
        (["--prompt-tokens", "9" * 23], "--prompt-tokens must be at most 1,000,000,000,000"),
        (["--scan-dir", ".", "--max-file-mb", "1e6"], "--max-file-mb must be at most 4,096"),
    ],
)
def test_bad_input_is_one_clean_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "budget", *argv)
    assert code == 2 and out == ""
    assert err.startswith("sparktop: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["budget", "--prompt-tokens", "1e9"], ["--bogus"], ["budget"], ["--interval", "x"]],
)
def test_usage_mistakes_are_one_line_too(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.startswith("sparktop") and " error: " in err and "--help" in err
    assert err.count("\n") == 1 and "usage:" not in err


def test_a_binary_file_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\xff\x00")
    code, _, err = _run(capsys, "budget", "--file", str(tmp_path / "blob.bin"))
    assert code == 2 and "contains NUL bytes (binary)" in err and err.count("\n") == 1


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_endpoint_down_is_marked_no_data_warned_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    (tmp_path / "p.txt").write_text("word " * 400, encoding="utf-8")
    code, out, err = _run(
        capsys, "budget", "--file", str(tmp_path / "p.txt"), "--endpoint", url, "--json"
    )
    doc = json.loads(out)  # the budget is still printed, from the profile and the estimate
    assert code == 1
    assert err == (
        f"sparktop: warning: endpoint {url} unreachable (connection refused): "
        "free KV and exact token count are not available (the KV check had no pool: give "
        "yours with --kv-pool T)\n"
    )
    assert doc["tokens"]["method"] == "estimated" and doc["tokens"]["prompt_tokens"] == 500
    assert "exact count unavailable (endpoint" in doc["tokens"]["note"]
    free = doc["kv"]["free_tokens_now"]
    assert free["value"] is None and free["reason"].startswith(f"endpoint {url} unreachable")


def test_endpoint_down_with_a_given_count_misses_only_the_free_kv(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, out, err = _run(capsys, "budget", "--prompt-tokens", "4000", "--endpoint", url)
    assert code == 1 and "TTFT" in out and "free now" in out
    assert err == (
        f"sparktop: warning: endpoint {url} unreachable (connection refused): "
        "free KV is not available (the KV check had no pool: give yours with --kv-pool T)\n"
    )


def test_stdin_is_estimated_when_the_endpoint_is_down(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"abcd" * 100)))
    code, out, err = _run(capsys, "budget", "--file", "-", "--endpoint", url, "--json")
    doc = json.loads(out)
    assert code == 1 and "free KV and exact token count are not available" in err
    assert doc["tokens"]["method"] == "estimated" and doc["tokens"]["prompt_tokens"] == 100


def test_exit_codes_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["budget", "--help"])
    out = capsys.readouterr().out
    status = out[out.index("exit status:") :]
    assert "\n  0    " in status and "\n  1    --endpoint was given" in status
    assert "\n  2    a bad option" in status


def test_a_fifo_is_refused_not_read(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Nothing writes to the FIFO: reading it would block forever (tests/test_tokens.py has
    the guarded version of this, and the directory scan)."""
    os.mkfifo(tmp_path / "pipe")
    code, out, err = _run(capsys, "budget", "--file", str(tmp_path / "pipe"))
    assert code == 2 and out == ""
    assert err == (
        f"sparktop: error: {tmp_path / 'pipe'} is a FIFO, not a regular file; to count what a "
        "pipe carries, send it to standard input: --file -\n"
    )


PAGE = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="256",engine="0",kv_cache_size_tokens="2493464"} 1.0
"""


class _Server(BaseHTTPRequestHandler):
    def _send(self, body: str, ctype: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(PAGE, "text/plain; version=0.0.4")
        elif self.path == "/v1/models":
            models = {"data": [{"id": "m", "parent": None, "max_model_len": 131072}]}
            self._send(json.dumps(models), "application/json")
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        count = len(body["prompt"].split())
        self._send(json.dumps({"count": count, "max_model_len": 131072}), "application/json")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def engine_url() -> Iterator[str]:
    with serve_threaded(_Server) as url:
        yield url


def test_live_endpoint_counts_exactly_and_reads_the_free_pool(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, engine_url: str
) -> None:
    (tmp_path / "p.txt").write_text("word " * 400, encoding="utf-8")
    argv = ["budget", "--file", str(tmp_path / "p.txt"), "--endpoint", engine_url, "--json"]
    code, out, _ = _run(capsys, *argv)
    doc = json.loads(out)
    assert code == 0 and doc["tokens"]["method"] == "exact (/tokenize)"
    assert doc["tokens"]["prompt_tokens"] == 400
    assert doc["kv"]["free_tokens_now"] == {
        "value": 1_870_098,  # 2,493,464 × (1 − 0.25)
        "origin": "from the server",
        "reason": None,
    }
    assert doc["ceiling"]["max_model_len"]["value"] == 131072
    assert doc["ceiling"]["max_model_len"]["origin"] == "from the server"


def test_an_endpoint_that_answers_without_metrics_is_warned_about(
    capsys: pytest.CaptureFixture[str], engine_url: str
) -> None:
    url = engine_url + "/nothing-here"  # /nothing-here/metrics: 404
    code, _, err = _run(capsys, "budget", "--prompt-tokens", "4000", "--endpoint", url)
    assert code == 1 and err.count("\n") == 1
    assert err == (
        f"sparktop: warning: endpoint {url} accepts connections but gave no usable metrics "
        "(metrics disabled: GET /metrics returned 404 (vLLM always serves it: is the URL the "
        "server's base URL?)): free KV is not available (the KV check had no pool: give "
        "yours with --kv-pool T)\n"
    )
    code, _, err = _run(
        capsys, "budget", "--prompt-tokens", "4000", "--endpoint", url, "--kv-pool", "900000"
    )
    assert code == 1 and err.endswith("free KV is not available\n")  # the pool was given


# -- sparktop profiles ---------------------------------------------------------------------------


def test_profiles_lists_builtins_and_user_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken.yaml").write_text("name: [", encoding="utf-8")
    monkeypatch.setenv("SPARKTOP_PROFILE_DIR", str(tmp_path))
    code, out, _ = _run(capsys, "profiles")
    assert code == 0
    assert f"{TWO}   built-in  18 rows, prompt 256–131,072, concurrency 1/2/4/6" in out
    assert f"{FOUR}  built-in  36 rows" in out and "(default)" in out
    assert "broken" in out and "invalid:" in out and "broken.yaml:1:" in out


def test_profiles_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "profiles", TWO)
    assert code == 0
    assert "    2,048     6    6.06      342    34.7      143.7" in out
    assert "acceptance point: 899,994 tokens x 1: TTFT 1,028.85 s" in out


@pytest.mark.parametrize("name", [TWO, FOUR])
def test_profiles_json_rows_equal_the_csv(capsys: pytest.CaptureFixture[str], name: str) -> None:
    import csv

    code, out, _ = _run(capsys, "profiles", name, "--json")
    rows = {(r["prompt_tokens"], r["concurrency"]): r for r in json.loads(out)["rows"]}
    with (PROFILES / f"{name}.sweep.csv").open(encoding="utf-8") as fh:
        expected = list(csv.DictReader(fh))
    assert code == 0 and len(rows) == len(expected)
    for cells in expected:
        row = rows[(int(cells["prompt_tokens"]), int(cells["concurrency"]))]
        assert row["ttft_s"] == float(cells["ttft_s"])
        agg = cells.get("aggregate_tps") or cells["aggregate_decode_tps"]
        assert row["aggregate_tps"] == float(agg)


def test_profiles_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "profiles", "nope")
    assert code == 2 and "unknown profile 'nope'" in err


def test_profiles_import_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = {
        "max_concurrency": 1,
        "duration": 5.0,
        "completed": 2,
        "total_input_tokens": 4000,
        "total_output_tokens": 256,
        "output_throughput": 51.2,
        "mean_ttft_ms": 800.0,
        "mean_tpot_ms": 25.0,
    }
    (tmp_path / "r.json").write_text(json.dumps(doc), encoding="utf-8")
    out_file = tmp_path / "mine.yaml"
    argv = ["profiles", "--import", str(tmp_path / "r.json"), "--name", "mine"]
    code, _, err = _run(capsys, *argv, "-o", str(out_file))
    assert code == 0 and "wrote" in err
    code, out, _ = _run(capsys, "budget", "--prompt-tokens", "2000", "--profile", str(out_file))
    assert code == 0 and "0.80 s · exact" in out and "40 tok/s · exact" in out
    code, _, err = _run(capsys, *argv, "-o", str(out_file))
    assert code == 2 and "exists; not overwriting" in err
    code, _, err = _run(capsys, "profiles", "--import", str(tmp_path / "r.json"))
    assert code == 2 and "--import needs --name" in err


def test_budget_counts_a_short_prompt_from_stdin() -> None:
    """``echo hi | sparktop budget --file -`` counts 1 token (the estimate rounded down to
    0 and was refused as "no text to count")."""
    import json as _json
    import subprocess as _subprocess
    import sys as _sys

    done = _subprocess.run(
        [_sys.executable, "-m", "sparktop", "budget", "--file", "-", "--json"],
        input=b"hi\n", capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    doc = _json.loads(done.stdout)
    assert doc["tokens"]["prompt_tokens"] == 1 and doc["tokens"]["source"] == "-"
    empty = _subprocess.run(
        [_sys.executable, "-m", "sparktop", "budget", "--file", "-"],
        input=b"", capture_output=True, timeout=60,
    )  # fmt: skip
    assert empty.returncode == 2 and b"no text to count" in empty.stderr


ONE_ROW = """\
sparktop_profile: 1
name: one
source: one measured point
aggregate_kind: end-to-end
limits:
  kv_pool_tokens: 1000000
columns:
  - {name: prompt_tokens, meaning: prompt tokens}
  - {name: concurrency, meaning: requests}
  - {name: ttft_s, meaning: s}
  - {name: prefill_tps, meaning: tok/s}
  - {name: decode_tps, meaning: tok/s}
  - {name: aggregate_tps, meaning: tok/s}
rows:
  - [1000, 1, 0.5, 2000, 50, 45]
"""


def test_a_one_row_profile_says_why_it_has_no_band(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(ONE_ROW)
    argv = ("budget", "--prompt-tokens", "1500", "--profile", str(path))
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    ttft = next(line for line in out.splitlines() if "TTFT" in line)
    assert ttft.endswith("0.50 s · extrapolated; one cell gives no band: nothing to hold out")
    code, out, _ = _run(capsys, *argv, "--json")
    figure = json.loads(out)["time"]["ttft_s"]
    assert figure["low"] is None and figure["band_reason"].startswith("one cell gives no band")


@pytest.mark.parametrize(
    ("profile", "cited"),
    [
        (TWO, "(this profile: 2,048 tokens × 4 → × 6: TTFT 1.38 s → 6.06 s)"),
        (
            "4x-spark-dsv41-flash-1017",
            "(this profile: 3,806 tokens × 2 → × 4: TTFT 2.55 s → 4.42 s)",
        ),
    ],
)
def test_the_batching_warning_cites_its_own_profiles_rows(
    capsys: pytest.CaptureFixture[str], profile: str, cited: str
) -> None:
    """The 4-Spark profile's warning cited the 2-Spark sweep's row; each cites its own."""
    argv = ("budget", "--prompt-tokens", "3800", "--concurrency", "4", "--profile", profile)
    code, out, _ = _run(capsys, *argv)
    (line,) = [ln for ln in out.splitlines() if "over the limit" in ln]
    assert code == 0 and line.endswith(f"TTFT steps up {cited}")
    assert ("2-Spark" in line) is False


def test_budget_wording_default_concurrency_plurals_and_one_no_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Concurrency not given is labelled the default; one prefill is "the one prefill"; a
    figure without data says "no data (reason)" once; one file is "1 file"."""
    from sparktop.cli import main as cli_main

    assert cli_main(["budget", "--prompt-tokens", "2000"]) == 0
    out = capsys.readouterr().out
    assert "[default] concurrency" in out and "[given]   concurrency" not in out
    assert "the one prefill fits one batch" in out and "the 1 prefills" not in out
    assert cli_main(["budget", "--prompt-tokens", "2000", "--concurrency", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["concurrency_origin"] == "given"
    assert cli_main(["budget", "--prompt-tokens", "2000000", "--concurrency", "7"]) == 0
    out = capsys.readouterr().out
    assert "decode keeps              no data (2,000,000 tokens" in out
    assert "no data (no data" not in out
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "empty.md").write_text("")
    assert cli_main(["budget", "--scan-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "1 file counted" in err and "1 files" not in err


@pytest.mark.parametrize("json_out", [False, True])
def test_endpoint_credentials_never_reach_the_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, engine_url: str, json_out: bool
) -> None:
    # A basic-auth proxy's user:password in --endpoint is a secret: not in the budget, not in
    # the warning, whether the endpoint answers, is down or is not a URL.
    (tmp_path / "p.txt").write_text("word " * 400, encoding="utf-8")
    live = engine_url.replace("http://", "http://ops:hunter2@")
    down = f"http://ops:hunter2@127.0.0.1:{_closed_port()}"
    for url in (live, live + "/nothing-here", down):
        argv = ["budget", "--file", str(tmp_path / "p.txt"), "--endpoint", url]
        code, out, err = _run(capsys, *argv, *(["--json"] if json_out else []))
        assert code in (0, 1) and out
        assert "hunter2" not in out + err and "ops:" not in out + err
    code, out, err = _run(
        capsys, "budget", "--prompt-tokens", "9", "--endpoint", "ftp://ops:hunter2@x"
    )
    assert code == 2 and "hunter2" not in out + err and "ftp://x" in err


def test_large_counts_in_messages_carry_thousands_separators(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # issue 20 item 17: '10000' beside '1,000' reads as another number
    code, out, _ = _run(capsys, "budget", "--prompt-tokens", "1000", "--concurrency", "10000")
    assert code == 0
    assert "concurrency 10,000 is outside the measured columns" in out
    assert "the 10,000 prefills do not fit one batch" in out
    assert "10000" not in out


def test_an_unread_endpoint_is_not_said_to_export_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A refused port was reported as "not exported by the server": nothing was read from it.
    url = f"http://127.0.0.1:{_closed_port()}"
    code, out, _ = _run(capsys, "budget", "--prompt-tokens", "4000", "--endpoint", url, "--json")
    doc = json.loads(out)
    assert code == 1
    for reason in (
        doc["ceiling"]["max_model_len"]["reason"],
        doc["kv"]["pool_tokens"]["reason"],
        doc["kv"]["max_num_seqs"]["reason"],
    ):
        assert reason.startswith("the server's metrics were not read (unreachable); ")
    assert "not exported" not in out
