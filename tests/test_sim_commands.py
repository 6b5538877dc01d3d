"""``sparktop sim`` and ``sparktop demo`` as a user runs them: real processes, real servers,
the monitor in a pseudo-terminal; how they stop (q, Ctrl-C, the terminal closing, kill) and
that the temporary directory holding the client key never outlives them."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparktop.commands.demo import startup_text
from sparktop.inventory import load_inventory
from sparktop.model import EngineSample
from sparktop.plan import Plan
from sparktop.record import read_ticks
from sparktop.record.tick import Tick
from sparktop.snapshot import take_snapshot
from tests.sim_helpers import running_sim

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
        snap = await take_snapshot(
            Plan.from_inventory(inventory).sources(), cluster=inventory.cluster
        )
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
    assert "faults are played in turn" in result.stdout
    assert "thermal 0:02–0:10" in result.stdout  # 8-48 simulated seconds at speed 5


def _replayable(path: Path) -> list[Tick]:
    recording, ticks = read_ticks(path)
    assert recording.header["inventory"]["cluster"]
    replay = subprocess.run(
        [*SPARKTOP, "replay", str(path), "--summary"],
        capture_output=True, text=True, timeout=60, env=ENV,
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    return ticks


def test_demo_without_tui_records_every_table_and_the_recording_replays(tmp_path: Path) -> None:
    target = tmp_path / "demo.jsonl.zst"
    result = subprocess.run(
        [*SPARKTOP, "demo", "--no-tui", "--rounds", "2", "--speed", "5", "--nodes", "2",
         "--record", str(target)],
        capture_output=True, text=True, timeout=120, env=ENV,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "recorded 2 ticks to" in result.stderr
    ticks = _replayable(target)
    assert len(ticks) == 2
    assert [n.node for n in ticks[-1].nodes] == ["spark-1", "spark-2"]
    assert ticks[-1].engines and ticks[-1].engines[0].kv_pool_tokens == 11_434_628


def test_demo_without_tui_keeps_its_recording_on_ctrl_c(tmp_path: Path) -> None:
    target = tmp_path / "demo.jsonl"
    proc = subprocess.Popen(
        [*SPARKTOP, "demo", "--no-tui", "--nodes", "2", "--speed", "5", "--record", str(target)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        # The third table starts after the first two were recorded.
        while sum(line.startswith("engine  running") for line in lines) < 3:
            line = proc.stdout.readline()
            assert line, "sparktop demo ended before the third table"
            lines.append(line)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "ticks to" in err
    ticks = _replayable(target)
    assert len(ticks) >= 2
    assert {n.node for n in ticks[0].nodes} == {"spark-1", "spark-2"}


class Terminal:
    """A process on a pseudo-terminal; output is drained while waiting (a full pty would
    block the monitor's writes)."""

    def __init__(self, argv: list[str]) -> None:
        master, slave = pty.openpty()
        env = {**ENV, "TERM": "xterm-256color"}
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        os.close(slave)
        self.master: int | None = master
        self.output = b""

    def _drain(self, wait_s: float) -> None:
        if self.master is None:
            time.sleep(wait_s)
            return
        ready, _, _ = select.select([self.master], [], [], wait_s)
        if ready:
            try:
                self.output += os.read(self.master, 65536)
            except OSError:  # the child closed its side
                time.sleep(wait_s)

    def expect(self, pattern: bytes, timeout_s: float = 60.0) -> re.Match[bytes]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output)
            if found:
                return found
            assert self.proc.poll() is None, self.output[-2000:]
            self._drain(0.1)
        raise AssertionError(f"{pattern!r} not shown; last output: {self.output[-2000:]!r}")

    def close_terminal(self) -> None:
        """What closing a terminal window does: the pty goes away, then SIGHUP."""
        assert self.master is not None
        os.close(self.master)
        self.master = None
        self.proc.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        """End a process the test gave up on: SIGTERM (it removes its directory), then kill."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def wait(self, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"still running; last output: {self.output[-2000:]!r}")
            self._drain(0.1)
        if self.master is not None:
            os.close(self.master)
            self.master = None
        return self.proc.returncode


@pytest.mark.parametrize(
    ("stop", "status"),
    [("q", 0), ("ctrl-c", 130), ("terminal closed", 129), ("SIGTERM", 143)],
)
def test_demo_monitor_stops_cleanly_and_removes_the_key_however_it_ends(
    stop: str, status: int
) -> None:
    term = Terminal([*SPARKTOP, "demo", "--nodes", "2", "--speed", "5"])
    try:
        directory = Path(term.expect(rb"simulated cluster in (\S+)").group(1).decode())
        assert (directory / "id_ed25519").exists()
        term.expect(rb"every 1 s")  # the monitor's header: it is up and reads keys
        if stop == "q":
            os.write(term.master or -1, b"q")
        elif stop == "ctrl-c":
            os.write(term.master or -1, b"\x03")
        elif stop == "terminal closed":
            term.close_terminal()
        else:
            term.proc.send_signal(signal.SIGTERM)
        assert term.wait() == status
    finally:
        if term.proc.poll() is None:
            term.stop()
    assert not directory.exists()


def test_demo_without_tui_exits_130_on_ctrl_c_and_removes_its_directory() -> None:
    proc = subprocess.Popen(
        [*SPARKTOP, "demo", "--no-tui", "--nodes", "2", "--speed", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        while not any("spark-2" in line for line in lines[1:]):  # the first table
            line = proc.stdout.readline()
            assert line, "sparktop demo ended before the first table"
            lines.append(line)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.terminate()  # removes the directory too
            proc.communicate(timeout=30)
    found = re.search(r"simulated cluster in (\S+)", lines[0])
    assert found is not None
    assert proc.returncode == 130
    assert not Path(found.group(1)).exists()


async def test_sim_stops_on_sighup_and_removes_inventory_and_keys(tmp_path: Path) -> None:
    target = tmp_path / "sim.yaml"
    proc = await asyncio.create_subprocess_exec(
        *SPARKTOP, "sim", "--write-inventory", str(target), "--nodes", "1",
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
    finally:
        proc.send_signal(signal.SIGHUP)
        await asyncio.wait_for(proc.communicate(), 30)
    keys_dir = Path(next(ln for ln in lines if ln.startswith("keys")).split(": ", 1)[1].strip())
    assert proc.returncode == 0
    assert not target.exists() and not keys_dir.exists()


async def test_demo_inventory_holds_alerts_5_s_and_runs_32_sequences() -> None:
    async with running_sim(alert_hold_s=5.0) as sim:
        text = sim.inventory_path.read_text()
        inventory = load_inventory(sim.inventory_path)
        (source,) = Plan.from_inventory(inventory).engine_sources()
        try:
            sample = await source.sample()
        finally:
            await source.aclose()
    assert inventory.alerts.hold_s == 5.0
    (engine,) = inventory.engines
    # The simulated server's limit, the inventory's and what the engine source reports agree.
    assert engine.max_num_seqs == sim.cluster.rates.limits.max_num_seqs == 32
    assert isinstance(sample, EngineSample) and sample.max_num_seqs == 32
    assert "max_num_seqs 32, not the profile's 8" in text
    assert "alerts hold 5 s" in text


def test_demo_says_what_it_plays_and_why_its_inventory_differs() -> None:
    text = startup_text("tour", 1.0)
    assert text.startswith("faults are played in turn, one at a time")
    assert "thermal 0:08–0:48" in text and "long-context 2:36," in text
    # Each fault ends at its own end step: a restart or a long request plays out by itself.
    assert "pool-exhaustion 1:28–1:48" in text and "server-restart 2:28," in text
    assert "every 7 min 10 s" in text
    assert "engine-stall 6:20–6:55" in text
    assert "thermal-blip 1:36–1:43" in text and "load-change 5:20–5:55" in text
    assert "alerts hold 5 s" in text
    assert "alerts hold 1 s" in startup_text("tour", 5.0)
    result = subprocess.run(
        [*SPARKTOP, "demo", "--help"], capture_output=True, text=True, timeout=60, env=ENV
    )
    assert "alerts: {hold_s: 5}" in result.stdout and "max_num_seqs: 32" in result.stdout
    assert "  130  quit with Ctrl-C" in result.stdout  # the exit-status list, as every --help
    # The round's length is the tour's own (it said "five minutes" of a 6 min 20 s round).
    from sparktop.sim.scenarios import SCENARIOS

    tour = SCENARIOS["tour"]
    assert tour.period_s == 430.0 and tour.steps[-1][0] < tour.period_s
    help_text = " ".join(result.stdout.split())
    assert help_text.count("7 min 10 s per round") == 2  # the description and the scenario
    assert "five minutes" not in help_text and "6⅓" not in help_text


def test_bad_options_are_one_line_usage_errors(tmp_path: Path) -> None:
    target = str(tmp_path / "x.yaml")
    cases = {
        ("--nodes", "0"): "--nodes must be between 1 and 256",
        ("--engines", "5"): "--engines must be between 0 and --nodes (4)",
        ("--scenario", "meltdown"): "unknown scenario 'meltdown'",
        ("--speed", "0"): "--speed must be above 0 and at most 100, got 0",
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
