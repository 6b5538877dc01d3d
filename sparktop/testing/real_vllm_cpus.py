"""The CPUs a local vLLM CPU server computes on, and a competing load pinned to them.

vLLM's CPU worker binds itself to its cores (``VLLM_CPU_OMP_THREADS_BIND``, ``auto`` by
default: on a 2-core machine the worker runs on CPU 0 while the API server and engine core
may use both). A busy process pinned to the worker's cores with ``sched_setaffinity`` takes
about half of each (:func:`start_busy`): a real slowdown of the server's decode, no
simulator involved.

Found from the port the server listens on (``/proc/net/tcp``, the socket's inode among the
processes' descriptors), so it works for a server started by the tests or by hand. Linux
only; standard library only.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROC = Path("/proc")


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (PROC / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEX_IP:HEX_PORT; state 0A is LISTEN
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    return inodes


def listening_pid(port: int) -> int | None:
    """The pid of a process holding the TCP socket listening on ``port``, or None."""
    inodes = {f"socket:[{i}]" for i in _listening_inodes(port)}
    if not inodes:
        return None
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(entry.name)
        except OSError:
            continue
    return None


def group_pids(pgid: int) -> list[int]:
    """Every live process of process group ``pgid``."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def allowed_cpus(pid: int) -> set[int]:
    """The CPUs ``pid`` may run on (empty if it is gone)."""
    try:
        return set(os.sched_getaffinity(pid))
    except OSError:
        return set()


def worker_cpus(port: int) -> set[int]:
    """The narrowest CPU set among the processes of the server listening on ``port`` (its
    pinned worker's cores); every CPU when none is pinned. Empty if nothing listens there."""
    pid = listening_pid(port)
    if pid is None:
        return set()
    sets = [s for s in (allowed_cpus(p) for p in group_pids(os.getpgid(pid))) if s]
    return min(sets, key=len) if sets else set()


BUSY = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
for nice in ("/proc/self/autogroup", None):
    try:
        if nice:
            with open(nice, "w") as f:
                f.write("-19")
        else:
            os.setpriority(os.PRIO_PROCESS, 0, -19)
    except OSError:
        pass
on_s = off_s = float(sys.argv[2])
print("ready", flush=True)
while True:
    end = time.perf_counter() + on_s
    while time.perf_counter() < end:
        pass
    time.sleep(off_s)
"""

PERIOD_S = 0.01
"""The competing load's period: busy for half of it, asleep for the other half."""


def start_busy(cpus: set[int]) -> list[subprocess.Popen[bytes]]:
    """One process pinned to each CPU of ``cpus``, busy half of every :data:`PERIOD_S` at
    the highest priority it may take (nice -19, in a session of its own whose autogroup is
    nice -19 too, as root; else nice 0): it takes about half of the core's time whatever
    else runs there, so the server's share of it halves on a loaded machine too (a plain
    busy loop at nice 0 is one more of many runnable tasks there: 15 → 16, not a halving;
    and with ``sched_autogroup`` a process's nice counts only inside its own session).
    Returns once every one of them is pinned and running (Python's start-up takes seconds
    on a loaded machine). Stop them with :func:`stop_busy`."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BUSY, str(cpu), str(PERIOD_S / 2)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for cpu in sorted(cpus)
    ]
    for proc in procs:
        assert proc.stdout is not None
        proc.stdout.readline()  # "ready": pinned, prioritised, about to spin
    return procs


def stop_busy(procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill the processes :func:`start_busy` started and reap them."""
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def cpu_seconds(port: int) -> tuple[float, float] | None:
    """``(on a CPU, waiting for one)``, seconds summed over every thread of the server
    listening on ``port`` (``/proc/<pid>/task/<tid>/schedstat``: run time and run-queue wait,
    ns); None when nothing listens there. Two readings' differences give how much of the
    time the server wanted a CPU it waited for one: on a shared machine, the share other
    work took from it (the server itself keeps ~1.9 of 2 cores busy under load)."""
    pid = listening_pid(port)
    if pid is None:
        return None
    run = wait = 0
    for member in group_pids(os.getpgid(pid)):
        try:
            threads = list((PROC / str(member) / "task").iterdir())
        except OSError:
            continue
        for thread in threads:
            try:
                fields = (thread / "schedstat").read_text().split()
            except OSError:
                continue  # the thread ended
            run, wait = run + int(fields[0]), wait + int(fields[1])
    return run / 1e9, wait / 1e9


def wait_share(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float:
    """The share of its runnable time the server spent waiting for a CPU between two
    :func:`cpu_seconds` readings (0 without both, or without time on a CPU)."""
    if before is None or after is None:
        return 0.0
    run, wait = (max(0.0, b - a) for a, b in zip(before, after, strict=True))
    return wait / (run + wait) if run > 0 else 0.0
