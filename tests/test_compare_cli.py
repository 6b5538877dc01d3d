"""``sparktop profiles --compare OLD NEW``: the text, the JSON, and every exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.commands.profiles_compare import REGRESSED
from sparktop.report.compare_text import SCHEMA
from tests.test_compare import NEW, OLD, seed_section6

COMPARE = ["profiles", "--compare", OLD, NEW]


def test_the_text_shows_the_seeds_cells_limits_and_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(COMPARE) == 0
    out = capsys.readouterr().out
    assert "268.7→403.2 +50%" in out  # aggregate decode 8K x 8
    assert "0.47→1.22 +160%" in out  # TTFT 1K x 1
    assert "2,363→821 -65%" in out  # aggregate prefill 1K x 1
    assert "134.9→135.1 +0%~" in out  # 256K x 2: within the noise
    assert "kv_pool_tokens          12,715,913 → 11,434,628  (-10%)" in out
    assert "max_num_seqs            OLD not stated" in out
    assert "prefill per request: not compared: OLD's prefill_tps is derived" in out
    assert "aggregate end-to-end: not compared" in out
    assert "noise basis: band" in out and "estimator band (no runs kept)" in out
    assert "NEW wins:" in out and "NEW loses:" in out
    assert "aggregate prefill      better in 0 of 36 cells" in out
    seed = seed_section6()
    for old, new, pct in seed["aggregate_decode_tps"].values():
        assert f"{old:.1f}→{new:.1f} {pct:+d}%" in out


def test_json_has_every_cell_and_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*COMPARE, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == SCHEMA
    assert doc["old"]["name"] == OLD and doc["new"]["noise"].startswith("estimator band")
    figures = {f["key"]: f for f in doc["figures"]}
    assert not figures["prefill_tps"]["compared"] and figures["prefill_tps"]["cells"] == []
    cells = {(c["label"], c["concurrency"]): c for c in figures["ttft_s"]["cells"]}
    cell = cells[("1K", 1)]
    assert (cell["old"], cell["new"], cell["verdict"]) == (0.47, 1.22, "worse")
    assert cell["old_noise"]["basis"] == "band" and cell["noise_pct"] > 0
    assert doc["fail_on_regression"] is None
    pool = next(lim for lim in doc["limits"] if lim["name"] == "kv_pool_tokens")
    assert (pool["old"], pool["new"], pool["changed"]) == (12_715_913, 11_434_628, True)
    regions = doc["summary"]["figures"][0]["regions"]
    assert {"name", "verdict", "median_change_pct", "better", "worse"} <= set(regions[0])


def test_fail_on_regression_exits_3_beyond_pct_and_noise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Exit 3: the 1017 version's aggregate prefill at 1K x 1 fell 65 % (beyond its band)."""
    assert main([*COMPARE, "--fail-on-regression", "50"]) == REGRESSED == 3
    out = capsys.readouterr().out
    assert "regressed by more than 50% beyond the noise" in out
    assert "aggregate prefill 1K × 1: 2,363→821 -65%" in out
    assert main([*COMPARE, "--fail-on-regression", "50%", "--json"]) == 3
    gate = json.loads(capsys.readouterr().out)["fail_on_regression"]
    assert gate["regressed"] and gate["pct"] == 50
    assert all(abs(c["change_pct"]) > 50 and c["verdict"] == "worse" for c in gate["cells"])
    assert {c["figure"] for c in gate["cells"]} >= {"ttft_s", "aggregate_prefill_tps"}


def test_fail_on_regression_exits_0_when_nothing_regressed_that_far(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*COMPARE, "--fail-on-regression", "200"]) == 0
    assert "no figure regressed by more than 200% beyond the noise" in capsys.readouterr().out
    assert main(["profiles", "--compare", NEW, NEW, "--fail-on-regression", "0"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*COMPARE, "--fail-on-regression", "lots"], "'lots' is not a percentage"),
        ([*COMPARE, "--fail-on-regression", "-5"], "must be 0 or more"),
        (["profiles", "--fail-on-regression", "5"], "--fail-on-regression needs --compare"),
        (["profiles", NEW, "--compare", OLD, NEW], "takes its two profiles alone"),
        (["profiles", "--compare", OLD, "nosuch"], "unknown profile 'nosuch'"),
    ],
)
def test_mistakes_exit_2_in_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.count("\n") == 1


def test_one_profile_given_to_compare_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["profiles", "--compare", OLD])
    assert exc.value.code == 2
    assert "--compare: expected 2 arguments" in capsys.readouterr().err


def test_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["profiles", "--help"])
    out = capsys.readouterr().out
    assert "\n  3    --compare with --fail-on-regression PCT" in out and "docs/compare.md" in out


def test_the_simulator_refuses_a_profile_without_limits_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The 10-15 profile publishes no max_model_len: ``sim --profile`` says so (exit 2)."""
    argv = ["sim", "--profile", OLD, "--clients", "0", "--write-inventory", str(tmp_path / "i")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "does not state max_model_len; the simulator needs it" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--compare-to", "nosuch"], "unknown profile 'nosuch'"),
        (["--fail-on-regression", "5"], "--fail-on-regression needs --compare-to PROFILE"),
        (["--compare-to", OLD, "--fail-on-regression", "x"], "'x' is not a percentage"),
    ],
)
def test_sweep_compare_mistakes_exit_2_before_anything_is_measured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], message: str
) -> None:
    """A typo in --compare-to must not cost a sweep: refused before the server is asked (the
    endpoint here has no server)."""
    out = tmp_path / "tonight.yaml"
    argv = ["sweep", "--endpoint", "http://127.0.0.1:9", "-o", str(out), "--yes", *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


SMALL = """\
sparktop_profile: 1
name: {name}
source: test
aggregate_kind: end-to-end
columns:
  - {{name: prompt_tokens, meaning: tokens}}
  - {{name: concurrency, meaning: requests}}
  - {{name: ttft_s, meaning: s}}
  - {{name: prefill_tps, meaning: tok/s}}
  - {{name: decode_tps, meaning: tok/s}}
  - {{name: aggregate_tps, meaning: tok/s}}
rows:
{rows}"""


def test_tiny_profiles_have_no_noise_measure_but_the_floor(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two cells give no band: only the 1 % floor per side (basis none); a cell only one side
    has is named, and a concurrency only one side has pairs nothing."""
    old = tmp_path / "old.yaml"
    new = tmp_path / "new.yaml"
    old.write_text(
        SMALL.format(
            name="old", rows="  - [1000, 1, 1.0, 1000, 50, 50]\n  - [4000, 1, 2.0, 2000, 40, 40]\n"
        ),
        encoding="utf-8",
    )
    new.write_text(
        SMALL.format(
            name="new",
            rows="  - [1050, 1, 1.05, 1000, 50.2, 50.2]\n  - [8000, 2, 3.0, 2667, 30, 60]\n",
        ),
        encoding="utf-8",
    )
    assert main(["profiles", "--compare", str(old), str(new), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["paired_by"].startswith("prompt tokens within 10%")
    assert doc["only_old"] == ["4,000 × 1"] and doc["only_new"] == ["8,000 × 2"]
    figures = {f["key"]: f for f in doc["figures"]}
    (ttft,) = figures["ttft_s"]["cells"]
    assert ttft["basis"] == "none" and ttft["verdict"] == "worse"  # +5 % beyond 1 % + 1 %
    (decode,) = figures["decode_tps"]["cells"]
    assert decode["verdict"] == "noise"  # +0.4 %
    assert doc["new"]["noise"].startswith("none")
    assert main(["profiles", "--compare", str(old), str(new), "--fail-on-regression", "4"]) == 3
    text = capsys.readouterr().out
    assert "cells only in OLD: 1: × 1 4,000" in text and "TTFT 1,000 × 1" in text
    (tmp_path / "new.yaml.runs.jsonl").write_text("not json\n", encoding="utf-8")
    assert main(["profiles", "--compare", str(old), str(new)]) == 0
    text = capsys.readouterr().out
    assert "NEW none (runs unusable: " in text and "new.yaml.runs.jsonl:1: not a sparktop" in text


def test_the_example_in_the_docs_is_the_commands_output(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/compare.md shows the 4-Spark comparison; every line it shows (a bracketed line
    marks what it leaves out) is a line of today's output."""
    from tests.conftest import REPO

    doc = (REPO / "docs" / "compare.md").read_text(encoding="utf-8")
    start = doc.index("```text\n") + len("```text\n")
    shown = doc[start : doc.index("```", start)].splitlines()
    assert main([*COMPARE, "--fail-on-regression", "50"]) == 3
    lines = set(capsys.readouterr().out.splitlines())
    kept = [line for line in shown if not line.startswith("[")]
    assert len(kept) > 60
    assert [line for line in kept if line not in lines] == []
