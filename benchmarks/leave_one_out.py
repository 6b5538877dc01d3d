#!/usr/bin/env python3
"""Leave-one-out check of the sweep estimator on every built-in profile (or the ones named).

Every row (edges included) is removed and estimated from the rest, by the estimator and, in
the same run, by plain column-wise log-log interpolation. Prints, per figure, the median /
p90 / max absolute error (%), refusals, how often the held-out value fell inside the band and
the band's median half-width; then both methods on only the cells plain log-log answers.

    python benchmarks/leave_one_out.py [--rows] [PROFILE ...]
"""

from __future__ import annotations

import sys
import time

from sparktop.sweep.estimator.estimator import METRICS
from sparktop.sweep.estimator.validate import (
    Summary,
    band_pooled,
    leave_one_out,
    loglog_predict,
    summarise,
)
from sparktop.sweep.profiles.builtin import builtin_profile_names
from sparktop.sweep.profiles.loader import load_profile

LABELS = {"ttft_s": "TTFT", "prefill_tps": "prefill", "decode_tps": "decode",
          "aggregate_tps": "aggregate"}  # fmt: skip


def _errs(s: Summary) -> str:
    return f"{s.median:5.1f} / {s.p90:5.1f} / {s.max:6.1f}"


def _band(s: Summary) -> str:
    if s.coverage is None or s.median_half_width is None:
        return "—"
    return f"{s.coverage:3.0f} % in, ±{s.median_half_width:4.1f} %"


def main(argv: list[str]) -> int:
    rows = "--rows" in argv
    names = [a for a in argv if not a.startswith("--")] or list(builtin_profile_names())
    for name in names:
        profile = load_profile(name)
        start = time.perf_counter()
        mine = leave_one_out(profile)
        took = time.perf_counter() - start
        plain = leave_one_out(profile, loglog_predict)
        answered = {(h.row.prompt_tokens, h.row.concurrency) for h in plain if h.errors}
        print(f"{name}: {len(mine)} rows held out, every one ({took:.1f} s)")
        print("  |error| % median / p90 / max, refused; band: held-out values inside, "
              "median half-width")  # fmt: skip
        for metric in METRICS:
            a, b = summarise(mine, metric), summarise(plain, metric)
            print(
                f"  {LABELS[metric]:<9} estimator {_errs(a)}  refused {a.refused:>2}  "
                f"band {_band(a)}   column log-log {_errs(b)}  refused {b.refused:>2}"
            )
        pooled = band_pooled(mine)
        if pooled is not None:
            print(f"  band, all figures together: {pooled[0]:.0f} % in, ±{pooled[1]:.1f} %")
        print(f"  on the {len(answered)} cells column log-log answers:")
        for metric in METRICS:
            a = summarise(mine, metric, answered)
            b = summarise(plain, metric, answered)
            print(f"  {LABELS[metric]:<9} estimator {a.median:5.1f} / {a.max:6.1f}   "
                  f"column log-log {b.median:5.1f} / {b.max:6.1f}  (median / max)")  # fmt: skip
        if rows:
            by_row = {(h.row.prompt_tokens, h.row.concurrency): h for h in plain}
            for h in mine:
                p = by_row[(h.row.prompt_tokens, h.row.concurrency)]
                cells = "  ".join(
                    f"{LABELS[m]} {dict(h.errors).get(m, float('nan')) * 100:+6.1f}"
                    f" ({dict(p.errors).get(m, float('nan')) * 100:+6.1f})"
                    for m in METRICS
                )
                print(f"    {h.row.prompt_tokens:>9,} x {h.row.concurrency}: {cells}")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
