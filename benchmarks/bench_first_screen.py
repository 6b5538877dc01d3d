"""First screen with data: how long after launch a user sees the engine's figures, sparktop
against vllm-top on the same engine (issue 33 item 3: ≤ 1.5× vllm-top's).

Each tool runs as a user runs it, in a pseudo-terminal (200×50) whose output is read as a
terminal would; the clock starts when the process is started and stops when the screen
first shows the engine's data: sparktop's engine block ``running N/M`` (drawn once the
first scrape is in), vllm-top's ``Running Requests`` bar with its value. Both watch the
simulator's engine (``sparktop sim`` in a process of its own, an inventory with that engine
only, as vllm-top watches one server). The runs alternate, the order swapped each round
(sparktop first, then vllm-top first, …), so the machine's load falls on both; the figure
is the ratio of the medians, with the load average at the start and the end. sparktop's
modules are byte-compiled first (:func:`benchmarks.common.byte_compile`), as vllm-top's were
by pip: where ``PYTHONDONTWRITEBYTECODE`` is set a checkout would otherwise compile them
from source on every start.

The same runs give the memory figure (issue 33 item 1: RSS ≤ 2× vllm-top's): each process's
RSS (``VmRSS``, its own pages as the kernel counts them, shared libraries included) is read
:data:`SETTLE_S` seconds after its first data, both watching the same engine.

Run: ``python benchmarks/bench_first_screen.py [--quick] [--rounds N]``
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_peers import _engine_only, _plain, _tool, version
from benchmarks.common import (
    ROOT,
    Figure,
    arg_parser,
    byte_compile,
    check,
    info,
    print_table,
    sim_process,
)

SIZE = (200, 50)
TARGET = 1.5
ROUNDS = 6
QUICK_ROUNDS = 2
TIMEOUT_S = 90.0
SETTLE_S = 10.0
"""After the first data, the time each tool runs on before its RSS is read."""
RSS_TARGET = 2.0
SPARKTOP_DATA = re.compile(r"running\s+\d+/\d+")
VLLM_TOP_DATA = re.compile(r"Running Requests\s*\|[^|\n]*\|\s*[\d.]+/")


def first_data_s(
    command: Sequence[str], data: re.Pattern[str], quit_keys: bytes, settle_s: float = 0.0
) -> tuple[float, float]:
    """Seconds from starting ``command`` in a pty until its screen shows ``data``, and its
    RSS in MB ``settle_s`` later (its screen read meanwhile; 0 when not asked)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "truecolor", "COLUMNS": "200"}
    start = time.monotonic()
    child = subprocess.Popen(
        list(command), stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    try:
        while time.monotonic() - start < TIMEOUT_S:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen = (seen + chunk)[-400_000:]
            if data.search(_plain(seen)):
                seconds = time.monotonic() - start
                return seconds, _rss_after(master, child, settle_s) if settle_s else 0.0
        tail = _plain(seen)[-300:].strip()
        raise RuntimeError(f"{command[0]}: no data on screen in {TIMEOUT_S:.0f} s: {tail!r}")
    finally:
        with contextlib.suppress(OSError):
            os.write(master, quit_keys)
        _drain_until_exit(master, child)
        os.close(master)


def _rss_after(master: int, child: subprocess.Popen[bytes], settle_s: float) -> float:
    """The child's VmRSS in MB after ``settle_s`` more seconds of reading its screen."""
    until = time.monotonic() + settle_s
    while (left := until - time.monotonic()) > 0:
        ready, _, _ = select.select([master], [], [], min(left, 0.5))
        if ready:
            with contextlib.suppress(OSError):
                os.read(master, 65536)
    for line in Path(f"/proc/{child.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _drain_until_exit(master: int, child: subprocess.Popen[bytes]) -> None:
    """Keep reading (a full pty would block its exit) until the child ends; SIGINT, then
    SIGKILL, if it does not within 10 s."""
    deadline = time.monotonic() + 10
    while child.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                os.read(master, 65536)
            except OSError:
                break
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGINT)
        try:
            child.wait(5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def measure(rounds: int) -> list[Figure]:
    top = _tool("vllm-top")
    if top is None:
        return [
            info("first screen with data", "vllm-top not installed (pip install -e '.[bench]')")
        ]
    times: dict[str, list[float]] = {"sparktop": [], "vllm-top": []}
    rss: dict[str, list[float]] = {"sparktop": [], "vllm-top": []}
    compiled = byte_compile()
    before = load()
    with sim_process(1, 1) as sim, tempfile.TemporaryDirectory() as tmp:
        only, url = _engine_only(sim.inventory, Path(tmp))
        host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
        runs = {
            "sparktop": ([sys.executable, "-m", "sparktop", "-i", str(only)], SPARKTOP_DATA, b"q"),
            "vllm-top": (
                [top, "--host", host, "--port", port, "--interval", "1"], VLLM_TOP_DATA, b"\x03"
            ),
        }  # fmt: skip
        first_data_s(*runs["sparktop"])  # both read their files once before the timed runs
        first_data_s(*runs["vllm-top"])
        for r in range(rounds):
            order = ("sparktop", "vllm-top") if r % 2 == 0 else ("vllm-top", "sparktop")
            for name in order:
                seconds, mb = first_data_s(*runs[name], settle_s=SETTLE_S)
                times[name].append(seconds)
                rss[name].append(mb)
                print(
                    f"  round {r + 1}: {name} {seconds:.2f} s, RSS {mb:.1f} MB (load {load()})",
                    flush=True,
                )
    after = load()
    mine, theirs = statistics.median(times["sparktop"]), statistics.median(times["vllm-top"])
    my_mb, their_mb = statistics.median(rss["sparktop"]), statistics.median(rss["vllm-top"])
    each = " | ".join(
        f"{name} " + ", ".join(f"{t:.2f}" for t in values) for name, values in times.items()
    )
    return [
        info(
            "method",
            f"{rounds} alternated rounds in a pty 200×50; {compiled}; load {before} → {after}",
        ),
        info("vllm-top version", version("vllm-top")),
        info("launch → first screen with engine data, s (each run)", each),
        check(
            f"first screen with data, sparktop ÷ vllm-top (medians {mine:.2f} ÷ {theirs:.2f} s)",
            mine / theirs,
            TARGET,
            "{:.2f}×",
        ),
        check(
            f"RSS {SETTLE_S:.0f} s after the first data, sparktop ÷ vllm-top "
            f"(medians {my_mb:.1f} ÷ {their_mb:.1f} MB)",
            my_mb / their_mb,
            RSS_TARGET,
            "{:.2f}×",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick=f"{QUICK_ROUNDS} rounds")
    parser.add_argument("--rounds", type=int, help=f"alternated rounds (default {ROUNDS})")
    args = parser.parse_args(argv)
    rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
    figs = measure(rounds)
    print_table("First screen with data (alternated)", figs)
    return 0 if all(f.passed is not False for f in figs) else 1


if __name__ == "__main__":
    sys.exit(main())
