"""The monitor's tick with one hostile source of each kind: does it stay on schedule, and
does memory stay bounded?

A simulated healthy cluster (``sparktop sim``, 4 nodes, one engine, in a child process) plus,
in this process's own thread on 127.0.0.1, one hostile source of each kind the monitor can
meet: an engine that accepts and never answers (hung), one that sends its headers and then
a byte every 50 ms (slow drip), one that streams valid series without end (huge), one that
answers random bytes (garbled), one whose page is a gzip bomb (64 MiB of spaces in ~64 KB),
a node whose SSH port accepts and never sends a banner (hung node), and a ``source:
prometheus`` node whose Prometheus answers every query with 53 MB / 230,000 series (under
the 64 MiB cap). The real monitor app (Textual, headless, 160×50) polls all of them at 1 s, with
tracemalloc on throughout (it slows Python down: the tick figures are a harsher case than
the monitor's own).

Printed, over the measured span: the gap between render ticks (median / max), the header's
"newest" age when each tick drew (max), the age of the healthy sources' samples when each
tick drew (max), how long each hostile row took to show its failure, and memory (RSS
growth; tracemalloc's traced peak and growth across the span). The targets are the issues':
the tick on schedule and the healthy samples fresh (every gap and every healthy age
≤ 1.5 s at 1 s polling); memory bounded: traced Python memory grows under 20 MB over the
span, and RSS under 10 MB in its second half (the allocator keeps what a refused 32 MiB
page took, so RSS rises early and then levels off).

Run: ``python benchmarks/bench_hostile_tick.py [--seconds 60]``. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gzip
import itertools
import json
import os
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil
import yaml

from benchmarks.common import Figure, check, info, print_table, sim_process
from sparktop.inventory import parse_inventory
from sparktop.model import EngineSample, NodeSample
from sparktop.plan import Plan
from sparktop.ui.app import SparktopApp

INTERVAL_S = 1.0
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> None:
    await reader.readuntil(b"\r\n\r\n")


async def hung(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Reads the request and never answers."""
    await _read_request(reader)
    await asyncio.Event().wait()


async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Valid headers, then the body one byte every 50 ms."""
    await _read_request(reader)
    writer.write(HEADERS + b"Content-Length: 100000000\r\n\r\n")
    while True:
        writer.write(b"#")
        await writer.drain()
        await asyncio.sleep(0.05)


async def huge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Valid series as fast as the socket takes them, without end."""
    await _read_request(reader)
    writer.write(HEADERS + b"Connection: close\r\n\r\n")
    chunk = b"".join(
        b'vllm:num_requests_running{engine="%d",model_name="m"} 3\n' % i for i in range(2000)
    )
    while True:
        writer.write(chunk)
        await writer.drain()


async def garbled(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A well-formed HTTP answer whose body is random bytes."""
    await _read_request(reader)
    body = os.urandom(64 * 1024)
    writer.write(HEADERS + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await writer.drain()
    writer.close()


@functools.cache
def _bomb() -> bytes:
    return gzip.compress(b" " * (64 << 20), 9)


async def gzip_bomb(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A /metrics page that inflates to 64 MiB (over the 32 MiB cap) from ~64 KB."""
    await _read_request(reader)
    body = _bomb()
    writer.write(
        HEADERS + b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    await writer.drain()
    writer.close()


PROM_SERIES = 230_000


@functools.cache
def _prom_answer() -> bytes:
    """53 MB: 230,000 series of one instant vector, as Prometheus writes it."""
    items = [
        json.dumps(
            {
                "metric": {
                    "__name__": "DCGM_FI_DEV_SM_CLOCK", "gpu": "0", "job": "dcgm",
                    "instance": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:9400",
                    "UUID": f"GPU-{i:08x}-0000-0000-0000-000000000000",
                    "modelName": "NVIDIA GB10", "Hostname": f"spark-{i}",
                },
                "value": [1.7e9, "2500"],
            },
            separators=(",", ":"),
        )
        for i in range(PROM_SERIES)
    ]  # fmt: skip
    head = b'{"status":"success","data":{"resultType":"vector","result":['
    return head + ",".join(items).encode() + b"]}}"


async def prometheus(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Prometheus's query API answering every query with :func:`_prom_answer`."""
    while True:  # keep-alive: the client sends its next query on the same connection
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (int(line.split(b":")[1]) for line in head.split(b"\r\n")
             if line.lower().startswith(b"content-length:")),
            0,
        )  # fmt: skip
        await reader.readexactly(length)
        body = _prom_answer()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        for at in range(0, len(body), 1 << 20):
            writer.write(body[at : at + (1 << 20)])
            await writer.drain()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Accepts the TCP connection and never sends an SSH banner."""
    await asyncio.Event().wait()


class Hostile:
    """The hostile servers, on their own event loop in a thread (as they would be on other
    machines): what they cost is not the monitor's loop's time."""

    KINDS: ClassVar[dict[str, Handler]] = {
        "hung": hung, "drip": drip, "huge": huge, "garbled": garbled, "gzip": gzip_bomb,
    }  # fmt: skip

    def __init__(self) -> None:
        self.ports: dict[str, int] = {}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Hostile:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        async def stop() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._loop.stop()

        asyncio.run_coroutine_threadsafe(stop(), self._loop)
        self._thread.join(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            _bomb(), _prom_answer()  # made once, before anything is measured
            servers = {**self.KINDS, "node": silent, "prometheus": prometheus}
            for name, handler in servers.items():
                server = await asyncio.start_server(_guarded(handler), "127.0.0.1", 0)
                self.ports[name] = server.sockets[0].getsockname()[1]

        self._loop.run_until_complete(start())
        self._ready.set()
        self._loop.run_forever()


_HANDLERS: set[asyncio.Task[Any]] = set()
"""Handler tasks held strongly: asyncio keeps only weak references, and a hung handler that
is garbage-collected while pending prints "Task was destroyed but it is pending"."""


def _guarded(handler: Handler) -> Handler:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            _HANDLERS.add(task)
            task.add_done_callback(_HANDLERS.discard)
        gave_up = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError)
        with contextlib.suppress(*gave_up, asyncio.CancelledError):  # the point of the bench
            await handler(reader, writer)

    return serve


def inventory_text(sim_inventory: Path, ports: dict[str, int]) -> str:
    doc = yaml.safe_load(sim_inventory.read_text())
    doc["interval_s"] = INTERVAL_S
    template = dict(doc["nodes"][0])
    doc["nodes"].append({**template, "name": "hung-node", "port": ports["node"]})
    doc["prometheus"] = {"url": f"http://127.0.0.1:{ports['prometheus']}", "timeout_s": 5.0}
    doc["nodes"].append({"name": "prom-node", "source": "prometheus", "instance": "10.0.0.1"})
    for kind in Hostile.KINDS:
        doc["engines"].append({"name": f"{kind}-engine", "url": f"http://127.0.0.1:{ports[kind]}"})
    return yaml.safe_dump(doc, sort_keys=False)


def _subjects(app: SparktopApp) -> dict[str, NodeSample | EngineSample]:
    return {**app.state.nodes, **app.state.engines}


def healthy_names(sim_inventory: Path) -> list[str]:
    """The simulated cluster's own nodes and engine (what the hostile ones must not delay)."""
    doc = yaml.safe_load(sim_inventory.read_text())
    return [n["name"] for n in doc["nodes"]] + [e["name"] for e in doc.get("engines", [])]


async def measure(text: str, seconds: float, warmup_s: float, healthy: list[str]) -> dict[str, Any]:
    inventory = parse_inventory(text, "hostile-cluster.yaml")
    plan = Plan.from_inventory(inventory)
    app = SparktopApp(plan, plan.sources(), plan.alert_engine())
    ticks: list[tuple[float, float | None, float | None]] = []
    original = app._tick

    def timed_tick() -> None:
        original()
        now = time.time()
        newest = app.state.newest_time_s()
        subjects = _subjects(app)
        ages = [now - subjects[n].time_s for n in healthy if n in subjects]
        ticks.append(
            (
                time.monotonic(),
                None if newest is None else now - newest,
                max(ages) if len(ages) == len(healthy) else None,
            )
        )

    app._tick = timed_tick  # type: ignore[method-assign]
    proc = psutil.Process()
    first_failure: dict[str, float] = {}
    rss_timeline: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        started = time.monotonic()
        tracemalloc.start()
        rss0 = traced0 = 0.0
        while (elapsed := time.monotonic() - started) < warmup_s + seconds:
            await pilot.pause(0.25)
            for name, sample in _subjects(app).items():
                if not sample.ok and name not in first_failure:
                    first_failure[name] = time.monotonic() - started
            if elapsed >= warmup_s:
                rss_timeline.append(proc.memory_info().rss / 2**20)
            if not rss0 and elapsed >= warmup_s:
                rss0 = proc.memory_info().rss / 2**20
                traced0 = tracemalloc.get_traced_memory()[0] / 2**20
                tracemalloc.reset_peak()
                mark = len(ticks)
        rss1 = proc.memory_info().rss / 2**20
        traced1, peak = (v / 2**20 for v in tracemalloc.get_traced_memory())  # bytes → MiB
        tracemalloc.stop()
        failed = {name: sample.message for name, sample in _subjects(app).items() if not sample.ok}
    measured = ticks[mark:]
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(measured)]
    ages = [age for _, age, _ in measured if age is not None]
    healthy_ages = [age for _, _, age in measured if age is not None]
    return {
        "gaps": gaps, "ages": ages, "healthy_ages": healthy_ages,
        "rss": (rss0, rss1), "traced": (traced0, traced1, peak),
        "failed": failed, "first_failure": first_failure, "ticks": len(measured),
        "rss_timeline": rss_timeline,
    }  # fmt: skip


def run(seconds: float = 60.0, warmup_s: float = 15.0) -> list[Figure]:
    with Hostile() as hostile, sim_process(4, 1) as sim:
        text = inventory_text(sim.inventory, hostile.ports)
        got = asyncio.run(measure(text, seconds, warmup_s, healthy_names(sim.inventory)))
    gaps, ages = got["gaps"], got["ages"]
    rss0, rss1 = got["rss"]
    traced0, traced1, peak = got["traced"]
    failed = got["failed"]
    timeline = got["rss_timeline"]
    half = len(timeline) // 2
    early, late = timeline[half] - timeline[0], timeline[-1] - timeline[half]
    figures = [
        check("render tick gap, max (s; interval 1 s)", max(gaps), 1.5 * INTERVAL_S, "{:.2f}"),
        check(
            "healthy sources' sample age when drawn, max (s)",
            max(got["healthy_ages"]),
            1.5 * INTERVAL_S,
            "{:.2f}",
        ),
        check("header age when drawn, max (s)", max(ages), 2 * INTERVAL_S, "{:.2f}"),
        check("RSS growth, second half of the span (MB)", late, 10.0, "{:.1f}"),
        info("RSS growth, first half of the span", f"{early:.1f} MB"),
        check("traced Python memory growth (MB)", traced1 - traced0, 20.0, "{:.1f}"),
        info("render tick gap, median (s)", f"{statistics.median(gaps):.2f}"),
        info("ticks drawn in the span", f"{got['ticks']} in {seconds:.0f} s"),
        info("RSS at start / end of the span", f"{rss0:.0f} / {rss1:.0f} MB"),
        info("traced Python memory peak in the span", f"{peak:.1f} MB"),
    ]
    first = got["first_failure"]
    for name in ("hung-node", "prom-node", *(f"{k}-engine" for k in Hostile.KINDS)):
        when = first.get(name)
        reason = str(failed.get(name, "answered?"))[:48]
        shown = f"{when:.1f} s: {reason}" if when is not None else f"never failed: {reason}"
        figures.append(info(f"{name} row failed after", shown))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    args = parser.parse_args(argv)
    figures = run(args.seconds, args.warmup)
    print_table("Hostile sources: the tick and memory", figures)
    return 0 if all(f.passed is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
