"""Helpers for the sweep tests: an idle simulator and ``sparktop`` run as a real process."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sparktop.sim.engine import LoadSpec
from sparktop.sim.runner import SimHandle, SimOptions, start_sim


@asynccontextmanager
async def idle_sim(speed: float) -> AsyncIterator[tuple[SimHandle, str]]:
    """A simulator with no background load (a sweep must be alone on the server) and the
    base URL of its engine."""
    sim = await start_sim(SimOptions(speed=speed, load=LoadSpec(clients=0)))
    try:
        yield sim, sim.http["dsv41"].url
    finally:
        await sim.close()


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment for a ``sparktop`` child: no user profiles, no colour codes."""
    env = dict(os.environ)
    env["SPARKTOP_PROFILE_DIR"] = str(tmp_path / "no-user-profiles")
    env["NO_COLOR"] = "1"
    env.pop("FORCE_COLOR", None)
    return env


async def start_cli(tmp_path: Path, *args: str) -> asyncio.subprocess.Process:
    """``python -m sparktop ARGS`` with stdin closed (no terminal), output piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sparktop",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env(tmp_path),
        cwd=tmp_path,
    )


async def run_cli(tmp_path: Path, *args: str, timeout_s: float = 120.0) -> tuple[int, str, str]:
    """Run ``sparktop ARGS`` to its end; (exit status, stdout, stderr)."""
    proc = await start_cli(tmp_path, *args)
    out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
