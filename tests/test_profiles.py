"""Sweep profiles: built-ins equal the shared CSVs cell by cell; bad files fail with file:line."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from sparktop.errors import UserError
from sparktop.model import NA
from sparktop.sweep.profiles.builtin import builtin_profile_names
from sparktop.sweep.profiles.loader import load_profile, user_profile_paths
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from tests.conftest import PROFILES, REPO

TWO = "2x-spark-dsv4-flash-0731"
FOUR = "4x-spark-dsv41-flash-1017"
FOUR_OLD = "4x-spark-dsv41-flash-1015"  # the seed's previous version (tests/test_compare.py)

# CSV header -> ProfileRow field
RENAMES = {
    "prefill_tps_per_request": "prefill_tps",
    "decode_tps_per_request": "decode_tps",
    "aggregate_decode_tps": "aggregate_tps",
}


def _csv_rows(name: str) -> list[dict[str, str]]:
    with (PROFILES / f"{name}.sweep.csv").open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(
    "csv_name", ["2x-spark-dsv4-flash-0731.sweep.csv", "4x-spark-dsv41-flash-1017.sweep.csv"]
)
def test_every_cell_equals_the_csv(csv_name: str) -> None:
    name = csv_name.removesuffix(".sweep.csv")
    profile = load_profile(name)
    expected = _csv_rows(name)
    assert len(profile.rows) == len(expected)
    by_key = {(r.prompt_tokens, r.concurrency): r for r in profile.rows}
    for cells in expected:
        row = by_key[(int(cells["prompt_tokens"]), int(cells["concurrency"]))]
        for header, text in cells.items():
            value = getattr(row, RENAMES.get(header, header))
            if header == "context":
                assert value == text
            else:
                assert value == float(text), (header, cells)


def test_generated_files_are_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location("gen_profiles", REPO / "tools/gen_profiles.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for name in (TWO, FOUR):
        csv_text = (PROFILES / f"{name}.sweep.csv").read_text(encoding="utf-8")
        shipped = REPO / "sparktop/sweep/profiles" / f"{name}.yaml"
        assert gen.render(name, csv_text) == shipped.read_text(encoding="utf-8")


def test_builtin_metadata_matches_the_seeds() -> None:
    assert builtin_profile_names() == (TWO, FOUR_OLD, FOUR)
    assert DEFAULT_PROFILE in builtin_profile_names()
    two, four = load_profile(TWO), load_profile(FOUR)
    assert (two.kv_pool_tokens, two.max_model_len, two.max_num_seqs) == (2_493_464, 1_048_576, 6)
    assert two.max_num_batched_tokens == 8192 and two.nodes == 2
    assert two.aggregate_kind == "end-to-end"
    assert isinstance(two.output_tokens, NA)
    assert two.concurrencies == (1, 2, 4, 6)
    (point,) = two.acceptance
    assert (point.prompt_tokens, point.concurrency, point.ttft_s) == (899_994, 1, 1028.85)
    assert point.prefill_tps == 874.8 and isinstance(point.decode_tps, NA)
    assert "000_801184ffa6916669" in two.source
    assert (four.kv_pool_tokens, four.max_num_seqs, four.max_num_batched_tokens) == (
        11_434_628,
        8,
        8192,
    )
    assert four.output_tokens == 128 and four.aggregate_kind == "decode-only"
    assert four.baseline_sm_clock_mhz == (2509, 2522, 2509, 2541)
    assert four.baseline_temperature_c == (53, 56)
    assert "003_e79035d918857a43" in four.source
    assert "decode-only" in four.meaning("aggregate_tps")
    assert four.column(2)[0].context == "1K" and four.column(2)[0].prompt_tokens == 1002


def test_unknown_profile_lists_the_builtins() -> None:
    listed = rf"unknown profile 'nope'; built-in: {TWO}, {FOUR_OLD}, {FOUR}"
    with pytest.raises(UserError, match=listed):
        load_profile("nope")


def _write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """\
sparktop_profile: 1
name: mine
source: my own sweep
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
  - [4000, 1, 1.5, 2666, 48, 40]
"""


def test_user_profile_by_path_and_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, GOOD, "mine.yaml")
    profile = load_profile(str(path))
    assert profile.name == "mine" and profile.origin == str(path)
    assert profile.kv_pool_tokens == 1_000_000 and isinstance(profile.max_model_len, NA)
    assert [r.line for r in profile.rows] == [15, 16]
    monkeypatch.setenv("SPARKTOP_PROFILE_DIR", str(tmp_path))
    assert user_profile_paths() == (path,)
    assert load_profile("mine").rows == profile.rows


BAD = [
    (
        "tab",
        GOOD.replace("  kv_pool_tokens", "\tkv_pool_tokens"),
        r"p\.yaml:6:1: YAML error: found a tab character",
    ),
    (
        "typo key",
        GOOD.replace("kv_pool_tokens", "kv_pol_tokens"),
        r"p\.yaml:6: limits\.kv_pol_tokens: unknown key 'kv_pol_tokens' "
        r"\(did you mean 'kv_pool_tokens'\?\)",
    ),
    (
        "missing key",
        GOOD.replace("source: my own sweep\n", ""),
        r"p\.yaml:1: missing required key 'source'$",
    ),
    (
        "only a name",  # every missing key named (they are few), not "(and 4 more)"
        "name: x\n",
        r"p\.yaml:1: missing required keys 'sparktop_profile', 'source', 'aggregate_kind', "
        r"'columns', 'rows'$",
    ),
    (
        "short row",
        GOOD.replace("[4000, 1, 1.5, 2666, 48, 40]", "[4000, 1, 1.5, 2666, 48]"),
        r"p\.yaml:16: rows\[1\]: 5 values for 6 columns",
    ),
    (
        "bad cell",
        GOOD.replace("[4000, 1, 1.5,", "[4000, 1, fast,"),
        r"p\.yaml:16: rows\[1\]: column ttft_s: expected a number, got 'fast'",
    ),
    (
        "negative",
        GOOD.replace("[4000, 1, 1.5,", "[4000, -1, 1.5,"),
        r"p\.yaml:16: rows\[1\]: column concurrency: must be > 0",
    ),
    (
        "duplicate row",
        GOOD.replace("[4000, 1, 1.5,", "[1000, 1, 1.5,"),
        r"p\.yaml:16: rows\[1\]: a second row for prompt_tokens 1000 at concurrency 1 "
        r"\(first on line 15\)",
    ),
    (
        "unknown column",
        GOOD.replace("name: ttft_s", "name: ttfts"),
        r"p\.yaml:10: columns\[2\]: unknown column 'ttfts' \(did you mean 'ttft_s'\?\)",
    ),
    (
        "duplicate key",
        GOOD.replace("name: mine\n", "name: mine\nname: other\n"),
        r"p\.yaml:3: duplicate key 'name' \(first at line 2\)",
    ),
    (
        "wrong kind",
        GOOD.replace("end-to-end", "end to end"),
        r"p\.yaml:4: aggregate_kind: Input should be 'end-to-end' or 'decode-only'",
    ),
    ("empty", "", r"p\.yaml:1: empty profile file"),
    ("list", "- 1\n- 2\n", r"p\.yaml:1: a profile must be a YAML mapping"),
]


@pytest.mark.parametrize(("what", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_profile_files_name_the_line(
    tmp_path: Path, what: str, text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(UserError, match=message):
        load_profile(str(path))


def test_unreadable_profile_paths(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        load_profile(str(tmp_path / "absent.yaml"))
    with pytest.raises(UserError, match="is a directory"):
        load_profile(str(tmp_path) + "/")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00name")
    with pytest.raises(UserError, match="not UTF-8"):
        load_profile(str(binary))


# -- import from vllm bench serve ----------------------------------------------------------------


def _bench(concurrency: int | None, prompt: int, **extra: object) -> dict[str, object]:
    """The fields ``vllm bench serve --save-result`` writes that the importer reads."""
    doc: dict[str, object] = {
        "backend": "vllm",
        "model_id": "org/model",
        "max_concurrency": concurrency,
        "duration": 20.0,
        "completed": 8,
        "total_input_tokens": prompt * 8,
        "total_output_tokens": 8 * 256,
        "output_throughput": 102.4,
        "mean_ttft_ms": 500.0,
        "mean_tpot_ms": 20.0,
    }
    doc.update(extra)
    return doc


def test_import_vllm_bench_results(tmp_path: Path) -> None:
    """``vllm bench serve --save-result`` files (one per run, or one per line) through the one
    importer ``profiles --import`` uses (:mod:`sparktop.sweep.profiles.import_formats`)."""
    from sparktop.sweep.profiles.import_formats import import_results

    (tmp_path / "a.json").write_text(json.dumps(_bench(1, 1000)), encoding="utf-8")
    lines = [json.dumps(_bench(2, 1000)), json.dumps(_bench(2, 4000, mean_ttft_ms=2000.0))]
    (tmp_path / "b.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    text = import_results(
        [tmp_path / "a.json", tmp_path / "b.jsonl"], "mine", limits={"kv_pool_tokens": 500_000}
    )
    out = _write(tmp_path, text, "mine.yaml")
    profile = load_profile(str(out))
    assert profile.concurrencies == (1, 2) and profile.output_tokens == 256
    assert profile.kv_pool_tokens == 500_000 and profile.aggregate_kind == "end-to-end"
    row = profile.column(2)[1]
    assert (row.prompt_tokens, row.ttft_s, row.prefill_tps) == (4000, 2.0, 2000.0)
    assert (row.decode_tps, row.aggregate_tps, row.wall_s) == (50.0, 102.4, 20.0)


def test_import_rejects_incomplete_results(tmp_path: Path) -> None:
    from sparktop.sweep.profiles.import_formats import import_results

    (tmp_path / "a.json").write_text(json.dumps(_bench(1, 1000, mean_tpot_ms=None)))
    with pytest.raises(UserError, match=r"a\.json: .*mean_tpot_ms"):
        import_results([tmp_path / "a.json"], "x", limits={})
