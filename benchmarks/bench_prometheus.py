"""Scale through Prometheus: 256 simulated nodes read from a real Prometheus, against SSH
polling of 32 and 64 nodes on the same machine.

The simulator runs in a child process with a dcgm-exporter and a node_exporter page per node
(:mod:`benchmarks.promfarm`), scraped by Debian's ``prometheus`` every 5 s. sparktop then
polls the whole cluster through Prometheus (``source: prometheus``: one batched
``/api/v1/query`` per tick for every node) and, for comparison, 32 and 64 simulated nodes over
loopback SSH the way the monitor does (one persistent connection per node). Figures per poll
cycle (one tick): HTTP queries, this process's CPU seconds (the head node's cost), wall time;
and this process's RSS after the polls. Prometheus's own CPU per tick is shown too (it runs
somewhere, often on the head node). The simulator's CPU is not counted.

Run: ``python benchmarks/bench_prometheus.py [--quick] [--nodes 256]``
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
import yaml

from benchmarks import bench_poll
from benchmarks.common import (
    ROOT,
    Figure,
    arg_parser,
    check,
    info,
    print_table,
    sim_process,
    stop_child,
)
from sparktop.inventory import parse_inventory
from sparktop.plan import Plan
from sparktop.poller import Poller
from sparktop.sim.promrun import missing_binaries, start_prometheus, until

FARM = Path(__file__).resolve().parent / "promfarm.py"
SCRAPE_S = 5.0


@dataclass(frozen=True, slots=True)
class PromRun:
    nodes: int
    queries_per_tick: float
    cpu_s: float
    wall_s: float
    rss_mb: float
    prometheus_cpu_s: float
    ok: int
    polled: int


async def poll_through(inventory_text: str, cycles: int, prom_pid: int) -> PromRun:
    inventory = parse_inventory(inventory_text, "prom-cluster.yaml")
    sources = Plan.from_inventory(inventory).sources()
    hub = sources[0].hub  # type: ignore[attr-defined]
    poller = Poller(sources, inventory.interval_s, lambda s: None)
    prom = psutil.Process(prom_pid)
    try:
        await poller.poll_once()  # connection set up: not part of a cycle
        cpu, wall, ok, polled = [], [], 0, 0
        queries0 = hub.queries
        prom0 = sum(prom.cpu_times()[:2])
        for _ in range(cycles):
            hub.next_tick()  # every cycle is a tick of its own
            c, t = time.process_time(), time.perf_counter()
            samples = await poller.poll_once()
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - t)
            ok += sum(1 for s in samples if s.ok)
            polled += len(samples)
        prom_cpu = (sum(prom.cpu_times()[:2]) - prom0) / cycles
        rss = psutil.Process().memory_info().rss / 2**20
        return PromRun(
            len(inventory.nodes),
            (hub.queries - queries0) / cycles,
            statistics.median(cpu),
            statistics.median(wall),
            rss,
            prom_cpu,
            ok,
            polled,
        )
    finally:
        await poller.aclose()


def _subset(text: str, url: str, nodes: int) -> str:
    doc = yaml.safe_load(text)
    doc["prometheus"]["url"] = url
    doc["nodes"] = doc["nodes"][:nodes]
    doc["engines"] = []
    return yaml.safe_dump(doc, sort_keys=False)


def measure_prometheus(nodes: int, cycles: int) -> tuple[PromRun, PromRun]:
    """(all ``nodes``, the first 32) read through one real Prometheus."""
    with tempfile.TemporaryDirectory(prefix="sparktop-prom-bench-") as tmp:
        out = Path(tmp)
        log = open(out / "farm.log", "w+")  # noqa: SIM115 - closed below
        farm = subprocess.Popen(
            [
                sys.executable,
                str(FARM),
                "--nodes",
                str(nodes),
                "--dir",
                tmp,
                "--scrape-s",
                f"{SCRAPE_S:g}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        try:
            deadline = time.monotonic() + 120
            while "running" not in (out / "farm.log").read_text():
                if farm.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((out / "farm.log").read_text()[-2000:])
                time.sleep(0.1)
            config = yaml.safe_load((out / "prometheus.yml").read_text())
            text = (out / "prom-cluster.yaml").read_text()
            return asyncio.run(_with_prometheus(config, text, out, nodes, cycles))
        finally:
            stop_child(farm)
            log.close()


async def _with_prometheus(
    config: dict[str, object], text: str, out: Path, nodes: int, cycles: int
) -> tuple[PromRun, PromRun]:
    prom = await start_prometheus(config, out / "prometheus")
    try:
        targets = 2 * nodes
        await prom.until_series("up == 1", targets, timeout_s=120)
        await until(
            lambda: prom.query("count(DCGM_FI_DEV_SM_CLOCK)"),
            lambda r: bool(r) and int(float(r[0]["value"][1])) == nodes,
            60,
            "every node's SM clock",
        )
        full = await poll_through(_subset(text, prom.url, nodes), cycles, prom.process.pid)
        small = await poll_through(_subset(text, prom.url, 32), cycles, prom.process.pid)
        return full, small
    finally:
        prom.close()


def measure_ssh(sizes: tuple[int, ...], cycles: int) -> dict[int, bench_poll.Cycles]:
    out: dict[int, bench_poll.Cycles] = {}
    with sim_process(max(sizes)) as sim:
        from sparktop.inventory import load_inventory

        inventory = load_inventory(sim.inventory)
        for n in sizes:
            out[n] = asyncio.run(
                bench_poll.poll_sparktop(inventory, inventory.nodes[:n], cycles, sim)
            )
    return out


def figures(prom: PromRun, small: PromRun, ssh: dict[int, bench_poll.Cycles]) -> list[Figure]:
    n = prom.nodes
    ssh32, ssh64 = ssh[32], ssh[64]
    ratio = prom.cpu_s / ssh32.client_cpu_s if ssh32.client_cpu_s else float("inf")
    return [
        check(
            f"HTTP queries per tick, {n} nodes via Prometheus (32 nodes: "
            f"{small.queries_per_tick:g})",
            prom.queries_per_tick,
            small.queries_per_tick,
            "{:g}",
        ),
        check(
            f"head CPU per tick: {n} nodes via Prometheus ÷ 32 nodes over SSH",
            ratio,
            1.0,
            "{:.2f}×",
        ),
        info(
            f"head CPU per tick: {n} via Prometheus | 32 | 64 over SSH",
            f"{prom.cpu_s * 1000:.1f} | {ssh32.client_cpu_s * 1000:.1f} | "
            f"{ssh64.client_cpu_s * 1000:.1f} ms",
        ),
        info(
            f"poll wall time: {n} via Prometheus | 32 | 64 over SSH",
            f"{prom.wall_s * 1000:.0f} | {ssh32.median_ms:.0f} | {ssh64.median_ms:.0f} ms",
        ),
        info(f"sparktop RSS after polling {n} nodes via Prometheus", f"{prom.rss_mb:.0f} MB"),
        info(
            f"Prometheus's own CPU per tick ({n} nodes, {2 * n} targets at {SCRAPE_S:g} s)",
            f"{prom.prometheus_cpu_s * 1000:.0f} ms",
        ),
        info(
            "rows read OK",
            f"{prom.ok}/{prom.polled} via Prometheus, {ssh64.ok}/{ssh64.polled} over SSH (64)",
        ),
    ]


def run(quick: bool = False, nodes: int = 256) -> list[Figure]:
    missing = missing_binaries("prometheus")
    if missing:
        return [info("scale through Prometheus", f"skipped: {', '.join(missing)} not installed")]
    cycles = 5 if quick else 15
    prom, small = measure_prometheus(nodes, cycles)
    ssh = measure_ssh((32, 64), cycles)
    return figures(prom, small, ssh)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="fewer repeats")
    parser.add_argument("--nodes", type=int, default=256)
    args = parser.parse_args(argv)
    table = run(args.quick, args.nodes)
    print_table("Scale through Prometheus (per poll tick)", table)
    return 0 if all(f.passed is not False for f in table) else 1


if __name__ == "__main__":
    sys.exit(main())
