"""Bounded for days: the monitor's memory over hours of simulated time, with every output on.

The real app (headless, rendering every tick) watches 8 nodes and 2 engines fed by
simulated sources (:mod:`benchmarks.simsources`, the ``tour`` scenario: thermal and
low-power faults, a node down and back, floods, an engine restart, long contexts, round
after round), on a fake clock moved one second a poll, so hours pass in minutes. The alert
engine is wrapped as ``sparktop --record FILE.zst --on-alert CMD --alert-log FILE`` wraps it
(:class:`~sparktop.alerts.pipeline.AlertOutputs` from the same options): every tick is
recorded, every alert event runs a real command (``true``) and is logged.

At every round of the scenario (380 simulated seconds: the same phase each time) the
process's RSS and allocated Python blocks are read after a full collection (``gc.collect()``),
with the value texts the Prometheus reader keeps from page to page (a memo bounded at
``MAX_VALUES`` that fills with each scrape's new counter texts and starts over: ~2 blocks a
text of ramp and drop, not growth; left as it is, since RSS is what a user pays);
with ``--trace`` (slower), tracemalloc's largest growths by file:line between checkpoints
are printed too. Judged: RSS growth from the first checkpoint at or after minute 30 to the end
≤ 5 MB, over at least 2 hours (``--minutes``; ``--quick`` runs 40 minutes and judges
nothing). The events pane keeps its last 500 events (the ``tour`` logs ~3 a minute, so it
fills near minute 155): its growth until then is inside the judged span, and the growth
once it is full is printed apart (``--minutes 270``: the pane full for nearly two hours).

Run: ``python benchmarks/bench_soak.py [--quick] [--minutes 150] [--trace]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmarks.common import Figure, arg_parser, check, info, print_table
from benchmarks.simsources import SimSources
from sparktop.sim.scenarios import SCENARIOS

NODES, ENGINES = 8, 2
CHECKPOINT_S = int(SCENARIOS["tour"].period_s or 380)
SETTLE_MINUTES = 30
"""Growth is judged from here: history full (10 min), the estimator's memo and the events
pane filling (the pane's 500 events take longer; what it holds is bounded by count)."""
GROWTH_TARGET_MB = 5.0
MINUTES = SETTLE_MINUTES + 120
QUICK_MINUTES = 40
SIZE = (200, 50)
MB = 1024 * 1024
TOP = 8


@dataclass(frozen=True, slots=True)
class Point:
    at_s: int
    rss_mb: float
    blocks: int
    values: int
    """Value texts in the Prometheus reader's memo (it starts over at ``MAX_VALUES``)."""
    events: int
    wall_s: float

    @property
    def minute(self) -> float:
        return self.at_s / 60


def _outputs(workdir: Path) -> argparse.Namespace:
    """The monitor's own option parser, given ``--record``, ``--on-alert`` and
    ``--alert-log`` as a user would."""
    from sparktop.alerts.options import add_output_arguments

    parser = argparse.ArgumentParser()
    add_output_arguments(parser)
    return parser.parse_args(
        [
            "--record", str(workdir / "soak.jsonl.zst"),
            "--on-alert", "true",
            "--alert-log", str(workdir / "alerts.jsonl"),
        ]
    )  # fmt: skip


async def soak(minutes: int, workdir: Path, trace: bool) -> list[Point]:
    """Poll, tick and render once a simulated second for ``minutes``; a :class:`Point` every
    round of the scenario (printed as it comes, with tracemalloc's top growth if ``trace``)."""
    from sparktop.alerts.pipeline import AlertOutputs
    from sparktop.plan import Plan
    from sparktop.sources.exposition.tables import memo_sizes
    from sparktop.ui.app import SparktopApp
    from sparktop.ui.widgets.event_log import EventLog

    sim = SimSources(NODES, ENGINES, scenario="tour")
    plan = Plan.from_layout(f"sim-{NODES}x", sim.groups, interval_s=1.0)
    outputs = AlertOutputs.from_args(_outputs(workdir))
    alerts = outputs.wrap(plan.alert_engine(), plan.header())
    app = SparktopApp(plan, sim.sources, alerts, clock=sim.wall, autostart=False)
    me = psutil.Process()
    points: list[Point] = []
    start = time.monotonic()
    before: tracemalloc.Snapshot | None = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            pane = app.query_one(EventLog).events
            for second in range(1, minutes * 60 + 1):
                sim.advance(1.0)
                await app.poller.poll_once()
                app.tick()
                if second % 10 == 0:
                    await pilot.pause(0)  # let Textual paint and the hooks run now and then
                if second % CHECKPOINT_S:
                    continue
                await pilot.pause()
                gc.collect()
                point = Point(
                    second, me.memory_info().rss / MB, sys.getallocatedblocks(),
                    memo_sizes()["values"], len(pane), time.monotonic() - start,
                )  # fmt: skip
                points.append(point)
                print(
                    f"  min {point.minute:>5.1f}: RSS {point.rss_mb:6.1f} MB, "
                    f"{point.blocks:>9,} Python blocks ({point.values:,} value texts), "
                    f"{point.events} events "
                    f"({point.wall_s:.0f} s wall)",
                    flush=True,
                )
                if trace:
                    now = tracemalloc.take_snapshot().filter_traces(
                        [tracemalloc.Filter(False, tracemalloc.__file__)]
                    )
                    if before is not None:
                        for stat in now.compare_to(before, "lineno")[:TOP]:
                            print(f"      {stat}", flush=True)
                    before = now
    finally:
        outputs.close()
    return points


def figures(points: list[Point], minutes: int) -> list[Figure]:
    """Growth from the first checkpoint at or after minute 30 to the last one."""
    settled = next((p for p in points if p.minute >= SETTLE_MINUTES), points[0])
    end = points[-1]
    span = end.minute - settled.minute
    label = f"{NODES} nodes + {ENGINES} engines, tour faults, --record, --on-alert, --alert-log"
    out = [info("soak", f"{label}; {end.minute:.0f} simulated min in {end.wall_s:.0f} s wall")]
    growth = end.rss_mb - settled.rss_mb
    name = f"RSS growth, min {settled.minute:.0f} → {end.minute:.0f} ({span:.0f} min)"
    if span >= 120:
        out.append(check(name, growth, GROWTH_TARGET_MB, "{:+.1f} MB"))
    else:
        out.append(info(name + " (shorter than 2 h: not judged)", f"{growth:+.1f} MB"))
    from sparktop.ui.widgets.event_log import MAX_EVENTS

    full = next((p for p in points if p.events >= MAX_EVENTS), None)
    if full is not None and full is not end:
        out.append(info(
            f"  of which once the events pane is full (min {full.minute:.0f} → {end.minute:.0f})",
            f"{end.rss_mb - full.rss_mb:+.1f} MB",
        ))  # fmt: skip
    blocks = (end.blocks - settled.blocks) / settled.blocks * 100
    out.append(info(
        "Python blocks growth, same span (value texts in the reader's memo)",
        f"{blocks:+.1f} % ({settled.values:,} → {end.values:,})",
    ))  # fmt: skip
    out.append(info("RSS first | settled | end", " | ".join(
        f"{p.rss_mb:.0f} MB" for p in (points[0], settled, end))))  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick=f"{QUICK_MINUTES} simulated minutes, not judged")
    parser.add_argument("--minutes", type=int, help=f"simulated minutes (default {MINUTES})")
    parser.add_argument("--trace", action="store_true", help="tracemalloc top growth (slower)")
    args = parser.parse_args(argv)
    minutes = args.minutes or (QUICK_MINUTES if args.quick else MINUTES)
    if args.trace:
        tracemalloc.start(1)
    with tempfile.TemporaryDirectory(prefix="sparktop-soak-") as tmp:
        points = asyncio.run(soak(minutes, Path(tmp), args.trace))
    figs = figures(points, minutes)
    print_table("Bounded for days (simulated time)", figs)
    return 0 if all(f.passed is not False for f in figs) else 1


if __name__ == "__main__":
    sys.exit(main())
