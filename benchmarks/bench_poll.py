"""Poll fan-out: one full GPU poll of N simulated nodes over real loopback SSH, three ways.

- **sparktop**: one persistent asyncssh connection per node (already open), the batched probe
  on every node at once, parsed into samples and applied to a ``ClusterState``
  (``Poller.poll_once``);
- **(a) sequential ssh**: what a shell loop does, ``for n in nodes; ssh n '<probe>'``, with
  OpenSSH's ``ssh`` (a fresh process and connection per node, host keys verified);
- **(b) parallel fresh connections**: what ``watch``/``pdsh``-style loops do, a new asyncssh
  connection per node per poll, all nodes at once (connect, run the probe, close).

Every variant runs the same probe command and parses its output, against the same simulator
in a child process (its CPU is not ours). The simulator answers instantly; with
``--nvsmi-ms`` each nvidia-smi call on a node takes that long, as a real one does, which is
what a concurrent poll can overlap. Figures are medians of several cycles in one run; the
ratios are the portable numbers.

Run: ``python benchmarks/bench_poll.py [--quick] [--nvsmi-ms 40]``
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import asyncssh
from asyncssh.encryption import get_default_encryption_algs

from benchmarks.common import Figure, SimProcess, arg_parser, check, info, print_table, sim_process
from sparktop.cluster import ClusterState
from sparktop.inventory import Inventory, NodeConfig, load_inventory
from sparktop.plan import Plan
from sparktop.poller import Poller
from sparktop.sources.nvsmi import parse_probe_output
from sparktop.sources.probe import FIELD_SETS, probe_command
from sparktop.sources.ssh.util import gcm_first

SIZES = (1, 8, 32, 64)
NVSMI_MS = 40.0
"""Default time one nvidia-smi call takes on a node in the benchmark (an assumption: the
simulator has none; a real call loads NVML and walks the devices before it prints)."""
PROBE = probe_command(FIELD_SETS[0])
CIPHERS = gcm_first(get_default_encryption_algs())
SSH_BINARY = "/usr/bin/ssh"


@dataclass(slots=True)
class Cycles:
    """Wall seconds per poll cycle for one way of polling N nodes."""

    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    """This process's CPU seconds per cycle (the head node's, for sparktop and (b))."""
    server_cpu_s: float = 0.0
    ok: int = 0
    polled: int = 0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def client_cpu_s(self) -> float:
        """Median CPU seconds per cycle in this process (0 when not measured here)."""
        return statistics.median(self.cpu) if self.cpu else 0.0


@dataclass(frozen=True, slots=True)
class Repeats:
    sparktop: int
    fresh: int
    sequential: int


def repeats_for(nodes: int, quick: bool) -> Repeats:
    if quick:
        return Repeats(sparktop=5, fresh=2, sequential=1)
    if nodes <= 8:
        return Repeats(sparktop=20, fresh=5, sequential=3)
    return Repeats(sparktop=10, fresh=3, sequential=1 if nodes > 32 else 2)


class CpuMeter:
    """CPU seconds the simulator (the nodes) spent per cycle."""

    def __init__(self, sim: SimProcess | None) -> None:
        self.sim = sim
        self.server = sim.cpu_s() if sim else 0.0

    def stop(self, result: Cycles) -> None:
        cycles = max(1, len(result.seconds))
        if self.sim is not None:
            result.server_cpu_s = (self.sim.cpu_s() - self.server) / cycles


# -- sparktop --------------------------------------------------------------------------------


async def poll_sparktop(
    inventory: Inventory, nodes: Sequence[NodeConfig], cycles: int, sim: SimProcess | None = None
) -> Cycles:
    sub = inventory.model_copy(update={"nodes": tuple(nodes), "engines": ()})
    state = ClusterState()
    poller = Poller(Plan.from_inventory(sub).node_sources(), inventory.interval_s, state.apply)
    result = Cycles()
    try:
        await poller.poll_once()  # connect and learn the field set: not part of a cycle
        meter = CpuMeter(sim)
        for _ in range(cycles):
            cpu, started = time.process_time(), time.perf_counter()
            samples = await poller.poll_once()
            result.seconds.append(time.perf_counter() - started)
            result.cpu.append(time.process_time() - cpu)
            result.ok += sum(1 for s in samples if s.ok)
            result.polled += len(samples)
        meter.stop(result)
    finally:
        await poller.aclose()
    return result


# -- (a) a shell loop of ssh -----------------------------------------------------------------


def ssh_argv(inventory: Inventory, node: NodeConfig) -> list[str]:
    """``ssh`` for one simulated node: no user config, its key, its known_hosts, strict."""
    s = inventory.ssh_for(node)
    return [
        SSH_BINARY, "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={s.known_hosts}",
        "-i", str(s.identity_file), "-p", str(s.port), "-l", str(s.user), str(node.host), PROBE,
    ]  # fmt: skip


def poll_sequential_ssh(
    inventory: Inventory, nodes: Sequence[NodeConfig], cycles: int, sim: SimProcess | None = None
) -> Cycles:
    result = Cycles()
    meter = CpuMeter(sim)  # the client's CPU is in the ssh children, not measured
    for _ in range(cycles):
        started = time.perf_counter()
        for node in nodes:
            done = subprocess.run(ssh_argv(inventory, node), capture_output=True, text=True)
            result.ok += parse_probe_output(node.name, done.stdout, time.time()).ok
            result.polled += 1
        result.seconds.append(time.perf_counter() - started)
    meter.stop(result)
    return result


# -- (b) fresh connections in parallel -------------------------------------------------------


async def _fresh_probe(inventory: Inventory, node: NodeConfig) -> bool:
    s = inventory.ssh_for(node)
    async with asyncssh.connect(
        str(node.host), port=s.port, username=s.user, client_keys=[str(s.identity_file)],
        known_hosts=str(s.known_hosts), config=None, agent_path=None,
        encryption_algs=CIPHERS,  # as sparktop's connections: only persistence differs
    ) as conn:  # fmt: skip
        out = await conn.run(PROBE)
    text = out.stdout if isinstance(out.stdout, str) else ""
    return parse_probe_output(node.name, text, time.time()).ok


async def poll_fresh_parallel(
    inventory: Inventory, nodes: Sequence[NodeConfig], cycles: int, sim: SimProcess | None = None
) -> Cycles:
    result = Cycles()
    meter = CpuMeter(sim)
    for _ in range(cycles):
        cpu, started = time.process_time(), time.perf_counter()
        oks = await asyncio.gather(*(_fresh_probe(inventory, n) for n in nodes))
        result.seconds.append(time.perf_counter() - started)
        result.cpu.append(time.process_time() - cpu)
        result.ok += sum(oks)
        result.polled += len(oks)
    meter.stop(result)
    return result


# -- the run ---------------------------------------------------------------------------------


@dataclass(slots=True)
class PollRun:
    """Cycles per node count and method (``sparktop``, ``sequential``, ``fresh``)."""

    nvsmi_ms: float
    by_size: dict[int, dict[str, Cycles]] = field(default_factory=dict)


def measure(
    sizes: Sequence[int] = SIZES, *, nvsmi_ms: float = NVSMI_MS, quick: bool = False
) -> PollRun:
    """Start one simulator with ``max(sizes)`` nodes and poll the first N of them each way."""
    run = PollRun(nvsmi_ms)
    with sim_process(max(sizes), nvsmi_ms=nvsmi_ms) as sim:
        inventory = load_inventory(sim.inventory)
        for n in sizes:
            nodes = inventory.nodes[:n]
            r = repeats_for(n, quick)
            run.by_size[n] = {
                "sparktop": asyncio.run(poll_sparktop(inventory, nodes, r.sparktop, sim)),
                "fresh": asyncio.run(poll_fresh_parallel(inventory, nodes, r.fresh, sim)),
                "sequential": poll_sequential_ssh(inventory, nodes, r.sequential, sim),
            }
    for n, ways in run.by_size.items():
        for way, cycles in ways.items():
            if cycles.ok != cycles.polled:
                raise RuntimeError(f"{way} at {n} nodes: {cycles.ok}/{cycles.polled} polls ok")
    return run


def figures(run: PollRun, *, scale_at: int = 32) -> list[Figure]:
    """The poll figures, and the target this run can judge.

    With instant nodes a cycle is pure CPU, and on 2 cores that run the monitor *and* every
    simulated node it grows with N whatever the fan-out: that run judges the speed-up over
    (b), the connection cost undiluted. With nvidia-smi taking time on the nodes, as a real
    one does, that run judges the scale (N nodes ÷ 1), the overlap of remote time. The other
    ratio of each run is shown without a verdict.
    """
    sizes = sorted(run.by_size)
    instant = run.nvsmi_ms == 0
    label = "instant nvidia-smi" if instant else f"nvidia-smi {run.nvsmi_ms:g} ms/call"
    one = run.by_size[sizes[0]]["sparktop"].median_ms
    out: list[Figure] = []
    for n in sizes:
        ways = run.by_size[n]
        s, f, q = (ways[k].median_ms for k in ("sparktop", "fresh", "sequential"))
        sp, fr = ways["sparktop"], ways["fresh"]
        out.append(
            info(
                f"poll {n} node(s), {label}: sparktop | (a) seq ssh | (b) fresh",
                f"{s:.1f} | {q:.0f} | {f:.0f} ms",
            )
        )
        out.append(
            info(
                f"  head-node CPU per cycle, {n} node(s): sparktop | (b) fresh",
                f"{sp.client_cpu_s * 1e3:.1f} | {fr.client_cpu_s * 1e3:.1f} ms",
            )
        )
    if scale_at not in run.by_size:
        return out
    ways = run.by_size[scale_at]
    s = ways["sparktop"].median_ms
    scale = f"poll {scale_at} nodes ÷ 1 node ({label})"
    speedup = f"poll speed-up over (b) fresh connections, {scale_at} nodes ({label})"
    speed = ways["fresh"].median_ms / s
    if instant:
        out.append(info(scale, f"{s / one:.2f}× (CPU-bound, see note)"))
        out.append(check(speedup, speed, 5.0, "{:.1f}×", at_least=True))
    else:
        out.append(check(scale, s / one, 1.5, "{:.2f}×"))
        out.append(info(speedup, f"{speed:.1f}× (remote time dilutes it)"))
    cpu = ways["fresh"].client_cpu_s / ways["sparktop"].client_cpu_s
    out.append(
        info(f"  head-node CPU of (b) ÷ sparktop, {scale_at} nodes ({label})", f"{cpu:.1f}×")
    )
    out.append(
        info(
            f"  speed-up over (a) sequential ssh, {scale_at} nodes ({label})",
            f"{ways['sequential'].median_ms / s:.0f}×",
        )
    )
    return out


def run_both(quick: bool, sizes: Sequence[int] = SIZES) -> list[Figure]:
    """Instant nodes (judges the speed-up) and slow nvidia-smi (judges the scale)."""
    out: list[Figure] = []
    for nvsmi_ms in (0.0, NVSMI_MS):
        out += figures(measure(sizes, nvsmi_ms=nvsmi_ms, quick=quick))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="fewer cycles per figure")
    parser.add_argument(
        "--nvsmi-ms", type=float,
        help=f"only this nvidia-smi time per call on a node (default: 0, then {NVSMI_MS:g})",
    )  # fmt: skip
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), metavar="N")
    args = parser.parse_args(argv)
    if args.nvsmi_ms is None:
        table = run_both(args.quick, args.sizes)
    else:
        table = figures(measure(args.sizes, nvsmi_ms=args.nvsmi_ms, quick=args.quick))
    print_table("Poll fan-out over loopback SSH (median ms per cycle)", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
