"""How long one engine scrape takes: an 8-engine vLLM ``/metrics`` page of 5,000+ lines.

Builds the page with prometheus_client (vLLM's metric names, ``engine`` labels 0–7 and default
buckets, via :mod:`sparktop.testing.vllm_page`), serves it on 127.0.0.1, and measures in one
run, as the median of several repeats with counters advancing between them:

- prometheus_client's own parse of the whole page (``text_string_to_metric_families``);
- sparktop's parse + derivation from the page in memory (no HTTP);
- sparktop's whole scrape-to-sample step: ``EngineSource.sample()`` over HTTP on loopback
  (request, body, parse, windowed rates and quantiles, KV pool) — target ≤ 20 ms.

Run: ``python benchmarks/bench_scrape.py [--repeats 25]``. Not a test: timings depend on
the machine; the ratio to prometheus_client's parse is the portable number.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from benchmarks.common import arg_parser
from benchmarks.reference import measure_speed
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import parse_engine_page
from sparktop.sources.engines.source import EngineSource
from sparktop.testing.http_stub import Reply, StubServer
from sparktop.testing.vllm_page import FakeVllm, Load

TARGET_MS = 20.0
ENGINES = 8


@dataclass
class Config:
    name: str
    url: str
    kind: str = "vllm"
    api_key_env: str | None = None


def build() -> FakeVllm:
    fake = FakeVllm(engines=ENGINES, full=True, spec_decode=True, kv_cache_size_tokens=1_429_328)
    for i, engine in enumerate(fake.engines):
        fake.load[engine] = Load(4700, 65.0, 0.1, requests_per_s=2 + i, prompt_tokens=2048)
        fake.set_gauges(engine, running=6, waiting=i % 3, kv_usage=0.1 * (i + 1))
    fake.advance(600)
    return fake


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def time_sync(step: Callable[[bytes], object], fake: FakeVllm, repeats: int) -> list[float]:
    """Median inputs: a fresh page per repeat (counters advanced by 1 s), generated untimed."""
    times: list[float] = []
    for _ in range(repeats):
        fake.advance(1)
        page = fake.page()
        started = time.perf_counter()
        step(page)
        times.append(time.perf_counter() - started)
    return times


async def time_http(
    fake: FakeVllm, repeats: int, timer: Callable[[], float] = time.perf_counter
) -> tuple[list[float], str]:
    """Each repeat's ``source.sample()`` by ``timer`` (wall by default; run_all passes
    ``time.process_time``: the process's CPU, the loopback stub server's serving of the page
    included, as its target is judged against a CPU-time reference)."""
    current = {"page": fake.page()}
    routes = {"/metrics": lambda: Reply(body=current["page"])}
    async with StubServer(routes) as server:
        clock = [0.0]  # one simulated second per repeat, so the printed rates read true
        source = EngineSource(Config("bench", server.url), clock=lambda: clock[0])
        times: list[float] = []
        state = ""
        try:
            await source.sample()  # connection set up and first baseline, not timed
            for _ in range(repeats):
                fake.advance(1)
                clock[0] += 1.0
                current["page"] = fake.page()
                started = timer()
                sample = await source.sample()
                times.append(timer() - started)
                state = (
                    f"{sample.state.value}, {len(sample.ranks)} ranks, "
                    f"running {sample.running:.0f}, "
                    f"decode {sample.decode_tps:,.0f} tok/s, TTFT p50 {sample.ttft_p50}"
                )
        finally:
            await source.aclose()
    return times, state


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=25, help="timed repeats per row (median)")
    args = parser.parse_args(argv)

    fake = build()
    page = fake.page()
    lines = page.count(b"\n")
    deriver = MetricsDeriver("bench")
    clock = [0.0]

    def prometheus_client_parse(body: bytes) -> object:
        return list(text_string_to_metric_families(body.decode()))

    def sparktop_parse_derive(body: bytes) -> object:
        clock[0] += 1.0
        return deriver.derive(parse_engine_page(body.decode()), now_s=clock[0], wall_s=clock[0])

    speed = measure_speed()
    rows = [
        (
            "prometheus_client parse (whole page)",
            median_ms(time_sync(prometheus_client_parse, fake, args.repeats)),
        ),
        (
            "sparktop parse + derive (in memory)",
            median_ms(time_sync(sparktop_parse_derive, fake, args.repeats)),
        ),
    ]
    http_times, state = asyncio.run(time_http(fake, args.repeats))
    rows.append(("sparktop scrape→sample (HTTP, loopback)", median_ms(http_times)))

    base = rows[0][1]
    table = Table(title=f"{ENGINES}-engine vLLM page: {lines:,} lines, {len(page) / 1024:,.0f} KiB")
    for column in ("step", "median ms", "× prometheus_client", "target", "result"):
        table.add_column(column, justify="left" if column == "step" else "right")
    for name, ms in rows:
        whole = name.startswith("sparktop scrape")
        limit = TARGET_MS * speed.scale
        target = f"≤ {limit:.1f} ms" if whole else ""
        result = ("PASS" if ms <= limit else "MISS") if whole else ""
        table.add_row(name, f"{ms:.2f}", f"{ms / base:.2f}", target, result)
    console = Console(width=110)
    console.print(table)
    console.print(f"repeats: {args.repeats} (median); last sample: {state}")
    console.print(
        f"target: {TARGET_MS:.0f} ms at reference speed, scaled by this run's "
        f"{speed.figure().measured} (benchmarks/reference.py)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
