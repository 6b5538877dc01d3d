"""Measure the UI at scale: tick time with 64 GPU rows and 4 engines, and CPU at 1 Hz.

``python -m sparktop.ui.bench [--nodes 16 --gpus 4 --engines 4 --seconds 20]`` runs the app
headless on the in-process fakes of :mod:`sparktop.ui.preview` and prints:

- ``tick``: :meth:`SparktopApp.tick` alone (state → changed cells), every sample new;
- ``tick+paint``: the tick plus Textual processing and painting the result;
- ``cpu``: the process's CPU time over wall time while polling and ticking at 1 Hz.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from sparktop.model import Source
from sparktop.ui.app import SparktopApp
from sparktop.ui.preview import fake_cluster


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(values) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms"


async def measure(nodes: int, gpus: int, engines: int, ticks: int, seconds: float) -> None:
    node_list, engine_list = fake_cluster(nodes, gpus, engines)
    sources: list[Source] = [*node_list, *engine_list]
    groups = {e.name: tuple(n.name for n in node_list) for e in engine_list}
    app = SparktopApp(sources, autostart=False, cluster="bench", tp_groups=groups)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(3):
            await app.poller.poll_once()
            app.tick()
            await pilot.pause()
        tick, painted = [], []
        for _ in range(ticks):
            await app.poller.poll_once()
            started = time.perf_counter()
            app.tick()
            tick.append(time.perf_counter() - started)
            await pilot.pause()
            painted.append(time.perf_counter() - started)
        rows = app.query_one("#nodes").row_count  # type: ignore[attr-defined]
        print(f"{rows} GPU rows, {len(engine_list)} engines, {ticks} ticks")
        print(f"tick        {_ms(tick)} (cells written last tick: {app.last_tick_cells})")
        print(f"tick+paint  {_ms(painted)}")
        app.poller.start()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        print(f"cpu         {cpu / wall * 100:.1f} % of one core at 1 Hz over {wall:.0f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=4, help="GPUs per node")
    parser.add_argument("--engines", type=int, default=4)
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    asyncio.run(measure(args.nodes, args.gpus, args.engines, args.ticks, args.seconds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
