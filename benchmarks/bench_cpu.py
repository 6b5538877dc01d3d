"""Own CPU and memory: the live monitor watching 8 nodes and 1 engine at 1 Hz.

1. ``sparktop --inventory <sim>`` runs as a user runs it, in a pseudo-terminal (200×50,
   its screen output read and thrown away), against ``sparktop sim`` in another process,
   so only the monitor's own CPU is counted. Once it has drawn every node and the engine,
   and after a 20 s warm-up (first polls, the node table's render caches filling), psutil
   reads the monitor's CPU time and RSS once a second for the measured window (60 s;
   ``--quick`` 15 s): CPU seconds per wall second and RSS growth over the window.
2. Hours at accelerated time: the real app, headless, fed by simulated sources
   (:mod:`benchmarks.simsources`, the ``tour`` scenario so alerts and events keep coming)
   with one-second polls on a fake clock, rendering every tick, for at least 60 simulated
   minutes and on until the events pane has held its 500 events for 20 more (the ``tour``
   scenario logs ~4 events a minute: full after about 130 minutes); history points,
   series, events, RSS and allocated Python blocks (``sys.getallocatedblocks``) are read
   at the end of every round of the scenario (the same phase each time), and the pane's
   count every simulated second. Blocks are read as a leak check reads them: after a full
   collection (``gc.collect()``) and with the Prometheus reader's page-to-page value memo
   emptied (``forget_values``: bounded, but that table fills with each scrape's new counter
   texts and starts over once full (``MAX_VALUES``; at 32,768, a ramp of ~60 k blocks and a
   drop about every hour), so counted with it the figure read where that table was in its
   fill: +3.3 % and -5.4 % on two runs); the count with it is printed too. Bounded means: no
   more history points at the end than at minute 20 (every series is full by then) and
   allocated Python blocks grow ≤ 1 % from the first checkpoint with the events pane full to
   the end. A run that ends before the pane is full (``--quick``, or the limit) says so and
   is judged from its last-but-one checkpoint. ``--trace`` (about 3× slower) prints
   tracemalloc's largest growths by file:line between checkpoints.

Run: ``python benchmarks/bench_cpu.py [--quick] [--only cpu|history] [--trace]``
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmarks.common import (
    ROOT,
    Figure,
    arg_parser,
    check,
    held_blocks,
    info,
    print_table,
    sim_process,
)
from benchmarks.reference import Speed, around, check_scaled
from benchmarks.simsources import SimSources
from sparktop.sim.scenarios import SCENARIOS

NODES, ENGINES = 8, 1
CPU_TARGET = 0.03
WARMUP_S = 20.0
"""Start-up, the first polls and the node table's render caches filling (about 20 s)."""
RSS_TARGET_MB = 5.0
CHECKPOINT_S = int(SCENARIOS["tour"].period_s or 380)
"""Every round of the ``tour`` scenario (380 s): each checkpoint sees the same phase, so the
simulated engine's own requests (in this process) are alike at every checkpoint."""
SETTLE_S = 1200
"""Simulated seconds measured once the events pane is full (history is full after 600 s)."""
LIMIT_MINUTES = 240
"""The longest simulated run: the pane fills after about 130 minutes."""
BLOCKS_GROWTH_PCT = 1.0
QUICK_MINUTES = 32
"""Five rounds of the scenario: two checkpoints past minute 20."""
SIZE = (200, 50)
MB = 1024 * 1024


@dataclass(slots=True)
class CpuRun:
    seconds: float
    cpu_s: float
    rss_start_mb: float
    rss_end_mb: float
    rss_max_mb: float
    screen_ok: bool
    rss_mb: list[float] = field(default_factory=list)

    @property
    def cpu_per_s(self) -> float:
        return self.cpu_s / self.seconds

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_end_mb - self.rss_start_mb


DRAWN_WITHIN_S = 120.0
"""How long the monitor may take to draw every node and the engine (start-up on a loaded
machine: the interpreter, Textual, the first SSH connections and scrape)."""


class _Drain(threading.Thread):
    """Reads the monitor's terminal output (a real terminal would) and keeps the tail;
    ``drawn`` is set once every name in ``wanted`` has been on the screen."""

    def __init__(self, fd: int, wanted: tuple[bytes, ...] = ()) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.tail = b""
        self.total = 0
        self.missing = set(wanted)
        self.drawn = threading.Event()
        if not self.missing:
            self.drawn.set()

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.total += len(chunk)
            self.tail = (self.tail + chunk)[-200_000:]
            if self.missing:
                # The tail, not the chunk: a name may be split between two reads.
                self.missing = {name for name in self.missing if name not in self.tail}
                if not self.missing:
                    self.drawn.set()


def run_monitor(inventory: Path, warmup_s: float, measure_s: float, nodes: int = NODES) -> CpuRun:
    """Run the monitor in a pty against ``inventory``; measure it after ``warmup_s``."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
    command = [sys.executable, "-m", "sparktop", "--inventory", str(inventory)]
    child = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    wanted = (*(f"spark-{i}".encode() for i in range(1, nodes + 1)), b"dsv41")
    drain = _Drain(master, wanted)
    drain.start()
    proc = psutil.Process(child.pid)
    try:
        # Warm-up starts once the screen is up (awaited, not guessed: on a loaded machine
        # the start-up alone took longer than a short warm-up).
        drain.drawn.wait(DRAWN_WITHIN_S)
        time.sleep(warmup_s)
        if child.poll() is not None:
            raise RuntimeError(f"monitor exited early: {drain.tail[-2000:]!r}")
        t0, cpu0 = time.monotonic(), _cpu(proc)
        rss = [proc.memory_info().rss / MB]
        while time.monotonic() - t0 < measure_s:
            time.sleep(1.0)
            rss.append(proc.memory_info().rss / MB)
        seconds, cpu = time.monotonic() - t0, _cpu(proc) - cpu0
        screen_ok = drain.drawn.is_set()
    finally:
        with contextlib.suppress(OSError):
            os.write(master, b"q")
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        os.close(master)
    return CpuRun(seconds, cpu, rss[0], rss[-1], max(rss), screen_ok, rss)


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def measure_cpu(
    *, warmup_s: float = WARMUP_S, measure_s: float = 60.0, nodes: int = NODES
) -> CpuRun:
    """The monitor against ``sparktop sim`` with ``nodes`` nodes and one engine."""
    with sim_process(nodes, ENGINES) as sim:
        return run_monitor(sim.inventory, warmup_s, measure_s, nodes)


# -- an hour at accelerated time -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkpoint:
    at_s: int
    """Simulated seconds since the start."""
    history_points: int
    series: int
    events: int
    rss_mb: float
    blocks: int
    """Allocated Python blocks as a leak check reads them (``held_blocks``)."""
    blocks_held: int
    """The same with the page reader's value memo as it was."""
    values: int
    """Value texts in the page reader's memo."""
    full_s: int | None = None
    """When the events pane first held its maximum (simulated seconds; every bounded buffer
    is full from then on), None while it has not."""

    @property
    def full(self) -> bool:
        return self.full_s is not None

    @property
    def minute(self) -> float:
        return self.at_s / 60


async def simulated_hour(
    minutes: int = 60,
    nodes: int = NODES,
    every_s: int = CHECKPOINT_S,
    settle_s: int = SETTLE_S,
    limit_minutes: int = LIMIT_MINUTES,
    trace: bool = False,
) -> list[Checkpoint]:
    """Poll simulated sources once per simulated second, rendering each tick, with a
    checkpoint every ``every_s`` simulated seconds: for at least ``minutes``, and on until
    ``settle_s`` after the first checkpoint with the events pane full (``MAX_EVENTS``, read
    every second), at most ``limit_minutes``. With ``trace``, tracemalloc's top growths
    between checkpoints are printed."""
    from sparktop.plan import Plan
    from sparktop.ui.app import SparktopApp
    from sparktop.ui.widgets.event_log import MAX_EVENTS, EventLog

    sim = SimSources(nodes, ENGINES, scenario="tour")
    plan = Plan.from_layout(f"sim-{nodes}x", sim.groups, interval_s=1.0)
    app = SparktopApp(plan, sim.sources, plan.alert_engine(), clock=sim.wall, autostart=False)
    points: list[Checkpoint] = []
    before: tracemalloc.Snapshot | None = None
    me = psutil.Process()
    full_s: int | None = None
    settled_s: int | None = None
    if trace:
        tracemalloc.start(1)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(EventLog).events
        for second in range(1, limit_minutes * 60 + 1):
            sim.advance(1.0)
            await app.poller.poll_once()
            app.tick()
            if second % 10 == 0:
                await pilot.pause(0)  # let Textual paint now and then
            if full_s is None and len(pane) >= MAX_EVENTS:
                full_s = second
            if second % every_s:
                continue
            await pilot.pause()
            held = held_blocks()
            points.append(
                Checkpoint(
                    second,
                    app.state.history.point_count(),
                    len(app.state.history),
                    len(pane),
                    me.memory_info().rss / MB,
                    held.blocks,
                    held.with_memos,
                    held.values,
                    full_s=full_s,
                )
            )
            if trace:
                before = _trace_growth(points[-1], before)
            if settled_s is None and full_s is not None:
                settled_s = second
            if second >= minutes * 60 and settled_s is not None and second - settled_s >= settle_s:
                break
    return points


TRACE_TOP = 10


def _trace_growth(point: Checkpoint, before: tracemalloc.Snapshot | None) -> tracemalloc.Snapshot:
    """Print tracemalloc's largest growths by file:line since ``before``; returns the new
    snapshot."""
    now = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    if before is not None:
        print(f"  tracemalloc, min {point.minute:.0f}, largest growths since the last checkpoint:")
        for stat in now.compare_to(before, "lineno")[:TRACE_TOP]:
            print(f"      {stat}", flush=True)
    return now


def quick_hour() -> list[Checkpoint]:
    """--quick: 32 simulated minutes; the events pane is not full yet (judged as such)."""
    return asyncio.run(simulated_hour(QUICK_MINUTES, limit_minutes=QUICK_MINUTES))


def history_bounded(points: list[Checkpoint]) -> tuple[bool, str]:
    """Bounded: history points no higher at the end than at minute 20 (every series is full
    by then), and allocated Python blocks grow ≤ 1 % from the first checkpoint with the
    events pane full to the end (without one: from the last-but-one checkpoint, and the
    text says the pane was not full)."""
    full = next((p for p in points if p.minute >= 20), points[0])
    settled = next((p for p in points if p.full), points[max(0, len(points) - 2)])
    end = points[-1]
    blocks_pct = (end.blocks - settled.blocks) / settled.blocks * 100
    ok = end.history_points <= full.history_points and blocks_pct <= BLOCKS_GROWTH_PCT
    if end.full_s is not None:
        pane = f"events pane full since min {end.full_s / 60:.0f}"
    else:
        pane = f"events pane not full: {end.events} events"
    text = (
        f"points {full.history_points:,}→{end.history_points:,} "
        f"(min {full.minute:.0f}→{end.minute:.0f}), "
        f"Python blocks {blocks_pct:+.1f} %, RSS {end.rss_mb - settled.rss_mb:+.1f} MB "
        f"(min {settled.minute:.0f}→{end.minute:.0f}, {pane})"
    )
    return ok, text


# -- figures ---------------------------------------------------------------------------------


def figures(run: CpuRun | None, hour: list[Checkpoint], speed: Speed | None) -> list[Figure]:
    """The CPU target is scaled by the machine's speed around the CPU run
    (:mod:`benchmarks.reference`); RSS and history are not times and are not scaled. A part
    not run (``--only``) gives no figures."""
    out = [] if run is None or speed is None else cpu_figures(run, speed)
    if not hour:
        return out
    ok, text = history_bounded(hour)
    end = hour[-1]
    out.append(Figure(f"history over a simulated {end.minute:.0f} min stays bounded", text,
                      "points flat; blocks ≤ +1 %", ok))  # fmt: skip
    settled = next((p for p in hour if p.full), hour[max(0, len(hour) - 2)])
    out.append(info(
        "  Python blocks with the page reader's value memo, same span (value texts held)",
        f"{(end.blocks_held - settled.blocks_held) / settled.blocks_held * 100:+.1f} % "
        f"({settled.values:,} → {end.values:,})",
    ))  # fmt: skip
    out.append(info(f"  series | events at min {end.minute:.0f}", f"{end.series} | {end.events}"))
    return out


def cpu_figures(run: CpuRun, speed: Speed) -> list[Figure]:
    """Part 1's figures."""
    label = f"{NODES} nodes + {ENGINES} engine, 1 Hz, {run.seconds:.0f} s"
    return [
        check_scaled(
            f"monitor CPU s per wall s ({label})", run.cpu_per_s, CPU_TARGET, "{:.3f}", speed
        ),
        check(
            f"monitor RSS growth after warm-up ({label})",
            run.rss_growth_mb,
            RSS_TARGET_MB,
            "{:.1f} MB",
        ),
        info("monitor RSS start | max", f"{run.rss_start_mb:.0f} | {run.rss_max_mb:.0f} MB"),
        Figure(
            "monitor drew every node and the engine",
            "yes" if run.screen_ok else "no",
            "yes",
            run.screen_ok,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="15 s window, a shorter simulated run")
    parser.add_argument("--seconds", type=float, help="measured window (default 60, quick 15)")
    parser.add_argument(
        "--only", choices=("cpu", "history"), help="run one part: 1 (cpu) or 2 (history)"
    )
    parser.add_argument(
        "--trace", action="store_true",
        help="part 2: tracemalloc's top growths between checkpoints (about 3x slower)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    seconds = args.seconds or (15.0 if args.quick else 60.0)
    warmup_s = WARMUP_S / 2 if args.quick else WARMUP_S
    run: CpuRun | None = None
    speed: Speed | None = None
    if args.only != "history":
        run, speed = around(lambda: measure_cpu(warmup_s=warmup_s, measure_s=seconds))
    hour: list[Checkpoint] = []
    if args.only != "cpu":
        minutes, limit = (QUICK_MINUTES, QUICK_MINUTES) if args.quick else (60, LIMIT_MINUTES)
        hour = asyncio.run(simulated_hour(minutes, limit_minutes=limit, trace=args.trace))
    extra = [] if speed is None else [speed.figure()]
    print_table("Own CPU and memory", [*figures(run, hour, speed), *extra])
    for p in hour:
        print(
            f"  min {p.minute:>5.1f}: {p.history_points:>7,} points in {p.series} series, "
            f"{p.events} events, RSS {p.rss_mb:.1f} MB, {p.blocks:,} Python blocks "
            f"({p.blocks_held:,} with the value memo, {p.values:,} texts)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
