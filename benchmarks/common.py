"""What every benchmark shares: the figure record, the machine line, the result table, and a
simulator running in a child process (so its CPU is never counted as sparktop's).

A :class:`Figure` is one line of the final table: what was measured, the value as text, the
target as text and whether it passed (``None`` = informational, no target).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import gc
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@dataclass(frozen=True, slots=True)
class Figure:
    """One measured figure. ``passed`` None = no target (shown for context)."""

    name: str
    measured: str
    target: str = ""
    passed: bool | None = None

    @property
    def verdict(self) -> str:
        return "" if self.passed is None else ("PASS" if self.passed else "MISS")


def byte_compile() -> str:
    """Byte-compile sparktop's modules (``__pycache__``, ignored by git), as ``pip install``
    does for an installed package and Python does on a checkout's first run; returns the
    method's note. A peer is measured as pip installed it (compiled); a checkout run where
    ``PYTHONDONTWRITEBYTECODE`` is set (this machine's shells) would otherwise compile
    sparktop's ~140 modules from source on every start, a cost no user pays."""
    compileall.compile_dir(ROOT / "sparktop", quiet=1)
    return "sparktop's modules byte-compiled first, as pip install does"


def check(name: str, value: float, limit: float, fmt: str, *, at_least: bool = False) -> Figure:
    """A figure with a numeric target: ``value ≤ limit`` (or ``≥`` with ``at_least``)."""
    passed = value >= limit if at_least else value <= limit
    sign = "≥" if at_least else "≤"
    return Figure(name, fmt.format(value), f"{sign} {fmt.format(limit)}", passed)


def info(name: str, measured: str) -> Figure:
    return Figure(name, measured)


@dataclass(frozen=True, slots=True)
class Held:
    """Allocated Python blocks (``sys.getallocatedblocks``) as a leak check reads them."""

    blocks: int
    """After a full collection and with the page reader's value memo emptied: judged."""
    with_memos: int
    """After the full collection, the value memo as it was (what the process held)."""
    values: int
    """Value texts the memo held (it starts over at ``MAX_VALUES``)."""


def held_blocks() -> Held:
    """Blocks after ``gc.collect()`` (a full collection: cycles waiting for the collector
    are not held), then again after :func:`sparktop.sources.exposition.tables.forget_values`.
    That table of value texts is bounded (``MAX_VALUES``) but fills with every scrape's new
    counter texts and starts over once full (~3,500 texts a 380 s round at 2 engines, about
    2 blocks each: a ramp and a drop every few rounds), so
    blocks counted with it say where it is in that fill, not whether anything grows. CPython's
    own leak hunt (``regrtest -R``) empties its bounded caches before it counts, likewise."""
    from sparktop.sources.exposition.tables import forget_values, memo_sizes

    gc.collect()
    with_memos = sys.getallocatedblocks()
    values = memo_sizes()["values"]
    forget_values()
    gc.collect()
    return Held(sys.getallocatedblocks(), with_memos, values)


def arg_parser(doc: str | None, quick: str | None = None) -> argparse.ArgumentParser:
    """A benchmark's command line: its module docstring as ``--help`` (layout kept); with
    ``quick``, a ``--quick`` flag with that help."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    return parser


def machine() -> str:
    """``2 cores, AMD EPYC …, Linux 6.x, Python 3.11.7`` for the table caption."""
    model = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cores} cores, {model}, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def print_table(title: str, figures: Sequence[Figure], caption: str | None = None) -> None:
    """figure | measured | target | result, with rich (plain text when not a terminal)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, caption=caption)
    table.add_column("figure")
    table.add_column("measured", justify="right")
    table.add_column("target", justify="right")
    table.add_column("result")
    for f in figures:
        style = {"PASS": "green", "MISS": "bold red"}.get(f.verdict, "")
        verdict = f"[{style}]{f.verdict}[/]" if style else ""
        # Figures quote commands and peers' output ("pip install -e '.[bench]'"): text, not markup.
        table.add_row(escape(f.name), escape(f.measured), escape(f.target), verdict)
    Console(width=120).print(table)


def markdown_table(figures: Sequence[Figure]) -> str:
    """The same table as GitHub markdown (for docs/performance.md)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| figure | measured | target | result |", "|---|---:|---:|---|"]
    lines += [
        f"| {cell(f.name)} | {cell(f.measured)} | {cell(f.target)} | {f.verdict} |" for f in figures
    ]
    return "\n".join(lines)


# -- a simulator in a child process ---------------------------------------------------------

SIM_FARM = Path(__file__).resolve().parent / "simfarm.py"


@dataclass(frozen=True, slots=True)
class SimProcess:
    """A simulator child process: its inventory and pid (for its CPU time)."""

    inventory: Path
    pid: int

    def cpu_s(self) -> float:
        """User + system CPU seconds the simulator has used so far."""
        import psutil

        t = psutil.Process(self.pid).cpu_times()
        return float(t.user + t.system)


@contextlib.contextmanager
def sim_process(
    nodes: int, engines: int = 0, *, nvsmi_ms: float = 0.0, timeout_s: float = 60.0
) -> Iterator[SimProcess]:
    """Run ``sparktop sim`` (through :mod:`benchmarks.simfarm`) in a child process; yields
    it once the inventory is written, stops it (SIGINT, then SIGKILL) afterwards."""
    with tempfile.TemporaryDirectory(prefix="sparktop-bench-") as tmp:
        inventory = Path(tmp) / "cluster.yaml"
        log = open(Path(tmp) / "sim.log", "w+")  # noqa: SIM115 - closed below
        command = [
            sys.executable, str(SIM_FARM), "--nvsmi-ms", f"{nvsmi_ms:g}",
            "--write-inventory", str(inventory), "--nodes", str(nodes), "--engines", str(engines),
        ]  # fmt: skip
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        try:
            deadline = time.monotonic() + timeout_s
            while not _ready(log):
                if child.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"simulator did not start: {log.read()[-2000:]}")
                time.sleep(0.05)
            yield SimProcess(inventory, child.pid)
        finally:
            stop_child(child)
            log.close()


def _ready(log: object) -> bool:
    log.seek(0)  # type: ignore[attr-defined]
    return "running; Ctrl-C to stop" in log.read()  # type: ignore[attr-defined]


def stop_child(child: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGINT the child (it cleans up), SIGKILL it if it does not end in time."""
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
