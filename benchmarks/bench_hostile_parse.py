"""Parse cost of hostile pages: prometheus_client's parser against sparktop's bounded reader.

Issue 19 items 1 and 3: one line with many labels (the library's label parsing grows
quadratically: 16k labels 0.1 s, 64k 3.7 s, 256k 40 s were reported) and a 31 MB page of
543,617 series sparktop reads. sparktop refuses both with a reason; this prints how long that
takes next to the library's parse of the same input, measured in one run.

Run: ``python benchmarks/bench_hostile_parse.py [--skip-library-above 64000]``. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from sparktop.sources.engines.reading import parse_engine_page


def wide_line(labels: int) -> str:
    pairs = ",".join(f'l{i}="v"' for i in range(labels))
    return f'vllm:num_requests_running{{engine="0",{pairs}}} 3\n'


def many_series(series: int) -> str:
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [
        f'vllm:num_requests_running{{engine="{i}",model_name="dsv4-flash"}} 1.0'
        for i in range(series)
    ]
    return "\n".join(lines) + "\n"


def seconds(step: object, text: str) -> float:
    started = time.perf_counter()
    step(text)  # type: ignore[operator]
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-library-above", type=int, default=64_000, help="labels")
    args = parser.parse_args(argv)
    table = Table(title="hostile pages: prometheus_client parse vs sparktop (refusal)")
    for column in ("input", "size", "prometheus_client s", "sparktop s", "sparktop says"):
        table.add_column(
            column, justify="left" if column in ("input", "sparktop says") else "right"
        )
    cases = [(f"1 line, {n:,} labels", wide_line(n), n) for n in (16_000, 64_000, 256_000)]
    cases.append(("543,617 series", many_series(543_617), 0))
    for name, text, labels in cases:
        library = "skipped"
        if labels and labels <= args.skip_library_above:
            library = f"{seconds(lambda t: list(text_string_to_metric_families(t)), text):.3f}"
        started = time.perf_counter()
        said = parse_engine_page(text).error
        ours = time.perf_counter() - started
        table.add_row(name, f"{len(text) / 1e6:.1f} MB", library, f"{ours:.3f}", said)
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
