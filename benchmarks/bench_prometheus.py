"""Scale through Prometheus: 256 simulated nodes read from a real Prometheus, against SSH
polling of 32 and 64 nodes on the same machine.

The simulator runs in a child process with a dcgm-exporter and a node_exporter page per node
(:mod:`benchmarks.promfarm`), scraped by Debian's ``prometheus`` every 5 s. sparktop then
polls the whole cluster through Prometheus (``source: prometheus``: one batched
``/api/v1/query`` per tick for every node) and, for comparison, 32 and 64 simulated nodes over
loopback SSH the way the monitor does (one persistent connection per node), with the
monitor's collector settings (:mod:`sparktop.gcpolicy`); both ways record their samples in a
:class:`~sparktop.cluster.ClusterState` as the monitor does. Each way ticks at 1 s in blocks
that alternate with the other ways' (:class:`Way`). Figures per tick: HTTP queries, this
process's CPU seconds over a block ÷ its ticks (the head node's cost; median of the blocks),
the poll's wall time; and this process's RSS after the first block through Prometheus.
The judged ratio is sparktop's process alone; the same ratio with Prometheus's own CPU over
the same blocks added (its process's user + system time, ``/proc/<pid>/stat`` through
psutil: its scraping of every exporter and its answer to the query) is printed beside it,
as Prometheus runs somewhere, often on the head node. The simulator's CPU is not counted.

Run: ``python benchmarks/bench_prometheus.py [--quick] [--nodes 256]``
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
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
from sparktop import gcpolicy
from sparktop.cluster import ClusterState
from sparktop.inventory import Inventory, load_inventory, parse_inventory
from sparktop.plan import Plan
from sparktop.poller import Poller
from sparktop.sim.promrun import missing_binaries, start_prometheus, until
from sparktop.sources.prometheus.hub import PromHub

FARM = Path(__file__).resolve().parent / "promfarm.py"
SCRAPE_S = 5.0
TICKS = 5


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
    failure: str = ""
    """The commonest reason a row was not read (with its count), "" when every row was."""


CADENCE_S = 1.0
"""Every way ticks at the monitor's 1 s (the simulator's interval): a tick's CPU includes what
the way does between polls (the streaming probe's rows arrive then)."""


class Way:
    """One way of polling, measured in blocks of ticks at :data:`CADENCE_S`, the ways' blocks
    alternating: this VM's speed drifts by a quarter within minutes (measured back to back,
    256 nodes through Prometheus gave 22-31 ms a tick from one run to the next, and the SSH
    side it is divided by 21-32 ms). A block has its own poller, closed after it, so no way's
    background (SSH streams) is counted in another's."""

    def __init__(self, make: Callable[[], tuple[Poller, PromHub | None]], prom_pid: int = 0):
        self.make = make
        self.cycles = bench_poll.Cycles()
        self.block_cpu_s: list[float] = []
        self.queries = 0
        self.prometheus_cpu_s: list[float] = []
        self.rss_mb = 0.0
        self.failures: Counter[str] = Counter()
        self._prom = psutil.Process(prom_pid) if prom_pid else None

    def _prom_cpu(self) -> float:
        return sum(self._prom.cpu_times()[:2]) if self._prom else 0.0

    async def block(self, ticks: int) -> None:
        poller, hub = self.make()
        loop = asyncio.get_running_loop()
        try:
            await poller.poll_once()  # connections set up, field set learned: not counted
            await asyncio.sleep(CADENCE_S)
            await poller.poll_once()  # streams started
            queries, prom = hub.queries if hub else 0, self._prom_cpu()
            cpu, due = time.process_time(), loop.time()
            for _ in range(ticks):  # the window: ``ticks`` intervals, each ending in a poll
                due += CADENCE_S
                await asyncio.sleep(max(0.0, due - loop.time()))
                started = time.perf_counter()
                samples = await poller.poll_once()
                self.cycles.seconds.append(time.perf_counter() - started)
                self.cycles.ok += sum(1 for s in samples if s.ok)
                self.cycles.polled += len(samples)
                self.failures.update(f"{s.state}: {s.message[:90]}" for s in samples if not s.ok)
            self.block_cpu_s.append((time.process_time() - cpu) / ticks)
            self.prometheus_cpu_s.append((self._prom_cpu() - prom) / ticks)
            self.queries += (hub.queries - queries) if hub else 0
            self.rss_mb = max(self.rss_mb, psutil.Process().memory_info().rss / 2**20)
        finally:
            await poller.aclose()

    def result(self, nodes: int) -> PromRun:
        ticks = max(1, len(self.cycles.seconds))
        return PromRun(
            nodes,
            self.queries / ticks,
            statistics.median(self.block_cpu_s),
            self.cycles.median_ms / 1000,
            self.rss_mb,
            statistics.median(self.prometheus_cpu_s),
            self.cycles.ok,
            self.cycles.polled,
            next((f"{n}× {why}" for why, n in self.failures.most_common(1)), ""),
        )

    def ssh_cycles(self) -> bench_poll.Cycles:
        self.cycles.cpu = [statistics.median(self.block_cpu_s)]
        return self.cycles


def prom_way(inventory_text: str, prom_pid: int) -> tuple[Way, int]:
    """Every node of ``inventory_text`` through its Prometheus (and how many nodes)."""
    inventory = parse_inventory(inventory_text, "prom-cluster.yaml")

    def make() -> tuple[Poller, PromHub | None]:
        sources = Plan.from_inventory(inventory).sources()
        hub = sources[0].hub  # type: ignore[attr-defined]
        # Recorded as the monitor records them, as the SSH way's are (it was left out here).
        return Poller(sources, inventory.interval_s, ClusterState().apply), hub

    return Way(make, prom_pid), len(inventory.nodes)


def ssh_way(inventory: Inventory, nodes: int) -> Way:
    """The monitor's SSH polling of the first ``nodes`` simulated nodes."""
    sub = inventory.model_copy(update={"nodes": inventory.nodes[:nodes], "engines": ()})

    def make() -> tuple[Poller, PromHub | None]:
        state = ClusterState()
        return Poller(Plan.from_inventory(sub).node_sources(), sub.interval_s, state.apply), None

    return Way(make)


def _subset(text: str, url: str, nodes: int) -> str:
    doc = yaml.safe_load(text)
    doc["prometheus"]["url"] = url
    doc["nodes"] = doc["nodes"][:nodes]
    doc["engines"] = []
    doc["interval_s"] = CADENCE_S  # the hub asks again every tick (it reuses within half of it)
    return yaml.safe_dump(doc, sort_keys=False)


@dataclass(frozen=True, slots=True)
class Measured:
    prom: PromRun
    small: PromRun
    ssh: dict[int, bench_poll.Cycles]


def measure(nodes: int, rounds: int) -> Measured:
    """``nodes`` and 32 read through one real Prometheus, 32 and 64 simulated nodes over SSH:
    ``rounds`` blocks of :data:`TICKS` ticks of each, alternating (32 through Prometheus: one
    block, for its query count)."""
    with tempfile.TemporaryDirectory(prefix="sparktop-prom-bench-") as tmp, sim_process(64) as sim:
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
            inventory = load_inventory(sim.inventory)
            threshold = gc.get_threshold()
            gcpolicy.tune()  # the monitor's process settings (sparktop.gcpolicy), both ways
            try:
                return asyncio.run(_with_prometheus(config, text, out, inventory, nodes, rounds))
            finally:
                gc.unfreeze()
                gc.set_threshold(*threshold)
        finally:
            stop_child(farm)
            log.close()


async def _with_prometheus(
    config: dict[str, object], text: str, out: Path, inventory: Inventory, nodes: int, rounds: int
) -> Measured:
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
        full, count = prom_way(_subset(text, prom.url, nodes), prom.process.pid)
        small, _ = prom_way(_subset(text, prom.url, 32), prom.process.pid)
        ssh32, ssh64 = ssh_way(inventory, 32), ssh_way(inventory, 64)
        for _ in range(rounds):
            for way in (full, ssh32, ssh64):
                await way.block(TICKS)
        await small.block(TICKS)
        return Measured(
            full.result(count),
            small.result(32),
            {32: ssh32.ssh_cycles(), 64: ssh64.ssh_cycles()},
        )
    finally:
        prom.close()


def figures(prom: PromRun, small: PromRun, ssh: dict[int, bench_poll.Cycles]) -> list[Figure]:
    n = prom.nodes
    ssh32, ssh64 = ssh[32], ssh[64]
    ratio = prom.cpu_s / ssh32.client_cpu_s if ssh32.client_cpu_s else float("inf")
    # Prometheus runs somewhere (often on the head node) and scrapes every node's exporters
    # whether sparktop reads it or not: shown beside the judged figure, not hidden.
    with_prom = (
        (prom.cpu_s + prom.prometheus_cpu_s) / ssh32.client_cpu_s
        if ssh32.client_cpu_s
        else float("inf")
    )
    return [
        check(
            f"HTTP queries per tick, {n} nodes via Prometheus (32 nodes: "
            f"{small.queries_per_tick:g})",
            prom.queries_per_tick,
            small.queries_per_tick,
            "{:g}",
        ),
        check(
            f"head CPU per tick: {n} nodes via Prometheus ÷ 32 nodes over SSH "
            "(sparktop's process only)",
            ratio,
            1.0,
            "{:.2f}×",
        ),
        info(
            f"… with Prometheus's own CPU (its process, /proc/<pid>/stat): ({n} via "
            "Prometheus + Prometheus) ÷ 32 over SSH",
            f"{with_prom:.2f}× (({prom.cpu_s * 1000:.1f} + {prom.prometheus_cpu_s * 1000:.0f}) "
            f"÷ {ssh32.client_cpu_s * 1000:.1f} ms)",
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
            f"{prom.ok}/{prom.polled} via Prometheus, {ssh64.ok}/{ssh64.polled} over SSH (64)"
            + (f"; most not read: {prom.failure}" if prom.failure else ""),
        ),
    ]


def run(quick: bool = False, nodes: int = 256) -> list[Figure]:
    missing = missing_binaries("prometheus")
    if missing:
        return [info("scale through Prometheus", f"skipped: {', '.join(missing)} not installed")]
    m = measure(nodes, 2 if quick else 4)
    return figures(m.prom, m.small, m.ssh)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="fewer repeats")
    parser.add_argument("--nodes", type=int, default=256)
    args = parser.parse_args(argv)
    table = run(args.quick, args.nodes)
    print_table("Scale through Prometheus (per poll tick)", table)
    return 0 if all(f.passed is not False for f in table) else 1


if __name__ == "__main__":
    sys.exit(main())
