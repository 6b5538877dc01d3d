"""``sparktop profiles --compare OLD NEW`` and ``sparktop sweep --compare-to PROFILE``: print a
profile comparison (:mod:`sparktop.sweep.compare.compare`) and gate on regressions."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from sparktop.commands.exits import exit_status
from sparktop.errors import UserError
from sparktop.safe_text import dumps_printable, printable_lines

REGRESSED = 3
"""Exit status when ``--fail-on-regression PCT`` finds a figure worse beyond PCT and the
noise: distinct from 1 (a runtime failure) and 2 (a bad option or file), so a CI job can tell
"slower" from "broken"."""

COMPARE_HELP = """\
--compare pairs cells by nominal context (else prompt tokens within 10 %) and concurrency,
compares only figures both profiles define the same way (a decode-only aggregate is not an
end-to-end one; a column marked derived is left out) and counts a change only when it is larger
than the noise: the run-to-run spread kept by 'sparktop sweep' (FILE.runs.jsonl beside the
profile), else the estimator's held-out band. Details: docs/compare.md.
"""

EXIT_HELP = exit_status(
    [
        (0, "printed, imported or compared (with --compare --fail-on-regression PCT: no cell "
            "regressed beyond PCT and the noise)"),
        (2, "a bad option or profile (one line on stderr)"),
        (REGRESSED, "--compare with --fail-on-regression PCT: some figure of NEW is worse than "
                    "OLD by more than PCT % and by more than the cell's noise in at least one "
                    "cell (the comparison is printed)"),
    ]
)  # fmt: skip


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """``--compare OLD NEW`` and ``--fail-on-regression PCT`` of ``sparktop profiles``."""
    versus = parser.add_argument_group("compare two profiles (before/after an upgrade)")
    versus.add_argument(
        "--compare",
        nargs=2,
        metavar=("OLD", "NEW"),
        help="compare NEW against OLD cell by cell (names or paths: built-in, sweep, imported)",
    )
    versus.add_argument(
        "--fail-on-regression",
        metavar="PCT",
        help=f"exit {REGRESSED} when a figure of NEW is worse by more than PCT %% and beyond "
        "the noise in any cell",
    )


def fail_pct(value: str) -> float:
    """``--fail-on-regression`` argument: a % ≥ 0 (``5`` or ``5%``). UserError otherwise."""
    try:
        pct = float(value.strip().rstrip("%"))
    except ValueError:
        raise UserError(f"--fail-on-regression: '{value}' is not a percentage (e.g. 5)") from None
    if not math.isfinite(pct) or pct < 0:
        raise UserError(f"--fail-on-regression must be 0 or more, got '{value}'")
    return pct


def print_comparison(old: Any, new: Any, as_json: bool, pct: float | None) -> int:
    """Compare profile ``new`` against ``old``, print it to stdout (text or JSON) and return
    the exit status (0, or :data:`REGRESSED`)."""
    from sparktop.report.compare_text import render_text, to_json
    from sparktop.sweep.compare.compare import compare

    comparison = compare(old, new)
    if as_json:
        sys.stdout.write(dumps_printable(to_json(comparison, pct), indent=2) + "\n")
    else:
        sys.stdout.write(printable_lines(render_text(comparison, pct)))
    if pct is not None and comparison.regressions(pct):
        return REGRESSED
    return 0


def run_compare(names: list[str], as_json: bool, pct_text: str | None) -> int:
    """``profiles --compare OLD NEW``: load both (names or paths) and print the comparison."""
    from sparktop.plan import load_named

    pct = fail_pct(pct_text) if pct_text is not None else None
    old, new = (load_named(n) for n in names)
    return print_comparison(old, new, as_json, pct)
