#!/usr/bin/env python3
"""Leave-one-out check of the sweep estimator on every built-in profile (or the ones named).

Each interior row of each concurrency column is removed and estimated from the rest; prints
the signed TTFT error per row and the median absolute error per metric.

    python benchmarks/leave_one_out.py [PROFILE ...]
"""

from __future__ import annotations

import sys

from sparktop.sweep.estimator import METRICS
from sparktop.sweep.profile import builtin_profile_names, load_profile
from sparktop.sweep.validate import leave_one_out, median_abs_error


def main(argv: list[str]) -> int:
    for name in argv or builtin_profile_names():
        held = leave_one_out(load_profile(name))
        print(f"{name}: {len(held)} interior rows held out")
        for h in held:
            print(
                f"  {h.row.prompt_tokens:>9,} tokens x {h.row.concurrency}: "
                f"TTFT {h.error('ttft_s') * 100:+6.1f} %"
            )
        medians = ", ".join(f"{m} {median_abs_error(held, m) * 100:.1f} %" for m in METRICS)
        print(f"  median |error|: {medians}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
