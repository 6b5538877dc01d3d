"""``sparktop sim`` and ``sparktop demo`` as a user runs them: real processes, real servers."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from sparktop.inventory import load_inventory
from sparktop.snapshot import take_snapshot
from sparktop.sources.build import build_sources

SPARKTOP = [sys.executable, "-m", "sparktop"]
ENV = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"}


async def test_sim_writes_an_inventory_that_sparktop_polls_then_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "sim.yaml"
    proc = await asyncio.create_subprocess_exec(
        *SPARKTOP, "sim", "--write-inventory", str(target), "--nodes", "2", "--speed", "5",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not lines or "Ctrl-C" not in lines[-1]:
                line = (await proc.stdout.readline()).decode()
                assert line, "sparktop sim ended before it was ready"
                lines.append(line)
        inventory = load_inventory(target)
        snap = await take_snapshot(build_sources(inventory), cluster=inventory.cluster)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    keys_dir = Path(next(ln for ln in lines if ln.startswith("keys")).split(": ", 1)[1].strip())
    assert [n.node for n in snap.nodes] == ["spark-1", "spark-2"]
    assert snap.complete, [s for s in snap.failures]
    assert snap.engines[0].kv_pool_tokens == 11_434_628
    assert proc.returncode == 0
    assert "removed" in err.decode()
    assert not target.exists() and not keys_dir.exists()


def test_demo_without_tui_prints_tables_and_removes_its_directory() -> None:
    result = subprocess.run(
        [*SPARKTOP, "demo", "--no-tui", "--rounds", "1", "--speed", "5", "--nodes", "2"],
        capture_output=True, text=True, timeout=120, env=ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    directory = re.search(r"simulated cluster in (\S+)", result.stdout)
    assert directory is not None
    assert not Path(directory.group(1)).exists()
    assert "spark-2" in result.stdout and "dsv41" in result.stdout


def test_bad_options_are_one_line_usage_errors(tmp_path: Path) -> None:
    target = str(tmp_path / "x.yaml")
    cases = {
        ("--nodes", "0"): "--nodes must be between 1 and 256",
        ("--engines", "5"): "--engines must be between 0 and --nodes (4)",
        ("--scenario", "meltdown"): "unknown scenario 'meltdown'",
        ("--speed", "0"): "--speed must be positive",
        ("--profile", "no-such-profile"): "no-such-profile",
    }
    for extra, message in cases.items():
        result = subprocess.run(
            [*SPARKTOP, "sim", "--write-inventory", target, *extra],
            capture_output=True, text=True, timeout=60, env=ENV,
        )  # fmt: skip
        assert result.returncode == 2, (extra, result.stderr)
        assert message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr


def test_help_teaches_with_scenarios_and_examples() -> None:
    for command in ("sim", "demo"):
        result = subprocess.run(
            [*SPARKTOP, command, "--help"], capture_output=True, text=True, timeout=60, env=ENV
        )
        assert result.returncode == 0
        assert "examples:" in result.stdout
        assert "hidden-low-power" in result.stdout and "tour" in result.stdout
