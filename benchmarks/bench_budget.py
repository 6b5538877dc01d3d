"""Budget: estimating the tokens of a 500,000-character source tree versus just reading it.

The tree is real source text: this repository's own ``.py`` and ``.md`` files, copied into
a temporary folder (cycled until it holds at least 500,000 characters) with one Japanese and
Chinese text file so the CJK path runs too, plus a ``.git`` folder and a binary file that the
scan must skip. Timed in one run in CPU time, medians of several repeats, files in the page
cache:

- reading: ``os.walk`` + ``read_text()`` of every file (what any tool must at least do);
- counting: :func:`sparktop.sweep.tokens.scan.scan_directory` (walk, skip rules, strict UTF-8
  decode in chunks, CJK/other character counts, per-file estimate).

And as a user runs it: the process CPU (user + system, ``getrusage`` of the child) of the
whole command ``python -m sparktop budget --scan-dir <Python's asyncio package>`` against
the seed's script on the same folder (:mod:`benchmarks.seed_budget_scan`), the two run
alternately, medians: start-up, imports, the profile and the fit included.

Run: ``python benchmarks/bench_budget.py [--quick]``
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ROOT, Figure, arg_parser, check, info, print_table
from sparktop.sweep.tokens.scan import scan_directory

CHARS = 500_000
COMMAND_TARGET = 2.0
"""``sparktop budget --scan-dir`` may cost at most this many times the seed script's CPU."""
RATIO_TARGET = 2.0
"""Counting may cost at most this many times a plain read of the same tree."""
CJK_TEXT = "稀疏注意力与键值缓存。長い文脈を一度に送る前に、トークン数を数えておく。\n" * 40


@dataclass(frozen=True, slots=True)
class BudgetRun:
    chars: int
    files: int
    read_ms: float
    count_ms: float
    tokens: int
    counted: int
    skipped: int

    @property
    def ratio(self) -> float:
        return self.count_ms / self.read_ms


def build_tree(target: Path, chars: int = CHARS) -> tuple[int, int]:
    """Fill ``target`` with at least ``chars`` characters of source; returns (chars, files)."""
    sources = sorted(
        p for d in ("sparktop", "tests", "benchmarks") for p in (ROOT / d).rglob("*")
        if p.suffix in (".py", ".md") and p.is_file() and "__pycache__" not in p.parts
    )  # fmt: skip
    (target / "docs").mkdir(parents=True)
    (target / "docs" / "notes-cjk.md").write_text(CJK_TEXT, encoding="utf-8")
    total, files, copy = len(CJK_TEXT), 1, 0
    while total < chars:
        for src in sources:
            text = src.read_text(encoding="utf-8")
            dest = target / f"copy{copy}" / src.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
            total, files = total + len(text), files + 1
            if total >= chars:
                break
        copy += 1
    (target / ".git").mkdir()
    (target / ".git" / "index").write_bytes(b"DIRC\x00\x00\x00\x02" * 1000)
    (target / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00" * 100)
    return total, files


def read_everything(root: Path) -> int:
    """The baseline: walk the tree and read every file as text (errors replaced)."""
    chars = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as fh:
                chars += len(fh.read())
    return chars


def _median_ms(step: Callable[[], object], repeats: int) -> float:
    """CPU time (``time.process_time``): in wall time a loaded machine's waits for a core
    decided a ratio of two few-millisecond steps (0.3× to 6× between two runs at load 20)."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        step()
        times.append(time.process_time() - started)
    return statistics.median(times) * 1000


def measure(repeats: int = 15, chars: int = CHARS) -> BudgetRun:
    tmp = Path(tempfile.mkdtemp(prefix="sparktop-bench-budget-"))
    try:
        total, files = build_tree(tmp / "tree", chars)
        root = tmp / "tree"
        read_everything(root)  # warm the page cache
        result = scan_directory(root)
        read_ms = count_ms = 0.0
        # Interleaved so a busy neighbour slows both alike.
        reads, counts = [], []
        for _ in range(repeats):
            reads.append(_median_ms(lambda: read_everything(root), 1))
            counts.append(_median_ms(lambda: scan_directory(root), 1))
        read_ms, count_ms = statistics.median(reads), statistics.median(counts)
        counted, skipped = result.files_counted, result.files_skipped
        return BudgetRun(
            total, files, read_ms, count_ms, result.tokens,
            counted if isinstance(counted, int) else 0, skipped if isinstance(skipped, int) else 0,
        )  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _child_cpu_s(command: list[str]) -> float:
    """User + system CPU seconds of ``command`` run to its end (output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True, cwd=ROOT, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def command_cpu(repeats: int = 7) -> tuple[float, float, str]:
    """Median process CPU of ``sparktop budget --scan-dir`` and of the seed script on
    Python's asyncio package, run alternately; returns (sparktop s, seed s, folder)."""
    folder = str(Path(asyncio.__file__).parent)
    ours = [sys.executable, "-m", "sparktop", "budget", "--scan-dir", folder]
    seed = [sys.executable, str(ROOT / "benchmarks" / "seed_budget_scan.py"), "--scan-dir", folder]
    a, b = [], []
    for _ in range(repeats):
        a.append(_child_cpu_s(ours))
        b.append(_child_cpu_s(seed))
    return statistics.median(a), statistics.median(b), folder


def command_figures(ours_s: float, seed_s: float) -> list[Figure]:
    return [
        info(
            "budget --scan-dir asyncio, process CPU: sparktop | seed script",
            f"{ours_s:.2f} | {seed_s:.2f} s",
        ),
        check("budget command CPU ÷ the seed script's", ours_s / seed_s, COMMAND_TARGET, "{:.1f}×"),
    ]


def figures(run: BudgetRun) -> list[Figure]:
    return [
        info(
            f"budget: {run.chars:,} chars in {run.files} files: read | count (CPU)",
            f"{run.read_ms:.1f} | {run.count_ms:.1f} ms",
        ),
        check("budget count ÷ plain read of the same tree", run.ratio, RATIO_TARGET, "{:.2f}×"),
        info(
            "  estimate (files counted, skipped)",
            f"{run.tokens:,} tokens ({run.counted}, {run.skipped})",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, quick="fewer repeats")
    args = parser.parse_args(argv)
    run = measure(5 if args.quick else 15)
    ours_s, seed_s, _ = command_cpu(3 if args.quick else 7)
    figs = [*figures(run), *command_figures(ours_s, seed_s)]
    print_table("Budget: token estimate of a source tree", figs)
    return 0 if all(f.passed is not False for f in figs) else 1


if __name__ == "__main__":
    sys.exit(main())
