"""Render: one UI tick of the live monitor with 8–64 GPU rows and 4 engines.

The real ``SparktopApp`` runs with Textual's real terminal driver writing to a
pseudo-terminal, as a user's terminal gets it (the bytes read on the other side and counted),
each size in a process of its own, on a 200×60 terminal (the node table takes up to 40 % of
it and scrolls the rest; the largest size is also run on a 200×180 terminal with every row
on screen), fed by simulated sources (:mod:`benchmarks.simsources`): each round moves
simulated time one second, polls every source (the app records the samples) and renders.
Three figures per size, medians over the rounds (the target is judged on the second):

- ``tick()``: the app's render step (ClusterState → node table, engine panel, header,
  alerts, events, budget pane), wall time;
- tick + repaint: the CPU the process spends (every thread: ``time.process_time``) on the
  tick, on Textual's layout and paint of what changed, and on building and writing the
  escape sequences to the terminal (its writer thread's queue drained), until the app is
  idle again;
- the bytes written to the terminal per tick.

Run: ``python benchmarks/bench_render.py [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import fcntl
import io
import json
import os
import pty
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
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_cpu import _Drain
from benchmarks.common import ROOT, Figure, arg_parser, info, print_table
from benchmarks.reference import Speed, around, check_scaled
from benchmarks.simsources import SimSources
from sparktop import gcpolicy

SIZES = (8, 16, 32, 64)
WARM_POLLS = 125
"""Polls before the timed rounds: the engine sparklines show the last 120 points."""
ENGINES = 4
TARGET_MS = 20.0
WIDTH, HEIGHT = 200, 60
"""A large terminal; the node table takes up to 40 % of it and scrolls the other rows."""
TALL = 180
"""Tall enough that all 64 rows are on screen (the worst case: every row repainted)."""


@dataclass(frozen=True, slots=True)
class RenderResult:
    rows: int
    engines: int
    height: int
    tick_ms: float
    tick_repaint_cpu_ms: float
    cells_per_tick: float
    bytes_per_tick: float = 0.0
    """Terminal output per tick (0 headless: nothing is written)."""


async def measure_one(
    nodes: int,
    engines: int = ENGINES,
    rounds: int = 20,
    height: int = HEIGHT,
    *,
    tune_gc: bool = False,
    terminal: _Counting | None = None,
) -> RenderResult:
    """One size, headless (the smoke test), or with ``terminal`` through Textual's real
    driver writing to this process's terminal (``terminal`` counts the bytes)."""
    from sparktop.plan import Plan
    from sparktop.ui.app import SparktopApp
    from sparktop.ui.widgets.node_table import NodeTable

    sim = SimSources(nodes, engines)
    plan = Plan.from_layout(f"sim-{nodes}x", sim.groups, interval_s=1.0)
    app = SparktopApp(plan, sim.sources, plan.alert_engine(), clock=sim.wall, autostart=False)
    if tune_gc:
        gcpolicy.tune()  # as the monitor's run_tui does (a process of its own: --one)
    ticks: list[float] = []
    repaint: list[float] = []
    cells: list[int] = []
    written: list[int] = []
    run = (
        app.run_test(size=(WIDTH, height))
        if terminal is None
        else app.run_test(headless=False, size=None)  # the pty's size, set by the parent
    )
    async with run as pilot:
        # A monitor that has been running: every sparkline full (120 points of history)
        # before anything is timed; the polls are not rendered.
        for _ in range(WARM_POLLS):
            sim.advance(1.0)
            await app.poller.poll_once()
        for i in range(rounds + 5):  # the first rounds add rows and learn baselines
            sim.advance(1.0)
            await app.poller.poll_once()
            await pilot.pause()
            await _written(app)
            sent = terminal.count if terminal is not None else 0
            cpu = time.process_time()
            started = time.perf_counter()
            app.tick()
            elapsed = time.perf_counter() - started
            await pilot.pause()
            await _written(app)
            if i >= 5:
                ticks.append(elapsed)
                repaint.append(time.process_time() - cpu)
                cells.append(app.last_tick_cells)
                written.append((terminal.count if terminal is not None else 0) - sent)
        shown = app.query_one(NodeTable).row_count
    if shown != nodes:
        raise RuntimeError(f"node table shows {shown} rows, expected {nodes}")
    return RenderResult(
        nodes, engines, height, statistics.median(ticks) * 1000, statistics.median(repaint) * 1000,
        statistics.mean(cells), statistics.median(written),
    )  # fmt: skip


async def _written(app: object) -> None:
    """Until Textual's writer thread has written everything queued (its CPU is the tick's)."""
    writer = getattr(getattr(app, "_driver", None), "_writer_thread", None)
    queue = getattr(writer, "_queue", None)
    for _ in range(2000):
        if queue is None or queue.qsize() == 0:
            break
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.002)  # the last write in flight


class _Counting(io.RawIOBase):
    """The terminal's file descriptor, counting the bytes written (Textual's driver writes
    to ``sys.__stderr__``: replaced by a text stream over this)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        n = os.write(self.fd, data)
        self.count += n
        return n

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)


def _in_terminal(nodes: int, height: int, rounds: int, result: Path) -> int:
    """The child's side of :func:`_measure_apart`: its stdin/stdout/stderr are the pty."""
    counting = _Counting(2)
    stream = io.TextIOWrapper(io.BufferedWriter(counting, 1 << 16), encoding="utf-8")
    sys.stderr = stream
    setattr(sys, "__stderr__", stream)  # noqa: B010 - where Textual's LinuxDriver writes
    r = asyncio.run(
        measure_one(nodes, rounds=rounds, height=height, tune_gc=True, terminal=counting)
    )
    result.write_text(json.dumps(dataclasses.asdict(r)))
    return 0


def measure(sizes: Sequence[int] = SIZES, *, rounds: int = 20) -> list[RenderResult]:
    """Each size on the 200×60 terminal, then the largest with every row on screen; each in
    a process of its own, as the monitor runs (one app per process, nothing left over from
    an earlier app or benchmark for the garbage collector to walk)."""
    runs = [(n, HEIGHT) for n in sizes] + [(max(sizes), TALL)]
    return [_measure_apart(n, height, rounds) for n, height in runs]


def _measure_apart(nodes: int, height: int, rounds: int) -> RenderResult:
    """One size in a child process whose terminal is a pty of WIDTH × ``height`` (its output
    read here, as a terminal would, and thrown away)."""
    with tempfile.TemporaryDirectory(prefix="sparktop-bench-render-") as tmp:
        result = Path(tmp) / "result.json"
        command = [
            sys.executable, str(Path(__file__).resolve()), "--one",
            str(nodes), str(height), str(rounds), str(result),
        ]  # fmt: skip
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", height, WIDTH, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        child = subprocess.Popen(
            command, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        drain = _Drain(master)
        drain.start()
        try:
            status = child.wait(600)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            drain.join(5)
            os.close(master)
        if status != 0 or not result.exists():
            raise RuntimeError(
                f"render run {nodes} rows × {height} lines failed: {drain.tail[-3000:]!r}"
            )
        return RenderResult(**json.loads(result.read_text()))


def figures(results: Sequence[RenderResult], speed: Speed) -> list[Figure]:
    """Per size: tick() and tick+repaint. The target is judged on a whole UI tick as the
    operator gets it, ``SparktopApp.tick`` (cluster state into the widgets) plus Textual's
    layout and paint of what changed, at the largest size: on 200×60 (the table scrolls) and
    on 200×180 (every row on screen), against the target scaled by the machine's speed in
    the run (:mod:`benchmarks.reference`)."""
    out: list[Figure] = []
    for r in results:
        out.append(
            info(
                f"render {r.rows} GPU rows + {r.engines} engines, {WIDTH}×{r.height}: "
                "tick() | tick+repaint CPU | terminal output",
                f"{r.tick_ms:.1f} | {r.tick_repaint_cpu_ms:.1f} ms | "
                f"{r.bytes_per_tick / 1024:.1f} KiB/tick",
            )
        )
    normal = [r for r in results if r.height == HEIGHT] or list(results)
    small, big = normal[0], normal[-1]
    judged = [big, *(r for r in results if r.height != HEIGHT and r.rows == big.rows)]
    for r in judged:
        where = f"{r.rows} GPU rows + {r.engines} engines, {WIDTH}×{r.height}"
        if r.height == TALL:
            where += ", all rows on screen"
        name = f"render: one UI tick + repaint + terminal write (CPU), {where}"
        out.append(check_scaled(name, r.tick_repaint_cpu_ms, TARGET_MS, "{:.1f} ms", speed))
    if big is not small:
        out.append(
            info(
                f"render growth {small.rows} → {big.rows} rows: tick() | tick+repaint",
                f"{big.tick_ms / small.tick_ms:.2f}× | "
                f"{big.tick_repaint_cpu_ms / small.tick_repaint_cpu_ms:.2f}× "
                f"for {big.rows / small.rows:.0f}× rows",
            )
        )
    out.append(speed.figure())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="fewer rounds")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), metavar="ROWS")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    # ROWS HEIGHT ROUNDS RESULT: one measurement in this process's terminal (measure() runs it)
    args = parser.parse_args(argv)
    if args.one:
        nodes, height, rounds, result = args.one
        return _in_terminal(int(nodes), int(height), int(rounds), Path(result))
    results, speed = around(lambda: measure(args.sizes, rounds=5 if args.quick else 20))
    print_table("Render: one UI tick (median)", figures(results, speed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
