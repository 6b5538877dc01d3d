"""``snapshot`` carries the monitor's expected row: the same comparisons, the same window.

Real processes against the simulator: ``sparktop snapshot --json`` and the text table each
hold one expected block per engine (profile, window load, each profile column beside the
live figure defined like it); and, on one sample, the JSON block and the monitor's strip say
the same deviations.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys

from sparktop.model import EngineSample, EngineState
from sparktop.plan import Plan
from sparktop.report.expected import expected_json, expected_text
from sparktop.snapshot import take_snapshot
from sparktop.ui.expected import DeficitClock, expected_lines
from tests.sim_helpers import running_sim, sim_plan

SPARKTOP = [sys.executable, "-m", "sparktop"]
ENV = {**os.environ, "COLUMNS": "200"}


async def _run(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *SPARKTOP, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_snapshot_json_and_text_carry_the_expected_row() -> None:
    async with running_sim(nodes=2, speed=5) as sim:
        inv = str(sim.inventory_path)
        code, out, err = await _run("snapshot", "-i", inv, "--window", "10", "--json")
        assert code == 0, err
        (engine,) = json.loads(out)["engines"]
        block = engine["expected"]
        assert block["missing"] is None
        assert block["profile"] == sim_plan(sim).profile_name
        assert block["window_s"] > 3 and block["mean_running"] >= 1
        figures = block["figures"]
        assert list(figures) == ["ttft_s", "decode_tps", "aggregate_tps"]
        decode = figures["decode_tps"]
        assert decode["statistic"] in {"1/ITL", "1/TPOT"} and decode["compared"]
        dev = (decode["live_tps"] / decode["expected_tps"] - 1) * 100
        assert abs(decode["deviation_pct"] - dev) < 1e-6
        low, high = decode["band_tps"]
        assert decode["in_band"] == (low <= decode["live_tps"] <= high)
        agg = figures["aggregate_tps"]
        # The default profile's aggregate is decode-only; the live rate is end-to-end.
        assert not agg["compared"] and agg["deviation_pct"] is None
        assert "decode-only" in agg["not_compared_why"]

        # Over a couple of scrapes there is no load to compare (snapshot has no hold time).
        code, out, err = await _run("snapshot", "-i", inv, "--window", "2", "--json")
        (short,) = json.loads(out)["engines"]
        assert "compared once it spans 5 s" in short["expected"]["missing"], short["expected"]
        assert not any(a["rule"].startswith("expected.") for a in json.loads(out)["alerts"])

        code, out, err = await _run("snapshot", "-i", inv, "--window", "10")
        assert code == 0, err
        flat = " ".join(out.split())
        head = r"dsv41: expected (\S+) (?:mix of|for) running.*? \((\w+)\): TTFT \d"
        line = re.search(head, flat)
        assert line is not None, out
        assert line.group(1) == block["profile"]
        assert line.group(2) in {"exact", "interpolated", "fitted", "extrapolated"}
        # People's labels in the text; the profile's column keys are the JSON's.
        assert "decode/req " in flat and "decode_tps" not in flat and "ttft_s" not in flat
        assert "(not compared: the profile's is" in flat


async def test_the_json_block_and_the_monitor_strip_say_the_same_deviations() -> None:
    async with running_sim(nodes=2, speed=5) as sim:
        plan = sim_plan(sim)
        snap = await take_snapshot(
            plan.sources(engine_options={"first_window_s": 8.0}), cluster=plan.cluster
        )
        (sample,) = snap.engines
        assert isinstance(sample, EngineSample) and sample.ok
        block = expected_json(plan, sample)
        strip = " ".join(
            text
            for line in expected_lines(
                sample,
                plan.profile_name,
                plan.matched,
                plan.thresholds.expected_deficit_pct,
                DeficitClock(),
                sample.time_s,
                width=400,
            )
            for text, _style in line
        )
        assert block["load"] in strip
        figures = block["figures"]
        assert isinstance(figures, dict)
        assert "ttft_s" not in strip and "decode_tps" not in strip  # keys: --json only
        for column, label in (("ttft_s", "TTFT"), ("decode_tps", "decode/req")):
            dev = figures[column]["deviation_pct"]
            assert dev is not None
            shown = "in band" if figures[column]["in_band"] else f"{dev:+.0f}%"
            shown = shown.replace("-0%", "+0%")
            assert re.search(rf"{re.escape(label)}\s+[^%]*?{re.escape(shown)}", strip), (
                column,
                shown,
                strip,
            )


def test_an_engine_without_a_row_says_its_own_state() -> None:
    """A degraded page answered (its load gauges were refused): it is not 'not answering'."""
    plan = Plan.from_layout("c", {"dsv41": ("n1",)})
    degraded = EngineSample("dsv41", 0.0, EngineState.DEGRADED, "running -3 refused")
    assert expected_json(plan, degraded)["missing"] == (
        "engine degraded: its load gauges were refused, so there is no load to match"
    )
    down = EngineSample("dsv41", 0.0, EngineState.UNREACHABLE, "connection refused")
    assert expected_text(plan, down) == "expected: engine unreachable"
