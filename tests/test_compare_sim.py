"""The noise rule on real sweeps of the simulator: two sweeps of the same server are not worse
by more than their runs' spread (no cell flagged worse); a server whose decode at concurrency 2 is
slowed by a known factor is flagged there, and nowhere else."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from sparktop.sim.engine import LoadSpec
from sparktop.sim.runner import SimOptions, start_sim
from sparktop.sweep.compare.compare import Verdict, compare
from sparktop.sweep.profiles.loader import load_profile, load_profile_file
from sparktop.sweep.runner.sweep_state import runs_path
from tests.sweep_helpers import idle_sim, run_cli

SPEED = 2.0
SLOWER = 2.0
"""The slowed server decodes 2 × slower at concurrency 2 (every prompt length)."""
GRID = ["--prompts", "1k,4k", "--concurrency", "1,2", "--runs", "3", "--output-tokens", "64"]


def sweep(url: str, out: Path, *extra: str) -> list[str]:
    return ["sweep", "--endpoint", url, "--time-scale", f"{SPEED:g}", "-o", str(out), *GRID,
            "--yes", *extra]  # fmt: skip


def slowed_profile(tmp_path: Path) -> Path:
    """The default profile with per-request decode (and its aggregate) at concurrency 2
    divided by :data:`SLOWER`."""
    builtin = Path(__file__).resolve().parent.parent / "sparktop/sweep/profiles"
    doc = yaml.safe_load((builtin / "4x-spark-dsv41-flash-1017.yaml").read_text("utf-8"))
    names = [c["name"] for c in doc["columns"]]
    conc, decode, aggregate = (
        names.index(n) for n in ("concurrency", "decode_tps", "aggregate_tps")
    )
    for row in doc["rows"]:
        if row[conc] == 2:
            row[decode] = round(row[decode] / SLOWER, 2)
            row[aggregate] = round(row[aggregate] / SLOWER, 2)
    doc["name"] = "slowed"
    path = tmp_path / "slowed-server.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


# Three sweeps, each under a 300 s guard of its own: 175 s in a -n 2 run at load 8-18, so the
# suite-wide 300 s is a hang guard a loaded machine can reach.
@pytest.mark.timeout(900)
async def test_same_server_twice_is_noise_and_a_slowed_decode_is_flagged_where_slowed(
    tmp_path: Path,
) -> None:
    first, second, slow = tmp_path / "first.yaml", tmp_path / "second.yaml", tmp_path / "slow.yaml"
    async with idle_sim(SPEED) as (_sim, url):
        status, _out, err = await run_cli(tmp_path, *sweep(url, first), timeout_s=300)
        assert status == 0, err
        status, same_text, err = await run_cli(
            tmp_path, *sweep(url, second, "--compare-to", str(first), "--fail-on-regression", "0"),
            timeout_s=300,
        )  # fmt: skip
    assert status == 0, same_text + err  # nothing worse beyond the noise, even by 0 %
    assert "no figure regressed by more than 0% beyond the noise" in same_text
    assert f"OLD first  ({first})" in same_text and f"run-to-run spread ({runs_path(first)}" in (
        same_text
    )
    same = compare(load_profile_file(first), load_profile_file(second))
    cells = [(f.figure.key, c) for f in same.figures for c in f.cells]
    assert len(cells) == 6 * 4  # every figure a sweep writes, 2 prompts x 2 concurrencies
    print("\n".join(f"same {k} {c.label}x{c.concurrency}: {c.change_pct:+.1f}% "
                    f"(noise {c.noise_pct:.1f}%)" for k, c in cells))  # fmt: skip
    assert all(c.basis == "runs" for _, c in cells)
    # Nothing worse beyond the noise (what --fail-on-regression gates on). A cell *better*
    # beyond it is possible: the machine's own load can drop between the two sweeps (a CI
    # machine with another worker's tests, at load 30: prefill 4K x 2 +7.6 % vs 6.5 %).
    worse = [(k, c.label, c.concurrency) for k, c in cells if c.verdict is Verdict.WORSE]
    assert worse == []

    sim = await start_sim(
        SimOptions(profile=str(slowed_profile(tmp_path)), speed=SPEED, load=LoadSpec(clients=0))
    )
    try:
        url = sim.http["dsv41"].url
        status, slow_text, err = await run_cli(
            tmp_path, *sweep(url, slow, "--compare-to", str(first), "--fail-on-regression", "20"),
            timeout_s=300,
        )  # fmt: skip
    finally:
        await sim.close()
    assert status == 3, slow_text + err
    assert "regressed by more than 20% beyond the noise" in slow_text
    slowed = compare(load_profile_file(first), load_profile(str(slow)))
    for f in slowed.figures:
        for c in f.cells:
            print(f"slow {f.figure.key} {c.label}x{c.concurrency}: {c.change_pct:+.1f}% "
                  f"(noise {c.noise_pct:.1f}%) {c.verdict}")  # fmt: skip
    cells_by = {(f.figure.key, c.label, c.concurrency): c for f in slowed.figures for c in f.cells}
    flagged = {k: c for k, c in cells_by.items() if c.verdict is not Verdict.NOISE}
    for key in ("decode_tps", "aggregate_decode_tps"):
        for label in ("1K", "4K"):
            cell = cells_by[(key, label, 2)]
            flagged.pop((key, label, 2), None)
            assert math.log(cell.old / cell.new) > math.log(SLOWER) / 2, (key, label)
            if key == "aggregate_decode_tps" and cell.noise_pct > 50:
                # The aggregate decode is timed on the client's clock: a run whose tokens came
                # in one burst (a loaded machine) spreads its runs beyond telling (seen: 99.9 %
                # noise); slower it still is, flagged it need not be.
                continue
            assert cell.verdict is Verdict.WORSE, (key, label, cell.noise_pct)
    # What the decode does not touch is not flagged: nothing at concurrency 1, no TTFT or
    # prefill anywhere (the end-to-end aggregate at 2 includes decode time: it may be).
    assert {k for k in flagged if k[0] != "aggregate_e2e_tps"} == set(), flagged
