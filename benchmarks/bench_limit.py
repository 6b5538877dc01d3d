"""The limit as a reference: sparktop's monitor CPU against the least a monitor can do.

At 4 and 32 simulated nodes (``sparktop sim`` in a process of its own, asyncssh servers on
loopback; its CPU is not counted), two processes watch the same nodes at 1 s:

- **minimal** (:mod:`benchmarks.minimal_monitor`): asyncssh, one connection per node running
  the stream command sparktop's SSH probe runs (``nvidia-smi --query-gpu=… -lms 1000``), one
  parse of each node's latest rows a tick, no UI;
- **sparktop**: ``sparktop --inventory <sim>`` as a user runs it, in a pseudo-terminal
  (200×50, its output read and counted), the whole monitor: streams, slow tier, history,
  alert rules, the expected row, the screen.

Both are started together and run side by side; once both have drawn/parsed every node,
and after a warm-up, the CPU of each (its threads' run time from
``/proc/<pid>/task/*/schedstat``, in nanoseconds: ``/proc/<pid>/stat`` counts 10 ms ticks,
about what the minimal monitor uses in a block) is read over
the same measured blocks of :data:`BLOCK_S`: a block's ratio compares the two over the same
seconds, so a machine whose speed drifts moves both alike (the strongest form of
alternation). The figure is the median of the blocks' ratios; target ≤ 3×. Each process's
CPU seconds per second are printed with the blocks.

Run: ``python benchmarks/bench_limit.py [--quick] [--nodes 4 32]``
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import statistics
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil

from benchmarks.bench_cpu import _Drain
from benchmarks.common import ROOT, Figure, arg_parser, check, info, print_table, sim_process

NODES = (4, 32)
TARGET = 3.0
BLOCK_S = 10.0
WARMUP_S = 20.0
"""After both show every node: the monitor's first polls and render caches (as bench_cpu)."""
READY_WITHIN_S = 180.0
VISIBLE_ROWS = 12
"""Node names awaited on the screen before the warm-up (the table scrolls past ~18)."""
SIZE = (200, 50)
MINIMAL = Path(__file__).resolve().parent / "minimal_monitor.py"


@dataclass(frozen=True, slots=True)
class LimitRun:
    nodes: int
    minimal_cpu: list[float]
    """CPU seconds per second of each block."""
    sparktop_cpu: list[float]
    screen_bytes_per_s: float

    @property
    def ratios(self) -> list[float]:
        pairs = zip(self.sparktop_cpu, self.minimal_cpu, strict=True)
        return [s / m if m > 0 else float("inf") for s, m in pairs]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds of ``proc``'s live threads from ``/proc/<pid>/task/*/schedstat``
    (nanoseconds; /proc/<pid>/stat counts 10 ms ticks, and the minimal monitor uses about one
    a block), else psutil's user + system."""
    total, found = 0, False
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{proc.pid}/task"):
            path = f"/proc/{proc.pid}/task/{task}/schedstat"
            with contextlib.suppress(OSError, ValueError, IndexError), open(path) as fh:
                total += int(fh.read().split()[0])
                found = True
    if found:
        return total / 1e9
    t = proc.cpu_times()
    return float(t.user + t.system)


def _stream_command() -> str:
    from sparktop.sources.probe import FIELD_SETS, stream_command

    return stream_command(FIELD_SETS[0], 1000)


def measure(
    nodes: int, blocks: int, warmup_s: float = WARMUP_S, block_s: float = BLOCK_S
) -> LimitRun:
    with sim_process(nodes) as sim:
        minimal = subprocess.Popen(
            [sys.executable, str(MINIMAL), "--inventory", str(sim.inventory),
             "--command", _stream_command()],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        )  # fmt: skip
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor"}
        monitor = subprocess.Popen(
            [sys.executable, "-m", "sparktop", "--inventory", str(sim.inventory)],
            stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        # The node table holds ~18 rows at 200×50 and scrolls the rest: the first rows drawn
        # say the monitor is up; the warm-up then covers the other connections.
        shown = min(nodes, VISIBLE_ROWS)
        drain = _Drain(master, tuple(f"spark-{i} ".encode() for i in range(1, shown + 1)))
        drain.start()
        try:
            assert minimal.stdout is not None
            first = minimal.stdout.readline().strip()
            if first != "ready":
                raise RuntimeError(f"minimal monitor: {first} {minimal.stdout.read()[-2000:]}")
            if not drain.drawn.wait(READY_WITHIN_S):
                raise RuntimeError(f"sparktop did not draw its nodes: {drain.tail[-2000:]!r}")
            time.sleep(warmup_s)
            a, b = psutil.Process(minimal.pid), psutil.Process(monitor.pid)
            ours, theirs = [], []
            bytes0 = drain.total
            t_start = time.monotonic()
            for _ in range(blocks):
                t0, a0, b0 = time.monotonic(), _cpu(a), _cpu(b)
                time.sleep(block_s)
                seconds = time.monotonic() - t0
                theirs.append((_cpu(a) - a0) / seconds)
                ours.append((_cpu(b) - b0) / seconds)
                for child, name in ((minimal, "minimal monitor"), (monitor, "sparktop")):
                    if child.poll() is not None:
                        raise RuntimeError(f"{name} exited during the run")
            rate = (drain.total - bytes0) / (time.monotonic() - t_start)
        finally:
            with contextlib.suppress(OSError):
                os.write(master, b"q")
            minimal.terminate()
            for child in (monitor, minimal):
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            os.close(master)
    return LimitRun(nodes, theirs, ours, rate)


def figures(runs: list[LimitRun]) -> list[Figure]:
    out = []
    for run in runs:
        blocks = ", ".join(f"{r:.1f}" for r in run.ratios)
        out.append(
            check(
                f"monitor CPU ÷ minimal monitor's, {run.nodes} nodes at 1 s "
                f"({len(run.ratios)} blocks of {BLOCK_S:g} s: {blocks})",
                run.ratio, TARGET, "{:.1f}×",
            )
        )  # fmt: skip
        out.append(
            info(
                f"  CPU s per s, {run.nodes} nodes: sparktop | minimal (medians); screen output",
                f"{statistics.median(run.sparktop_cpu):.4f} | "
                f"{statistics.median(run.minimal_cpu):.4f}; "
                f"{run.screen_bytes_per_s / 1024:.1f} KiB/s",
            )
        )
    return out


def run(quick: bool = False, sizes: tuple[int, ...] = NODES) -> list[Figure]:
    blocks = 3 if quick else 6
    warmup = WARMUP_S / 2 if quick else WARMUP_S
    return figures([measure(n, blocks, warmup) for n in sizes])


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="3 blocks instead of 6, a shorter warm-up (~2 min)")
    parser.add_argument("--nodes", type=int, nargs="+", default=list(NODES))
    args = parser.parse_args(argv)
    table = run(args.quick, tuple(args.nodes))
    print_table("The limit: sparktop's monitor against a minimal one", table)
    return 0 if all(f.passed is not False for f in table) else 1


if __name__ == "__main__":
    sys.exit(main())
