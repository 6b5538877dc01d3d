"""Every sparktop benchmark in one run: what the monitor costs and how it scales.

Runs, in order: poll fan-out over loopback SSH (``bench_poll``), the node-side cost of a
sample, one-shot against the streaming probe (``bench_node``), the monitor's own CPU and
memory (``bench_cpu``), the render tick (``bench_render``), the engine scrape
(``bench_scrape``), the budget scan (``bench_budget``), 256 nodes read through a real
Prometheus against SSH polling (``bench_prometheus``, skipped without it) and the peers
side by side (``bench_peers``: vllm-top, glances, nvitop where it runs), then prints one
table: figure | measured | target | PASS/MISS, with the machine it ran on. Ratios are measured in
one run (both sides of a ratio on the same machine, minutes apart at most); absolute times
depend on the machine and on what else it is doing.

Run: ``python benchmarks/run_all.py`` (about 16 minutes on 2 cores) or ``--quick`` (shorter);
``--only poll,render`` runs some; ``--markdown FILE`` also writes the table as markdown.
Exit status 0 when every figure passes, 1 when one misses.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_budget, bench_cpu, bench_node, bench_peers, bench_poll, bench_render
from benchmarks.common import Figure, arg_parser, info, machine, markdown_table, print_table
from benchmarks.reference import around, check_scaled, measure_speed

BENCHMARKS = ("poll", "node", "cpu", "render", "scrape", "budget", "prometheus", "peers")


def poll(quick: bool) -> list[Figure]:
    return bench_poll.run_both(quick)


def node(quick: bool) -> list[Figure]:
    return bench_node.measure(quick)


def cpu(quick: bool) -> list[Figure]:
    warmup = bench_cpu.WARMUP_S / 2 if quick else bench_cpu.WARMUP_S
    run, speed = around(
        lambda: bench_cpu.measure_cpu(warmup_s=warmup, measure_s=15.0 if quick else 60.0)
    )
    hour = bench_cpu.quick_hour() if quick else asyncio.run(bench_cpu.simulated_hour())
    return [*bench_cpu.figures(run, hour, speed), speed.figure()]


def render(quick: bool) -> list[Figure]:
    results, speed = around(lambda: bench_render.measure(rounds=5 if quick else 20))
    return bench_render.figures(results, speed)


def scrape(quick: bool) -> list[Figure]:
    return scrape_figures(8 if quick else 25)


def scrape_figures(repeats: int) -> list[Figure]:
    """The metrics helper's scrape benchmark (``bench_scrape``), as figures."""
    from prometheus_client.parser import text_string_to_metric_families

    from benchmarks import bench_scrape as bs
    from sparktop.sources.metrics import MetricsDeriver
    from sparktop.sources.vllm import parse_engine_page

    fake = bs.build()
    page = fake.page()
    deriver, clock = MetricsDeriver("bench"), [0.0]

    def prometheus_client_parse(body: bytes) -> object:
        return list(text_string_to_metric_families(body.decode()))

    def sparktop_parse_derive(body: bytes) -> object:
        clock[0] += 1.0
        return deriver.derive(parse_engine_page(body.decode()), now_s=clock[0], wall_s=clock[0])

    speed = measure_speed()
    prom = bs.median_ms(bs.time_sync(prometheus_client_parse, fake, repeats))
    ours = bs.median_ms(bs.time_sync(sparktop_parse_derive, fake, repeats))
    http_times, _state = asyncio.run(bs.time_http(fake, repeats))
    whole = statistics.median(http_times) * 1000
    lines = page.count(b"\n")
    return [
        info(
            f"scrape {bs.ENGINES}-engine page, {lines:,} lines: prometheus_client parse",
            f"{prom:.1f} ms",
        ),
        info(
            "scrape: sparktop parse + derive (in memory) ÷ prometheus_client parse",
            f"{ours:.1f} ms = {ours / prom:.2f}×",
        ),
        check_scaled(
            "scrape end to end (HTTP on loopback → EngineSample)", whole, 20.0, "{:.1f} ms", speed
        ),
        speed.figure(),
    ]


def peers(quick: bool) -> list[Figure]:
    return bench_peers.figures(bench_peers.measure(quick))


def budget(quick: bool) -> list[Figure]:
    run = bench_budget.measure(5 if quick else 15)
    ours_s, seed_s, _ = bench_budget.command_cpu(3 if quick else 7)
    return [*bench_budget.figures(run), *bench_budget.command_figures(ours_s, seed_s)]


def prometheus(quick: bool) -> list[Figure]:
    from benchmarks import bench_prometheus

    return bench_prometheus.run(quick)


RUNNERS: dict[str, Callable[[bool], list[Figure]]] = {
    "poll": poll,
    "node": node,
    "cpu": cpu,
    "render": render,
    "scrape": scrape,
    "budget": budget,
    "prometheus": prometheus,
    "peers": peers,
}


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="shorter windows, fewer repeats")
    parser.add_argument(
        "--only", default=",".join(BENCHMARKS), help=f"comma-separated subset of {BENCHMARKS}"
    )
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table")
    args = parser.parse_args(argv)
    wanted = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(wanted) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {BENCHMARKS}")
    figures: list[Figure] = []
    started = time.monotonic()
    for name in wanted:
        t0 = time.monotonic()
        print(f"running {name}…", file=sys.stderr, flush=True)
        part = RUNNERS[name](args.quick)
        print(f"  {name}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        print_table(name, part)
        figures += part
    where = machine()
    took = f"{time.monotonic() - started:.0f} s{' (--quick)' if args.quick else ''}"
    print()
    print_table("sparktop: measured overhead and scale", figures, f"{where}; took {took}")
    if args.markdown is not None:
        args.markdown.write_text(f"{markdown_table(figures)}\n\nMachine: {where}; took {took}\n")
    missed = [f.name for f in figures if f.passed is False]
    if missed:
        print(f"MISS: {len(missed)} figure(s): " + "; ".join(missed))
    else:
        print("every figure with a target passes")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
