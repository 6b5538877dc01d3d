"""Render: one UI tick of the live monitor with 8–64 GPU rows and 4 engines.

The real ``SparktopApp`` runs headless (``App.run_test``), each size in a process of its
own, on a 200×60 terminal (the node table takes up to 40 % of it and scrolls the rest; the
largest size is also run on a 200×180 terminal with every row on screen), fed by simulated
sources (:mod:`benchmarks.simsources`): each round moves simulated time one second, polls
every source (the app records the samples) and renders.
Two figures per size, medians over the rounds (the target is judged on the second):

- ``tick()``: the app's render step (ClusterState → node table, engine panel, header,
  alerts, events, budget pane), wall time;
- tick + repaint: the CPU the process spends on the tick and on Textual's layout and paint
  of what changed, until the app is idle again.

Run: ``python benchmarks/bench_render.py [--quick]``
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


async def measure_one(
    nodes: int,
    engines: int = ENGINES,
    rounds: int = 20,
    height: int = HEIGHT,
    *,
    tune_gc: bool = False,
) -> RenderResult:
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
    async with app.run_test(size=(WIDTH, height)) as pilot:
        # A monitor that has been running: every sparkline full (120 points of history)
        # before anything is timed; the polls are not rendered.
        for _ in range(WARM_POLLS):
            sim.advance(1.0)
            await app.poller.poll_once()
        for i in range(rounds + 5):  # the first rounds add rows and learn baselines
            sim.advance(1.0)
            await app.poller.poll_once()
            await pilot.pause()
            cpu = time.process_time()
            started = time.perf_counter()
            app.tick()
            elapsed = time.perf_counter() - started
            await pilot.pause()
            if i >= 5:
                ticks.append(elapsed)
                repaint.append(time.process_time() - cpu)
                cells.append(app.last_tick_cells)
        shown = app.query_one(NodeTable).row_count
    if shown != nodes:
        raise RuntimeError(f"node table shows {shown} rows, expected {nodes}")
    return RenderResult(
        nodes, engines, height, statistics.median(ticks) * 1000, statistics.median(repaint) * 1000,
        statistics.mean(cells),
    )  # fmt: skip


def measure(sizes: Sequence[int] = SIZES, *, rounds: int = 20) -> list[RenderResult]:
    """Each size on the 200×60 terminal, then the largest with every row on screen; each in
    a process of its own, as the monitor runs (one app per process, nothing left over from
    an earlier app or benchmark for the garbage collector to walk)."""
    runs = [(n, HEIGHT) for n in sizes] + [(max(sizes), TALL)]
    return [_measure_apart(n, height, rounds) for n, height in runs]


def _measure_apart(nodes: int, height: int, rounds: int) -> RenderResult:
    command = [
        sys.executable, str(Path(__file__).resolve()), "--one",
        str(nodes), str(height), str(rounds),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"render run {nodes} rows × {height} lines failed:\n{done.stderr}")
    return RenderResult(**json.loads(done.stdout.strip().splitlines()[-1]))


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
                "tick() | tick+repaint CPU",
                f"{r.tick_ms:.1f} | {r.tick_repaint_cpu_ms:.1f} ms",
            )
        )
    normal = [r for r in results if r.height == HEIGHT] or list(results)
    small, big = normal[0], normal[-1]
    judged = [big, *(r for r in results if r.height != HEIGHT and r.rows == big.rows)]
    for r in judged:
        where = f"{r.rows} GPU rows + {r.engines} engines, {WIDTH}×{r.height}"
        if r.height == TALL:
            where += ", all rows on screen"
        name = f"render: one UI tick + repaint (CPU), {where}"
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
    parser.add_argument(
        "--one", type=int, nargs=3, metavar=("ROWS", "HEIGHT", "ROUNDS"), help=argparse.SUPPRESS
    )  # one measurement, as JSON (measure() runs it)
    args = parser.parse_args(argv)
    if args.one:
        nodes, height, rounds = args.one
        result = asyncio.run(measure_one(nodes, rounds=rounds, height=height, tune_gc=True))
        print(json.dumps(dataclasses.asdict(result)))
        return 0
    results, speed = around(lambda: measure(args.sizes, rounds=5 if args.quick else 20))
    print_table("Render: one UI tick (median)", figures(results, speed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
