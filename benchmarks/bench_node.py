"""Node-side cost of a sample: the one-shot probe against the streaming probe, same run.

What a sample costs *on the node* (the machine serving the model), counted two ways:

1. **Simulator** (``sparktop sim`` in a child process, asyncssh nodes): the simulator's CPU
   seconds per sample above its idle rate while sparktop polls 8 nodes every 1 s (the
   default interval, as every figure here but the latency);
   one-shot = a new exec channel per poll whose command the simulated node interprets in
   Python (it starts no process, so this is the SSH exchange alone: a floor for the gap);
   stream = one ``nvidia-smi -lms`` channel printing a row per interval plus the slow tier
   every 10 s. The same windows give the head node's CPU per sample (this process:
   sparktop's sources, the poller and parsing).
2. **OpenSSH sshd** (:mod:`sparktop.testing.sshd`, as in the tests: a real ``sshd`` per
   node, the fake ``nvidia-smi`` first on the session PATH), 4 nodes every 1 s: CPU of everything
   the probe runs there, read through psutil over the sshd process tree (each process's own
   CPU plus that of the children it reaped: the session's shell, ``timeout``, ``cat``,
   nvidia-smi). The fake nvidia-smi's share is stated apart: each one-shot call counted from
   its call log at its cost measured alone (run here ``CALIBRATE`` times, ``getrusage`` of
   children), the streaming one as the live process. A real nvidia-smi also initialises NVML
   on every one-shot call, which no figure here includes: it only widens the gap. This run
   carries the ≥ 10× target.
3. **Line → UI**: a simulated node in this process streams at 0.25 s; for every sample the
   poller hands on, the time since its row left the node's nvidia-smi (the write), median
   and max, against one interval.

Run: ``python benchmarks/bench_node.py [--quick]``
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmarks.common import Figure, arg_parser, check, info, print_table, sim_process
from sparktop.inventory import Inventory, load_inventory
from sparktop.model import NodeSample, Sample
from sparktop.poller import Poller
from sparktop.sources.probe import APPS_FIELDS, FIELD_SETS
from sparktop.sources.ssh.source import SshSource

NODES = 8
SSHD_NODES = 4
INTERVAL_S = 1.0
"""The monitor's default interval (``interval_s: 1``): what a node pays as users run it."""
LATENCY_INTERVAL_S = 0.25
SSHD_INTERVAL_S = 1.0
"""The default interval, as for the simulator. CPU is counted in 10 ms ticks per process, so
the windows are long enough to hold ~160 samples (4 nodes × 40 s)."""
WARMUP_S = 3.0
CALIBRATE = 20
RATIO_TARGET = 10.0


@dataclass(frozen=True, slots=True)
class Run:
    """One mode's window: samples taken, node and head CPU seconds (fake = nvidia-smi's)."""

    mode: str
    samples: int
    node_cpu_s: float
    head_cpu_s: float
    fake_cpu_s: float = 0.0

    def per_sample_ms(self, cpu_s: float) -> float:
        return cpu_s / max(1, self.samples) * 1000


class Counter:
    """Counts the OK samples the poller hands on (only while ``counting``)."""

    def __init__(self) -> None:
        self.ok = 0
        self.counting = False

    def __call__(self, sample: Sample) -> None:
        if self.counting and isinstance(sample, NodeSample) and sample.ok:
            self.ok += 1


async def _window(
    sources: Sequence[SshSource],
    node_cpu: object,
    seconds: float,
    fake_cpu: object = None,
    interval_s: float = INTERVAL_S,
) -> tuple[int, float, float, float]:
    """Poll ``sources`` every ``interval_s``; after the warm-up, count samples and CPU for
    ``seconds``."""
    counter = Counter()
    poller = Poller(sources, interval_s, counter)
    poller.start()
    try:
        await asyncio.sleep(WARMUP_S)
        node0, head0 = node_cpu(), time.process_time()  # type: ignore[operator]
        fake0 = fake_cpu() if fake_cpu else 0.0  # type: ignore[operator]
        counter.counting = True
        await asyncio.sleep(seconds)
        counter.counting = False
        node1, head1 = node_cpu(), time.process_time()  # type: ignore[operator]
        fake1 = fake_cpu() if fake_cpu else 0.0  # type: ignore[operator]
    finally:
        await poller.aclose()
    return counter.ok, node1 - node0, head1 - head0, fake1 - fake0


# -- 1. the simulator ------------------------------------------------------------------------------


def simulator_runs(seconds: float) -> tuple[list[Run], float]:
    """Both modes against one simulator, and its idle CPU seconds per second (the model's own
    clock tick, subtracted from each mode's window so only answering the probe is counted)."""
    runs = []
    with sim_process(NODES) as sim:
        inventory = load_inventory(sim.inventory)
        idle0 = sim.cpu_s()
        time.sleep(seconds)
        idle_per_s = (sim.cpu_s() - idle0) / seconds
        for mode in ("one-shot", "stream"):
            sources = [
                SshSource(n, inventory.ssh_for(n), stream=mode == "stream") for n in inventory.nodes
            ]
            ok, node, head, _ = asyncio.run(_window(sources, sim.cpu_s, seconds))
            runs.append(Run(mode, ok, max(0.0, node - idle_per_s * seconds), head))
    return runs, idle_per_s


# -- 2. OpenSSH sshd -------------------------------------------------------------------------------


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process tree: each live process's own plus its reaped children's."""
    total = 0.0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def _streaming_fake_cpu(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            for proc in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    if "-lms" in proc.cmdline() and "nvidia-smi" in " ".join(proc.cmdline()):
                        t = proc.cpu_times()
                        total += t.user + t.system + t.children_user + t.children_system
    return total


def _one_call_cpu_s(script: Path, args: list[str], env: dict[str, str]) -> float:
    """CPU seconds of one run of the fake nvidia-smi here, averaged over CALIBRATE runs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(CALIBRATE):
        subprocess.run([str(script), *args], env=env, stdout=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used / CALIBRATE


@dataclass(frozen=True, slots=True)
class SshdResult:
    runs: list[Run]
    fake_call_ms: float
    """The fake nvidia-smi's CPU for a one-shot probe's two calls (GPU and apps queries)."""


def sshd_runs(seconds: float) -> SshdResult | None:
    from sparktop.testing.nvsmi import FakeNvidiaSmi
    from sparktop.testing.sshclient import client_files, login_user
    from sparktop.testing.sshd import Sshd, SshdMissing, sshd_path

    try:
        sshd_path()
    except SshdMissing:
        return None
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="sparktop-bench-sshd-") as tmp:
        root = Path(tmp)
        files = client_files(root / "client")
        daemons = [Sshd(root / f"sshd-{i}", files.key, FakeNvidiaSmi()) for i in range(SSHD_NODES)]
        try:
            for daemon in daemons:
                daemon.start()
                files.trust(daemon.known_hosts_line())
            inventory = Inventory.model_validate(
                {
                    "ssh": {
                        "user": login_user(), "identity_file": str(files.identity_file),
                        "known_hosts": str(files.known_hosts), "config": str(files.config),
                        "command_timeout_s": 5,
                    },
                    "nodes": [
                        {"name": f"spark-{i}", "host": "127.0.0.1", "port": d.port}
                        for i, d in enumerate(daemons, 1)
                    ],
                }
            )  # fmt: skip
            pids = [d.proc.pid for d in daemons if d.proc is not None]
            env = {**os.environ, "PATH": f"{daemons[0].bin}:{os.environ.get('PATH', '')}"}
            script = daemons[0].bin / "nvidia-smi"
            gpu_query = [f"--query-gpu={','.join(FIELD_SETS[0])}", "--format=csv,nounits"]
            apps_query = [f"--query-compute-apps={','.join(APPS_FIELDS)}", "--format=csv,nounits"]
            gpu = _one_call_cpu_s(script, gpu_query, env)
            apps = _one_call_cpu_s(script, apps_query, env)

            def node_cpu() -> float:
                return sum(_tree_cpu(pid) for pid in pids)

            def fake_cpu() -> float:
                """The fake's CPU so far: short calls × their cost alone + the live stream."""
                calls = [c for d in daemons for c in d.calls if "-lms" not in c]
                short = sum(apps if "--query-compute-apps" in c else gpu for c in calls)
                return short + _streaming_fake_cpu(pids)

            for mode in ("one-shot", "stream"):
                sources = [
                    SshSource(n, inventory.ssh_for(n), stream=mode == "stream")
                    for n in inventory.nodes
                ]
                ok, node, head, fake = asyncio.run(
                    _window(sources, node_cpu, seconds, fake_cpu, SSHD_INTERVAL_S)
                )
                runs.append(Run(mode, ok, node, head, fake))
        finally:
            for daemon in daemons:
                daemon.stop()
    return SshdResult(runs, (gpu + apps) * 1000)


# -- 3. line → UI ----------------------------------------------------------------------------------


async def line_to_ui(seconds: float) -> list[float]:
    """Seconds from a row's write on a simulated node to the poller handing its sample on."""
    from sparktop.sim.gb10 import Gb10Responder
    from sparktop.sim.gpu import GpuModel
    from sparktop.sim.sshserver import start_ssh_server
    from sparktop.testing.sshclient import client_files, login_user

    gpu = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
    responder = Gb10Responder(gpu)
    sent: list[tuple[float, str]] = []

    def streamer(command: str) -> AsyncIterator[str | int] | None:
        chunks = responder.stream(command)
        if chunks is None:
            return None

        async def timed() -> AsyncIterator[str | int]:
            async for chunk in chunks:
                if isinstance(chunk, str):
                    gpu.power_w += 0.01  # every row distinct, so a sample names its row
                    sent.append((time.time(), chunk.rstrip("\n").splitlines()[-1]))
                yield chunk

        return timed()

    with tempfile.TemporaryDirectory(prefix="sparktop-bench-lat-") as tmp:
        files = client_files(Path(tmp))
        server = await start_ssh_server(
            responder, authorized_client_keys=[files.key], streamer=streamer
        )
        files.trust(server.known_hosts_line())
        inventory = Inventory.model_validate(
            {
                "ssh": {"user": login_user(), "identity_file": str(files.identity_file),
                        "known_hosts": str(files.known_hosts), "config": str(files.config)},
                "nodes": [{"name": "spark-1", "host": "127.0.0.1", "port": server.port}],
            }
        )  # fmt: skip
        node = inventory.nodes[0]
        handed: list[tuple[float, NodeSample]] = []

        def on_sample(sample: Sample) -> None:
            if isinstance(sample, NodeSample) and sample.probe.startswith("stream"):
                handed.append((time.time(), sample))

        poller = Poller([SshSource(node, inventory.ssh_for(node))], LATENCY_INTERVAL_S, on_sample)
        poller.start()
        try:
            await asyncio.sleep(seconds)
        finally:
            await poller.aclose()
            await server.close()
    delays = []
    for at, sample in handed:
        rows = [t for t, row in sent if row and row in sample.raw and t <= at]
        if rows:
            delays.append(at - rows[-1])
    return delays


# -- figures ---------------------------------------------------------------------------------------


def _pair(one: Run, stream: Run, cpu: str) -> tuple[float, float]:
    return one.per_sample_ms(getattr(one, cpu)), stream.per_sample_ms(getattr(stream, cpu))


def figures(
    sim: list[Run], idle_per_s: float, sshd: SshdResult | None, delays: list[float]
) -> list[Figure]:
    one, stream = sim
    a, b = _pair(one, stream, "node_cpu_s")
    # The simulated node starts no process for a one-shot probe (it interprets the command
    # in Python): its figure is the SSH exchange alone, a floor for the gap, shown without
    # a target; the sshd run below starts what a real node starts and carries the target.
    out = [
        info(
            f"node CPU per sample, simulator ({NODES} asyncssh nodes, {INTERVAL_S:g} s, above "
            f"its idle {idle_per_s * 1000:.0f} ms/s): one-shot | stream",
            f"{a:.2f} | {b:.2f} ms = {a / b if b > 0 else float('inf'):.1f}×",
        ),
    ]
    ha, hb = _pair(one, stream, "head_cpu_s")
    out.append(
        check(
            f"head CPU per sample, stream ÷ one-shot ({hb:.2f} ÷ {ha:.2f} ms)",
            hb / ha if ha > 0 else 0.0,
            1.0,
            "{:.2f}×",
        )
    )
    if sshd is not None:
        one, stream = sshd.runs
        a, b = _pair(one, stream, "node_cpu_s")
        fa = one.per_sample_ms(one.fake_cpu_s)
        fb = stream.per_sample_ms(stream.fake_cpu_s)
        out += [
            check(
                f"node CPU per sample, OpenSSH sshd + fake nvidia-smi ({SSHD_NODES} nodes, "
                f"{SSHD_INTERVAL_S:g} s): "
                f"one-shot ÷ stream ({a:.2f} ÷ {b:.3f} ms)",
                a / b if b > 0 else float("inf"), RATIO_TARGET, "{:.1f}×", at_least=True,
            ),
            info(
                "… of which the fake nvidia-smi (a call measured alone "
                f"{sshd.fake_call_ms:.1f} ms): one-shot | stream",
                f"{fa:.2f} | {fb:.3f} ms",
            ),
            info(
                "… without nvidia-smi (sshd session, shell, timeout, cat): one-shot | stream",
                f"{a - fa:.2f} | {b - fb:.3f} ms",
            ),
        ]  # fmt: skip
    else:
        out.append(info("node CPU per sample, OpenSSH sshd", "not run: sshd not installed"))
    if delays:
        ms = sorted(d * 1000 for d in delays)
        out.append(
            check(
                f"line leaves nvidia-smi → sample handed to the UI, {LATENCY_INTERVAL_S:g} s "
                f"stream: max (median {statistics.median(ms):.1f} ms, {len(ms)} samples)",
                ms[-1], LATENCY_INTERVAL_S * 1000, "{:.1f} ms",
            )
        )  # fmt: skip
    else:
        out.append(Figure("line → UI at 0.25 s", "no streamed sample", "≤ 250 ms", False))
    return out


def measure(quick: bool) -> list[Figure]:
    seconds = 12.0 if quick else 40.0
    sim, idle = simulator_runs(seconds)
    sshd = sshd_runs(seconds)
    delays = asyncio.run(line_to_ui(10.0 if quick else 20.0))
    return figures(sim, idle, sshd, delays)


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="shorter windows")
    args = parser.parse_args(argv)
    table = measure(args.quick)
    print_table("node-side cost: one-shot vs stream", table)
    return 1 if any(f.passed is False for f in table) else 0


if __name__ == "__main__":
    sys.exit(main())
