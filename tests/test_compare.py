"""Profile comparison: the 4-Spark seed's own before/after tables (its section 6) come out of
``compare(4x-spark-dsv41-flash-1015, 4x-spark-dsv41-flash-1017)`` cell by cell."""

from __future__ import annotations

import html
import math
import re

import pytest

from sparktop.sweep.compare.compare import FIGURES, Verdict, compare, pair_cells
from sparktop.sweep.compare.compare_noise import NOISE_FLOOR_LN, NoiseBasis, NoiseModel
from sparktop.sweep.compare.compare_summary import summarize
from sparktop.sweep.profiles.loader import load_profile
from tests.conftest import SHARED

OLD = "4x-spark-dsv41-flash-1015"
NEW = "4x-spark-dsv41-flash-1017"
SEED = "003_e79035d918857a43.txt"
SECTION6 = ("aggregate_decode_tps", "decode_tps", "ttft_s", "aggregate_prefill_tps")
"""The four tables of the seed's section 6, in its order, as comparison figure keys."""
ROW_COLUMN = {"aggregate_decode_tps": "aggregate_tps"}

Cells = dict[tuple[str, int], tuple[float, float, int]]


def seed_section6() -> dict[str, Cells]:
    """Section 6 of the 4-Spark seed: figure → (context, concurrency) → (old, new, % change),
    read from the seed's HTML tables (``91.0→55.3 (-39%)``, ``0.47s→1.22s (+160%)``)."""
    text = html.unescape((SHARED / "seeds" / SEED).read_text(encoding="utf-8"))
    part = text[text.index("六、") : text.index("七、")]
    tables = re.findall(r"<table.*?</table>", part, re.S)
    assert len(tables) == len(SECTION6)
    out: dict[str, Cells] = {}
    for key, table in zip(SECTION6, tables, strict=True):
        rows = [
            [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", table, re.S)
        ]
        concurrencies = [int(re.findall(r"\d+", h)[0]) for h in rows[0][1:]]
        cells: Cells = {}
        for row in rows[1:]:
            for conc, cell in zip(concurrencies, row[1:], strict=True):
                m = re.fullmatch(r"([\d,.]+)s?→([\d,.]+)s? \(([+-]\d+)%\)", cell)
                assert m, cell
                old, new = (float(g.replace(",", "")) for g in (m[1], m[2]))
                cells[(row[0], conc)] = (old, new, int(m[3]))
        out[key] = cells
    return out


def seed_pct(change_pct: float) -> int:
    """A % change rounded as the seed rounds it (half away from zero)."""
    return int(math.copysign(math.floor(abs(change_pct) + 0.5), change_pct))


def test_the_old_profile_is_the_seeds_old_side_cell_by_cell() -> None:
    seed = seed_section6()
    old, new = load_profile(OLD), load_profile(NEW)
    assert len(old.rows) == 36 and all(len(cells) == 36 for cells in seed.values())
    for key, cells in seed.items():
        column = ROW_COLUMN.get(key, key)
        for (context, conc), (want_old, want_new, _pct) in cells.items():
            (row,) = [r for r in old.rows if r.context == context and r.concurrency == conc]
            assert getattr(row, column) == want_old, (key, context, conc)
            (now,) = [r for r in new.rows if r.context == context and r.concurrency == conc]
            shown = round(getattr(now, column), 0 if want_new.is_integer() else 2)
            assert shown == pytest.approx(want_new), (key, context, conc)  # NEW is the built-in
    assert SEED in old.source and "section 6" in old.source
    assert old.kv_pool_tokens == 12_715_913 and new.kv_pool_tokens == 11_434_628
    assert old.derived_columns == ("prefill_tps",)


def test_the_comparison_reproduces_every_change_of_section_6() -> None:
    seed = seed_section6()
    comparison = compare(load_profile(OLD), load_profile(NEW))
    figures = {f.figure.key: f for f in comparison.figures}
    checked = 0
    for key, cells in seed.items():
        got = {(c.label, c.concurrency): c for c in figures[key].cells}
        assert set(got) == set(cells), key
        for where, (old, _new, pct) in cells.items():
            assert got[where].old == old
            assert seed_pct(got[where].change_pct) == pct, (key, where, got[where].change_pct)
            checked += 1
    assert checked == 4 * 36
    by = {k: {(c.label, c.concurrency): c for c in f.cells} for k, f in figures.items()}
    spot = by["aggregate_decode_tps"][("8K", 8)]
    assert (spot.old, spot.new, round(spot.change_pct)) == (268.7, 403.2, 50)
    spot = by["ttft_s"][("1K", 1)]
    assert (spot.old, spot.new, round(spot.change_pct)) == (0.47, 1.22, 160)
    assert spot.verdict is Verdict.WORSE
    spot = by["aggregate_prefill_tps"][("1K", 1)]
    assert (spot.old, round(spot.new), round(spot.change_pct)) == (2363, 821, -65)
    limits = {lim.name: lim for lim in comparison.limits}
    assert (limits["kv_pool_tokens"].old, limits["kv_pool_tokens"].new) == (12_715_913, 11_434_628)
    assert limits["kv_pool_tokens"].changed and not limits["output_tokens"].changed
    assert limits["max_num_seqs"].old is None and limits["max_num_seqs"].new == 8
    assert "derived" in figures["prefill_tps"].skipped and not figures["prefill_tps"].cells
    assert "decode-only" in figures["aggregate_e2e_tps"].skipped
    assert comparison.only_old == comparison.only_new == ()
    assert comparison.paired_by.startswith("nominal context")


def test_the_summary_reads_as_the_seeds_conclusions() -> None:
    """Section 6's headings: aggregate decode wins at concurrency >= 2 and loses at 1;
    aggregate prefill is the one figure worse overall; TTFT better only for long prompts."""
    summary = summarize(compare(load_profile(OLD), load_profile(NEW)))
    figures = {f.key: f for f in summary.figures}
    assert (summary.short_max_prompt, summary.low_max_concurrency) == (14_963, 1)
    prefill = figures["aggregate_prefill_tps"]
    assert prefill.better == 0 and prefill.worse > 0
    regions = {(f.key, r.name): r.verdict for f in summary.figures for r in f.regions}
    assert regions[("aggregate_decode_tps", "prompts ≤ 16K × concurrency ≥ 2")] == "better"
    assert regions[("aggregate_decode_tps", "prompts ≤ 16K × concurrency 1")] == "worse"
    assert regions[("ttft_s", "prompts ≤ 16K × concurrency 1")] == "worse"
    assert regions[("ttft_s", "prompts ≥ 32K × concurrency ≥ 2")] == "better"
    wins = {(f.key, r.name) for f, r in summary.wins()}
    assert not any(key == "aggregate_prefill_tps" for key, _ in wins)


def test_profiles_without_context_labels_pair_by_prompt_within_10_percent() -> None:
    two, four = load_profile("2x-spark-dsv4-flash-0731"), load_profile(NEW)
    pairs, only_old, only_new, how = pair_cells(two, four)
    assert "10%" in how
    got = sorted((a.prompt_tokens, b.prompt_tokens, a.concurrency) for a, b in pairs)
    assert (8192, 7513, 1) in got and (131072, 124759, 2) in got
    assert all(abs(math.log(a / b)) <= math.log(1.1) for a, b, _ in got)
    assert not any(p == 256 for p, _, _ in got)  # 256 tokens has no 4-Spark counterpart
    assert len(pairs) + len(only_old) == len(two.rows)
    assert len(pairs) + len(only_new) == len(four.rows)
    comparison = compare(two, four)
    figures = {f.figure.key: f for f in comparison.figures}
    assert "end-to-end" in figures["aggregate_decode_tps"].skipped
    assert "decode-only" in figures["aggregate_e2e_tps"].skipped
    assert figures["prefill_tps"].cells and figures["ttft_s"].cells
    assert "256 × 1" in comparison.only_old and "1K × 8" in comparison.only_new
    assert any("end-to-end" in n and "decode-only" in n for n in comparison.notes)


def test_noise_from_runs_beats_the_band_and_the_rule_is_the_sum_of_both_sides() -> None:
    old, new = load_profile(OLD), load_profile(NEW)
    row = new.column(1)[0]  # 1K x 1
    runs = {
        (1024, 1): {"ttft_s": (1.0, 1.1, 1.3), "decode_tps": (55.0,)},
        (4096, 1): {"ttft_s": (2.0, 2.02, 2.04)},
        (8192, 1): {"ttft_s": (3.0, 3.3)},
    }
    model = NoiseModel(new, runs, "x.runs.jsonl")
    spread = model.noise("ttft_s", row.prompt_tokens, 1, 1024)
    assert spread.basis is NoiseBasis.RUNS and spread.runs == 3
    assert spread.ln == pytest.approx(math.log(1.3 / 1.0))  # its own range: the widest
    steadied = model.noise("ttft_s", 3800, 1, 4096)  # a narrow range: the sweep's median one
    assert steadied.ln == pytest.approx(math.log(3.3 / 3.0)) and steadied.runs == 3
    one_run = model.noise("decode_tps", row.prompt_tokens, 1, 1024)  # one run: no spread
    assert one_run.basis is NoiseBasis.BAND and one_run.ln > NOISE_FLOOR_LN
    assert "run-to-run spread (x.runs.jsonl, up to 3 runs" in model.source
    comparison = compare(old, new, new_noise=model)
    (ttft,) = [f for f in comparison.figures if f.figure.key == "ttft_s"]
    first = ttft.cells[0]
    assert first.basis == "band+runs"
    threshold = first.old_noise.ln + first.new_noise.ln
    assert first.noise_pct == pytest.approx(math.expm1(threshold) * 100)  # a rise
    fall = next(c for c in ttft.cells if c.new < c.old)
    assert fall.noise_pct == pytest.approx(-math.expm1(-fall.threshold_ln) * 100)
    for cell in ttft.cells:
        real = abs(math.log(cell.new / cell.old)) > cell.old_noise.ln + cell.new_noise.ln
        assert (cell.verdict is not Verdict.NOISE) == real
        if real:
            assert (cell.verdict is Verdict.WORSE) == (cell.new > cell.old)  # TTFT: lower wins


def test_a_profile_compared_with_itself_changes_nothing() -> None:
    profile = load_profile(NEW)
    comparison = compare(profile, profile)
    assert [f.figure for f in comparison.figures] == list(FIGURES)
    cells = [c for f in comparison.figures for c in f.cells]
    assert len(cells) == 5 * 36  # every figure but the end-to-end aggregate it lacks
    assert all(c.change_pct == 0 and c.verdict is Verdict.NOISE for c in cells)
    assert comparison.regressions(0) == ()
    assert not summarize(comparison).wins() and not summarize(comparison).losses()
