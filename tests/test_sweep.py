"""``sparktop sweep`` against the simulator: it recovers the simulator's own profile, writes a
profile the budget, snapshot and the monitor read, survives Ctrl-C and resumes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
from pathlib import Path

import httpx

from sparktop.inventory import load_inventory
from sparktop.plan import Plan
from sparktop.sim.runner import SimHandle
from sparktop.sweep.estimator.estimator import estimate
from sparktop.sweep.profiles.loader import load_profile_file
from sparktop.sweep.runner.sweep_state import read_runs, runs_path
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.engine_panel import EnginePanel
from tests.sim_helpers import samples
from tests.sweep_helpers import idle_sim, run_cli, start_cli

TOLERANCE = 0.15
FIGURES = ("ttft_s", "prefill_tps", "decode_tps", "aggregate_tps")


async def expected_strip_with(sim: SimHandle, profile: Path) -> str:
    """The monitor on the simulator with ``--profile``: its expected strip once the engine
    has running requests to compare (background users are started for it)."""
    sim.cluster.engines["dsv41"].set_clients(3, sim.cluster.now)
    plan = Plan.from_inventory(
        load_inventory(sim.inventory_path), profile=str(profile), interval_s=0.5
    )
    app = SparktopApp(plan, plan.sources())
    async with app.run_test(size=(140, 40)) as pilot:
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            app.tick()
            await pilot.pause()
            blocks = app.query_one(EnginePanel).blocks
            text = str(blocks["dsv41"].query_one("ExpectedStrip").render()) if blocks else ""
            shown = "mix of running" in text or "for running" in text
            if shown or asyncio.get_running_loop().time() > deadline:
                return text
            await pilot.pause(0.2)


def sweep_args(url: str, out: Path, speed: float, *extra: str) -> list[str]:
    return ["sweep", "--endpoint", url, "--time-scale", f"{speed:g}", "-o", str(out), *extra]


async def test_a_sweep_of_the_simulator_recovers_its_profile_within_15_percent(
    tmp_path: Path,
) -> None:
    speed = 2.0
    out = tmp_path / "swept.yaml"
    async with idle_sim(speed) as (sim, url):
        grid = ["--prompts", "1k,4k", "--concurrency", "1,2", "--runs", "1", "--yes"]
        status, stdout, stderr = await run_cli(tmp_path, *sweep_args(url, out, speed, *grid))
        async with httpx.AsyncClient(base_url=url) as client:
            page = samples((await client.get("/metrics")).text)
        assert status == 0, stderr
        snap_status, snap_out, snap_err = await run_cli(
            tmp_path, "snapshot", "--inventory", str(sim.inventory_path), "--profile", str(out),
            "--json", "--window", "0",
        )  # fmt: skip
        strip = await expected_strip_with(sim, out)
    assert snap_status == 0, snap_err
    assert json.loads(snap_out)["engines"][0]["running"] == 0
    assert "expected swept" in strip and ("mix of running" in strip or "for running" in strip)
    assert stdout == ""
    assert "cell 4/4 4K x 2" in stderr and "wrote" in stderr
    # A budget inside what was measured (a fixed 40000 read "no data" after a short sweep).
    assert f"use it: sparktop budget --prompt-tokens 2000 --concurrency 1 --profile {out}" in stderr
    truth = sim.cluster.rates.profile
    profile = load_profile_file(out)
    assert profile.name == "swept" and profile.aggregate_kind == truth.aggregate_kind
    assert [(r.prompt_tokens, r.concurrency) for r in profile.rows] == [
        (1024, 1),
        (4096, 1),
        (1024, 2),
        (4096, 2),
    ]  # exact lengths, from /tokenize
    errors: dict[str, float] = {}
    for row in profile.rows:
        want = estimate(truth, row.prompt_tokens, row.concurrency)
        for figure in FIGURES:
            expected = want.__getattribute__(figure).value
            assert isinstance(expected, float)
            errors[f"{row.prompt_tokens}x{row.concurrency} {figure}"] = (
                getattr(row, figure) / expected - 1
            )
    print("\n".join(f"{k}: {v:+.1%}" for k, v in errors.items()))
    worst = max(errors, key=lambda k: abs(errors[k]))
    assert abs(errors[worst]) <= TOLERANCE, f"{worst}: {errors[worst]:+.1%}"
    # Decode is the server's own: its ITL histogram saw exactly each run's tokens, so each
    # run's per-request decode is 1 / that mean ITL (the figure the monitor compares).
    _plan, _prov, cells = read_runs(runs_path(out))
    for cell in cells:
        for run in cell.runs:
            assert all(r.itl_s > 0 and r.decode_tps == 1 / r.itl_s for r in run), run
    # Provenance: what the server said about itself, and the exact command.
    assert profile.model == "deepseek-ai/DeepSeek-V4.1-Flash-1017"
    assert profile.kv_pool_tokens == 11_434_628 and profile.max_model_len == 1_048_576
    assert profile.output_tokens == 128
    notes = "\n".join(profile.notes)
    assert "vLLM server version 0.32.0+sparktop.sim" in notes
    # The engine's kind is written, so the profile is not taken for another engine's.
    assert profile.engine == "vLLM server version 0.32.0+sparktop.sim"
    assert f"Command: sparktop sweep --endpoint {url}" in notes
    assert "block_size=256" in notes and "exact lengths" in notes
    # The simulator's /metrics counted the warm-up and the six measured requests.
    assert page["vllm:request_success_total"] == 1 + 1 + 1 + 2 + 2
    assert page["vllm:prompt_tokens_total"] >= 2 * 1024 + 3 * 4096

    status, stdout, stderr = await run_cli(
        tmp_path, "budget", "--prompt-tokens", "2048", "--concurrency", "2",
        "--profile", str(out), "--json",
    )  # fmt: skip
    assert status == 0, stderr
    budget = json.loads(stdout)
    assert budget["profile"]["name"] == "swept"
    assert budget["time"]["ttft_s"]["basis"] == "interpolated"
    low, high = profile.column(2)[0].ttft_s, profile.column(2)[1].ttft_s
    assert low < budget["time"]["ttft_s"]["value"] < high


async def test_ctrl_c_keeps_the_finished_cells_and_resume_measures_the_rest(
    tmp_path: Path,
) -> None:
    speed = 4.0
    out = tmp_path / "partial.yaml"
    grid = ["--prompts", "1k", "--concurrency", "1,2,4", "--runs", "1", "--output-tokens", "32"]
    async with idle_sim(speed) as (_sim, url):
        args = sweep_args(url, out, speed, *grid, "--yes")
        proc = await start_cli(tmp_path, *args)
        assert proc.stderr is not None
        seen = []
        while not any(line.startswith("cell 1/3") for line in seen):
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert line, f"sweep ended early: {seen}"
            seen.append(line.decode())
        proc.send_signal(signal.SIGINT)
        rest = (await asyncio.wait_for(proc.stderr.read(), 60)).decode()
        assert await proc.wait() == 130, rest
        assert "interrupted: 1 of 3 cells kept" in rest and "--resume" in rest
        kept = load_profile_file(out)
        assert [(r.prompt_tokens, r.concurrency) for r in kept.rows] == [(1024, 1)]
        assert any("Partial: 1 of 3 cells" in n for n in kept.notes)

        status, _, stderr = await run_cli(tmp_path, *args)
        assert status == 2 and "exists; pass --resume" in stderr

        status, _, stderr = await run_cli(tmp_path, *args[:-3], "--output-tokens", "16", "--yes",
                                          "--resume")  # fmt: skip
        assert status == 2 and "another plan" in stderr

        status, _, stderr = await run_cli(tmp_path, *args, "--resume")
    assert status == 0, stderr
    assert "cell 1/3" not in stderr and "cell 3/3 1K x 4" in stderr
    done = load_profile_file(out)
    assert [(r.prompt_tokens, r.concurrency) for r in done.rows] == [
        (1024, 1),
        (1024, 2),
        (1024, 4),
    ]
    # the kept cell is not measured again
    assert dataclasses.replace(done.rows[0], line=0) == dataclasses.replace(kept.rows[0], line=0)
    assert not any("Partial" in n for n in done.notes)
    _plan, _prov, cells = read_runs(runs_path(out))
    assert [c.concurrency for c in cells] == [1, 2, 4]


async def test_a_busy_server_is_refused_and_no_terminal_needs_yes(tmp_path: Path) -> None:
    out = tmp_path / "busy.yaml"
    async with idle_sim(5.0) as (sim, url):
        engine = sim.cluster.engines["dsv41"]
        engine.new_request(sim.cluster.now, 500_000, 4096)  # someone else's long request
        status, _, stderr = await run_cli(tmp_path, *sweep_args(url, out, 5.0, "--yes"))
        assert status == 1
        assert "the server is busy (0 running, 1 waiting)" in stderr or "busy (1 running" in stderr
        assert "--allow-busy" in stderr
        status, _, stderr = await run_cli(tmp_path, *sweep_args(url, out, 5.0, "--allow-busy"))
    assert status == 2 and "pass --yes" in stderr
    assert not out.exists() and not runs_path(out).exists()


async def test_prompts_that_do_not_fit_and_bad_sizes_are_one_line_errors(tmp_path: Path) -> None:
    out = tmp_path / "x.yaml"
    async with idle_sim(5.0) as (_sim, url):
        status, _, stderr = await run_cli(
            tmp_path, *sweep_args(url, out, 5.0, "--prompts", "2m", "--yes")
        )
    assert status == 2 and "exceed the server's max_model_len 1,048,576" in stderr
    for bad in ("4q", "0", "1k,1k"):
        status, _, stderr = await run_cli(
            tmp_path, *sweep_args("http://127.0.0.1:9", out, 1.0, "--prompts", bad)
        )
        assert status == 2 and stderr.count("\n") == 1 and "--prompts" in stderr, stderr
