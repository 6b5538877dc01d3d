"""Peers side by side, in one run: what the monitors a Spark/vLLM user would otherwise run cost.

Each tool runs as a user runs it, in a pseudo-terminal (200×50, its screen output read and
thrown away), against loopback only; after a 20 s warm-up psutil reads its CPU time (its own
and that of the children it reaped: vllm-top runs ``clear`` through a shell on every
refresh) and RSS over a 20 s window. The tools are alternated: two rounds, each running
every tool once (a fresh start each time, the order turned by one between rounds), so a
machine whose speed drifts moves every tool alike; a tool's figure is the median of its two
blocks (both printed) and its largest RSS (``--quick``: one round, 15 s windows). What each
does per refresh:

- **vllm-top** (PyPI ``vllm-top``): a background thread GETs ``/metrics`` and parses the whole
  page with prometheus_client every 0.1 s (running, waiting, KV usage); the display loop GETs
  and parses it again, runs ``clear`` through ``os.system`` and reprints every
  ``--interval`` (default 0.1 s; also run at 1 s). Against the simulator's engine.
- **sparktop**, the same engine (an inventory with that engine only) at 1 s: one GET and parse
  of ``/metrics`` per second plus the derived rates, TTFT/ITL quantiles, KV pool and the
  expected row; the screen repaints what changed.
- **glances** (PyPI ``glances``) in its terminal UI at 1 s (``-t 1``): CPU, memory, load,
  network, disks, sensors and the process list of this machine, via psutil.
- **sparktop local mode** at 1 s (no inventory: this machine through NVML and psutil; without
  an NVIDIA driver the node reads "no NVIDIA driver").
- **nvitop** needs the NVIDIA driver's NVML: it is started once to record what it says here.

Run: ``python benchmarks/bench_peers.py [--quick]``
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import os
import pty
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
import yaml

from benchmarks.bench_cpu import _Drain
from benchmarks.common import ROOT, Figure, arg_parser, info, print_table, sim_process

SIZE = (200, 50)
MB = 1024 * 1024
WARMUP_S = 20.0
"""Start-up (imports, first polls, caches) takes ~10 s of a loaded 2-core machine."""
PEERS = ("vllm-top", "glances", "nvitop")


@dataclass(frozen=True, slots=True)
class TuiRun:
    """One tool's window: CPU seconds per wall second and RSS (MB), or why it did not run."""

    name: str
    cpu_per_s: float = 0.0
    rss_mb: float = 0.0
    problem: str = ""


def _plain(data: bytes) -> str:
    """Terminal output as printable text (escape sequences and control characters dropped)."""
    text = re.sub(
        r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]",
        "",
        data.decode("utf-8", "replace"),
    )
    return "".join(ch for ch in text if ch.isprintable() or ch == "\n")


def _cpu_with_children(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


def run_tui(
    name: str, command: Sequence[str], warmup_s: float, measure_s: float, quit_keys: bytes
) -> TuiRun:
    """Run ``command`` in a pty, measure CPU/s and RSS after ``warmup_s`` for ``measure_s``."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "COLUMNS": "200"}
    child = subprocess.Popen(
        list(command), stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    drain = _Drain(master)
    drain.start()
    proc = psutil.Process(child.pid)
    try:
        time.sleep(warmup_s)
        if child.poll() is not None:
            lines = [ln.strip() for ln in _plain(drain.tail).splitlines() if ln.strip()]
            said = [ln for ln in lines if "ERROR" in ln] or lines
            return TuiRun(name, problem=f"exited {child.returncode}: {said[0] if said else ''}")
        t0, cpu0 = time.monotonic(), _cpu_with_children(proc)
        rss = []
        while time.monotonic() - t0 < measure_s:
            time.sleep(1.0)
            rss.append(proc.memory_info().rss / MB)
        seconds, cpu = time.monotonic() - t0, _cpu_with_children(proc) - cpu0
        return TuiRun(name, cpu / seconds, max(rss))
    finally:
        with contextlib.suppress(OSError):
            os.write(master, quit_keys)
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGINT)
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        os.close(master)


def _tool(name: str) -> str | None:
    """The console script of an installed peer next to this Python, else on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _engine_only(inventory: Path, directory: Path) -> tuple[Path, str]:
    """An inventory with the simulator's engine only (no nodes), and its base URL."""
    doc = yaml.safe_load(inventory.read_text())
    engine = dict(doc["engines"][0])
    engine.pop("nodes", None)
    doc = {k: v for k, v in doc.items() if k not in ("nodes", "engines")}
    doc["engines"] = [engine]
    path = directory / "engine-only.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path, str(engine["url"])


ROUNDS = 2
"""Blocks per tool: every tool runs once a round, the rounds alternate them (the order turned
by one each round), and a tool's figure is the median of its blocks' CPU (max RSS)."""
WINDOW_S = 20.0
"""Measured seconds per block (×2 rounds: 40 s per tool); ``--quick``: one round of 15 s."""


def measure(quick: bool) -> list[TuiRun]:
    """Every tool in ``rounds`` alternating blocks, each a fresh start, warm-up and window."""
    rounds, seconds = (1, 15.0) if quick else (ROUNDS, WINDOW_S)
    warmup = WARMUP_S
    sparktop = [sys.executable, "-m", "sparktop"]
    blocks: dict[str, list[TuiRun]] = {}
    with sim_process(1, 1) as sim, tempfile.TemporaryDirectory() as tmp:
        only, url = _engine_only(sim.inventory, Path(tmp))
        host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
        tools: list[tuple[str, list[str] | str, bytes]] = [
            ("sparktop, 1 engine, 1 s", [*sparktop, "-i", str(only)], b"q")
        ]
        top = _tool("vllm-top")
        for interval in ("0.1", "1"):
            label = f"vllm-top, same engine, --interval {interval}"
            if top is None:
                tools.append((label, "not installed (pip install -e '.[bench]')", b""))
            else:
                command = [top, "--host", host, "--port", port, "--interval", interval]
                tools.append((label, command, b"\x03"))
        tools.append(("sparktop local mode, 1 s", [*sparktop, "--interval", "1"], b"q"))
        glances = _tool("glances")
        if glances is None:
            tools.append(("glances -t 1", "not installed (pip install -e '.[bench]')", b""))
        else:
            tools.append(("glances TUI, -t 1", [glances, "-t", "1"], b"q"))
        for r in range(rounds):
            turn = tools[r % len(tools) :] + tools[: r % len(tools)]
            for name, argv, keys in turn:
                if isinstance(argv, str):
                    blocks.setdefault(name, []).append(TuiRun(name, problem=argv))
                    continue
                run = run_tui(name, argv, warmup, seconds, keys)
                blocks.setdefault(name, []).append(run)
    runs = [_merged(name, blocks[name]) for name, _, _ in tools]
    nvitop = _tool("nvitop")
    if nvitop is None:
        runs.append(TuiRun("nvitop", problem="not installed"))
    else:
        runs.append(run_tui("nvitop", [nvitop], 5.0, 2.0, b"q"))
    return runs


def _merged(name: str, runs: list[TuiRun]) -> TuiRun:
    """A tool's blocks as one figure: median CPU per second, largest RSS, the blocks' CPU in
    the name; a block that could not run makes the figure its problem."""
    for run in runs:
        if run.problem:
            return run
    cpu = statistics.median(r.cpu_per_s for r in runs)
    if len(runs) > 1:
        name += " (blocks " + ", ".join(f"{r.cpu_per_s:.3f}" for r in runs) + ")"
    return TuiRun(name, cpu, max(r.rss_mb for r in runs))


def figures(runs: Sequence[TuiRun]) -> list[Figure]:
    versions = ", ".join(f"{p} {version(p)}" for p in PEERS)
    out = [info("peers (versions)", versions)]
    for run in runs:
        if run.problem:
            out.append(info(f"{run.name}: CPU s per s | RSS", f"cannot run here: {run.problem}"))
        else:
            out.append(
                info(
                    f"{run.name}: CPU s per s | RSS",
                    f"{run.cpu_per_s:.3f} | {run.rss_mb:.0f} MB",
                )
            )
    by_name = {r.name.split(" (blocks")[0]: r for r in runs if not r.problem}
    ours = by_name.get("sparktop, 1 engine, 1 s")
    for label in ("vllm-top, same engine, --interval 0.1", "vllm-top, same engine, --interval 1"):
        peer = by_name.get(label)
        if ours is not None and peer is not None and ours.cpu_per_s > 0:
            out.append(
                info(
                    f"{label.split(',')[0]} {label.split(', ')[-1]} ÷ sparktop (CPU | RSS)",
                    f"{peer.cpu_per_s / ours.cpu_per_s:.1f}× | {peer.rss_mb / ours.rss_mb:.2f}×",
                )
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="shorter windows")
    args = parser.parse_args(argv)
    print_table("peers side by side", figures(measure(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
