"""Prometheus answers that are hostile by size or by pace (issue 30, cases 1 and 2): an answer
of 53 MB / 230,000 series (under the 64 MiB cap) and one trickled at a byte a second. Each is
bounded in time, in memory and on the event loop, named as Prometheus's failure (never
"SSH not answering"), and the processes that meet them stop on SIGTERM at once."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import gzip
import json
import re
import signal
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from aiohttp import ClientConnectionResetError, web

from sparktop.inventory import parse_inventory
from sparktop.model import NodeState
from sparktop.plan import Plan
from sparktop.sim.promrun import free_port
from sparktop.sources.prometheus.api import MAX_SERIES, PromClient, PromFailure, SeriesCounter
from sparktop.sources.prometheus.hub import PromHub
from sparktop.sources.prometheus.promql import Target
from tests.sweep_helpers import run_cli, start_cli
from tests.test_prometheus_failures import Handler, _inventory, stand_in

HUGE_SERIES = 230_000


def _element(i: int) -> bytes:
    """One ~230-byte vector element, as Prometheus writes it (compact JSON)."""
    labels = {
        "__name__": "DCGM_FI_DEV_SM_CLOCK",
        "instance": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:9400",
        "gpu": "0",
        "UUID": f"GPU-{i:08x}-0000-0000-0000-000000000000",
        "modelName": "NVIDIA GB10",
        "job": "dcgm",
        "Hostname": f"spark-{i}",
    }
    return json.dumps({"metric": labels, "value": [1.7e9, "2500"]}, separators=(",", ":")).encode()


@functools.cache
def _huge_chunks() -> tuple[bytes, ...]:
    """The 53 MB answer in 1,000-series chunks (made once, before any measuring)."""
    chunks = [b'{"status":"success","data":{"resultType":"vector","result":[']
    for start in range(0, HUGE_SERIES, 1000):
        chunk = b",".join(_element(i) for i in range(start, start + 1000))
        chunks.append((b"," if start else b"") + chunk)
    chunks.append(b"]}}")
    assert 50e6 < sum(map(len, chunks)) < 64 * 2**20
    return tuple(chunks)


async def huge(request: web.Request) -> web.StreamResponse:
    """53 MB, 230,000 series."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        for chunk in _huge_chunks():
            await response.write(chunk)
    except (ConnectionError, ClientConnectionResetError):  # the client refused it, hung up
        pass
    return response


@asynccontextmanager
async def threaded(handler: Handler) -> AsyncIterator[tuple[str, list[web.Request]]]:
    """:func:`stand_in` on an event loop of its own thread, so serving 53 MB does not hold
    the loop under test (what is measured there is the client's)."""
    ready: concurrent.futures.Future[tuple[str, list[web.Request]]] = concurrent.futures.Future()
    loop = asyncio.new_event_loop()

    async def serve(stop: asyncio.Event) -> None:
        async with stand_in(handler) as answer:
            ready.set_result(answer)
            await stop.wait()

    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(stop),), daemon=True)
    thread.start()
    try:
        yield await asyncio.wrap_future(ready)
    finally:
        loop.call_soon_threadsafe(stop.set)
        await asyncio.to_thread(thread.join, 30)
        loop.close()


async def trickle(request: web.Request) -> web.StreamResponse:
    """Headers at once, then the answer at one byte a second."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    try:
        for byte in b'{"status":"success","data":{"resultType":"vector","result":[]}}':
            await response.write(bytes([byte]))
            await asyncio.sleep(1)
    except (ConnectionError, ClientConnectionResetError):
        pass
    return response


class LoopWatch:
    """The longest the event loop went without running a 10 ms timer, s."""

    def __init__(self) -> None:
        self.worst_s = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(0.01)
            now = loop.time()
            self.worst_s = max(self.worst_s, now - last)
            last = now

    async def __aenter__(self) -> LoopWatch:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def _poll(text: str) -> list:  # type: ignore[type-arg]
    sources = Plan.from_inventory(parse_inventory(text, "cluster.yaml")).sources()
    try:
        return list(await asyncio.gather(*(s.sample() for s in sources)))
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))


def test_series_are_counted_across_chunk_boundaries() -> None:
    body = b'{"result":[' + b",".join(_element(i) for i in range(50)) + b"]}"
    for size in (1, 3, 7, 64, 4096):
        counter = SeriesCounter()
        for at in range(0, len(body), size):
            counter.feed(body[at : at + size])
        assert counter.count == 50, size
    # a label named "value" is a string, never an array: not a series
    counter = SeriesCounter()
    counter.feed(b'{"metric":{"value":"[x]"},"value": [1, "2"]}')
    assert counter.count == 1


def test_series_count_passes_the_cap_exactly_where_an_exact_count_does() -> None:
    """The counter counts the cheaper ``"value"`` strings until they pass the cap: labels
    named ``value`` must not make an answer under the cap read as over it, nor hide one over."""
    labelled = b'{"metric":{"value":"v"},"value":[1,"2"]}'  # two "value" strings, one series
    for chunk in (1, 5, 64):
        counter = SeriesCounter(cap=3)
        body = b'{"result":[' + b",".join([labelled] * 3) + b"]}"
        fed = [counter.feed(body[at : at + chunk]) for at in range(0, len(body), chunk)]
        assert max(fed) <= 3 and counter.count == 3, chunk  # 6 "value" strings, 3 series
        over = SeriesCounter(cap=3)
        body = b'{"result":[' + b",".join([labelled] * 5) + b"]}"
        fed = [over.feed(body[at : at + chunk]) for at in range(0, len(body), chunk)]
        # over the cap at the chunk holding the fourth series' "value": [, not before
        ends = [m.end() for m in re.finditer(rb'"value":\[', body)]
        first_over = next(i for i, n in enumerate(fed) if n > 3)
        assert first_over * chunk < ends[3] <= (first_over + 1) * chunk, chunk
        assert fed[-1] == over.count == 5, chunk


async def test_a_53_mb_answer_is_refused_while_read_off_the_event_loop() -> None:
    """Case 1: before, 3.3 s of parsing on the event loop and 606 MB; now refused at the
    series cap while it is read, the loop never held for long, memory bounded."""
    _huge_chunks()
    async with threaded(huge) as (url, _seen):
        tracemalloc.start()
        started = time.perf_counter()
        try:
            async with LoopWatch() as watch:
                node1, node2, engine = await _poll(_inventory(url, timeout_s=30))
            elapsed_s = time.perf_counter() - started
            _now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    for sample in (node1, node2, engine):
        assert f"answer refused: over {MAX_SERIES:,} series (the cap)" in sample.message
        assert "SSH" not in sample.message
    assert node1.state is NodeState.ERROR  # a critical node alert (gpu_rules)
    read_mb = float(re.search(r"in its first ([0-9.]+) MB", node1.message)[1])  # type: ignore[index]
    assert read_mb < 20  # of 53: refused while reading, not after
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert watch.worst_s < 1.0, f"event loop held {watch.worst_s:.2f} s"
    assert elapsed_s < 15, elapsed_s


async def test_a_refused_answer_is_backed_off_not_fetched_every_tick() -> None:
    now = [0.0]
    async with stand_in(huge) as (url, seen):
        client = PromClient(url, timeout_s=30)
        hub = PromHub(client, [Target("spark-1", "10.0.0.1")], [], interval_s=1.0,
                      clock=lambda: now[0])  # fmt: skip
        hub.attach()
        reasons = []
        for tick in range(12):  # 12 one-second ticks
            now[0] = float(tick)
            try:
                await hub.fetch("nodes")
            except PromFailure as failure:
                reasons.append(failure.reason)
        await hub.aclose()
    assert len(reasons) == 12 and all("over 50,000 series" in r for r in reasons)
    # asked at 0, then after 2, 4 and 8 s of backoff (0, 2, 6 within 12 ticks), not 12 times
    assert len(seen) == 3, len(seen)


async def test_a_trickling_answer_is_cut_at_the_query_deadline() -> None:
    """Case 2: the timeout was per read, so a byte a second never ended the query."""
    async with stand_in(trickle) as (url, _seen):
        started = time.perf_counter()
        node1, _node2, engine = await _poll(_inventory(url, timeout_s=1.0))
        elapsed_s = time.perf_counter() - started
    assert elapsed_s < 3, elapsed_s
    assert node1.state is NodeState.ERROR  # critical: the node cannot be watched
    assert node1.message.startswith(f"Prometheus not answering ({url}): answer incomplete")
    assert "Prometheus not answering" in engine.message


def _snapshot_inventory(tmp_path: Path, url: str, timeout_s: float) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(_inventory(url, timeout_s=timeout_s))
    return path


async def test_snapshot_names_prometheus_and_keeps_its_deadline(tmp_path: Path) -> None:
    """``snapshot`` ran 31.7 s past its deadline on the big answer and called both hostile
    Prometheus nodes "SSH not answering"."""
    _huge_chunks()
    for handler, expected in ((huge, "answer refused: over"), (trickle, "Prometheus not")):
        async with threaded(handler) as (url, _seen):
            # Prometheus's own deadline (20 s) is past the snapshot's: the snapshot's names it
            inventory = _snapshot_inventory(tmp_path, url, 20.0)
            started = time.perf_counter()
            status, out, err = await run_cli(
                tmp_path,
                "snapshot",
                "-i",
                str(inventory),
                "--json",
                "--timeout",
                "3",
                "--window",
                "0",
            )
            elapsed_s = time.perf_counter() - started
        assert status == 1, err
        assert elapsed_s < 3 + 15, elapsed_s  # the deadline; start-up took up to 8 s under load
        document = json.loads(out)
        messages = [n["message"] for n in document["nodes"]]
        assert all(expected in m for m in messages), messages
        assert not any("SSH" in m for m in messages), messages
        assert any(a["subject"] == "spark-1" for a in document["alerts"]), document["alerts"]


async def test_exporter_serves_and_stops_on_sigterm_beside_a_53_mb_answer(
    tmp_path: Path,
) -> None:
    """The exporter answered 18 of ~120 scrapes in 60 s and ignored SIGTERM for 10 s."""
    _huge_chunks()
    async with threaded(huge) as (url, _seen):
        inventory = _snapshot_inventory(tmp_path, url, 20.0)
        listen = f"127.0.0.1:{free_port()}"
        proc = await start_cli(tmp_path, "exporter", "-i", str(inventory), "--listen", listen)
        try:
            assert proc.stderr is not None
            line = await asyncio.wait_for(proc.stderr.readline(), 60)
            assert b"serving" in line, line
            async with httpx.AsyncClient(trust_env=False, timeout=2) as client:
                pages: list[str] = []
                down = 'sparktop_node_up{node="spark-1"} 0.0'
                # 3 s of scrapes while the exporter meets the answer, then on until the node
                # is judged down (node_up follows the rules' next run after the refusal).
                while len(pages) < 6 or (len(pages) < 60 and down not in pages[-1]):
                    response = await client.get(f"http://{listen}/metrics")
                    pages.append(response.text)
                    await asyncio.sleep(0.5)
            assert all("sparktop_node_up" in page for page in pages)
            assert down in pages[-1], [
                (i, line) for i, page in enumerate(pages) for line in page.splitlines()
                if line.startswith(("sparktop_node_up", "sparktop_alert{", "sparktop_source_up"))
            ]  # fmt: skip
            proc.send_signal(signal.SIGTERM)
            started = time.perf_counter()
            await asyncio.wait_for(proc.wait(), 10)
            stop_s = time.perf_counter() - started
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0
    assert stop_s < 2.0, f"SIGTERM took {stop_s:.2f} s"  # it ignored SIGTERM for 10 s


async def test_a_gzip_bomb_answer_is_inflated_off_the_loop_and_refused() -> None:
    """A server may compress whatever it was asked: httpx inflated on the event loop, 64 MB
    per 64 KB read. Now the raw body is read and inflated in the parsing thread, bounded."""
    bomb = gzip.compress(b" " * (80 << 20), 9)
    labels = {"__name__": "DCGM_FI_DEV_SM_CLOCK", "gpu": "0", "UUID": "GPU-1",
              "modelName": "NVIDIA GB10", "instance": "10.0.0.1:9400"}  # fmt: skip
    good = json.dumps(
        {"status": "success",
         "data": {"resultType": "vector", "result": [{"metric": labels, "value": [1, "2500"]}]}}
    ).encode()  # fmt: skip
    bodies = {"bomb": bomb, "good": gzip.compress(good)}
    which = ["bomb"]

    async def answer(request: web.Request) -> web.Response:
        return web.Response(
            body=bodies[which[0]],
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )

    async with stand_in(answer) as (url, _seen):
        async with LoopWatch() as watch:
            node1, _node2, _engine = await _poll(_inventory(url, timeout_s=10))
        which[0] = "good"
        fine, _node2, _engine = await _poll(_inventory(url, timeout_s=10))
    assert node1.message.endswith(
        "answer over 64 MiB once decompressed (gzip): the query matches too much"
    ), node1.message
    assert watch.worst_s < 1.0, f"event loop held {watch.worst_s:.2f} s"
    assert fine.ok and fine.gpus[0].sm_clock_mhz == 2500.0
