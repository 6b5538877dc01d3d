"""The garbage collector's settings for a long-running sparktop process (the monitor, the
demo, replay, the exporter): CPython's defaults suit short scripts, not a process that holds
~100,000 long-lived objects and makes tens of thousands of short-lived ones every tick.

A tick's objects are samples, series and cells (256 nodes read through Prometheus: 2,816
series and 256 samples a tick); the long-lived ones are modules, Textual's and Rich's
classes and caches, the plan and the sources. With the default threshold (700 allocations)
the youngest generation is collected dozens of times a tick, the middle one in proportion,
and every full collection walks all the long-lived objects again. :func:`tune` moves what
exists when the process has started into the permanent generation (:func:`gc.freeze`: never
scanned again) and collects the youngest generation every 20,000 allocations. Only objects in
reference cycles wait for the collector (the rest are freed by reference counting the moment
they are dropped), so memory stays bounded. Measured (``benchmarks/bench_prometheus.py``,
ticks at 1 s, one run each way minutes apart): 256 nodes through Prometheus 50.6 → 29.1 ms of
CPU a tick, 32 nodes over SSH 36.9 → 31.2 ms, 64 nodes over SSH 70.9 → 56.5 ms.

Not for tests or any process that makes and drops many apps: frozen objects are never
collected, so a cycle made before :func:`tune` and dropped after it stays in memory.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000
"""Allocations (net of deallocations) between collections of the youngest generation."""


def tune() -> None:
    """Freeze what exists now and collect the youngest generation less often; call once, when
    the process has started (everything built) and before its loop runs."""
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
