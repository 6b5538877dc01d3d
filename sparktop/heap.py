"""Big transient buffers returned to the system when freed (glibc's malloc).

A hostile source hands sparktop pages of megabytes every few seconds (a 20 MB page, a
32 MiB page refused at the cap, a gzip bomb inflated to its cap), read on the event loop
and parsed in worker threads. glibc serves a request over its mmap threshold (128 KiB at
start) with its own mapping, unmapped when freed; but each time such a block is freed it
raises the threshold to that block's size (up to 32 MiB), so from then on buffers of up to
32 MiB come from the heap of the thread that asks (one arena per worker thread, each up to
64 MiB) and stay resident once freed. With 36 hostile engines the exporter grew to 909 MB
RSS, 524 MB of it free heap (``malloc_trim`` gave it back), 310 MB after.

:func:`big_buffer` is called where a buffer passes :data:`BIG_BYTES` (an engine page, a
Prometheus answer): the first call fixes the threshold at :data:`MMAP_THRESHOLD` (which
also stops glibc from raising it), so big buffers are mapped and unmapped again. A cluster
whose pages stay under a MiB never calls it (nor loads ``ctypes``: ~0.7 MB). Elsewhere
than glibc it does nothing.
"""

from __future__ import annotations

import sys

BIG_BYTES = 1 << 20
"""A buffer this large (bytes) is a big one: past any healthy engine's page (~100 KB)."""
MMAP_THRESHOLD = 256 * 1024
"""Allocations this large or larger are mapped on their own and returned when freed."""
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
_state: dict[str, bool] = {}


def big_buffer() -> bool:
    """Note that a buffer of :data:`BIG_BYTES` or more is being made; the first call fixes
    glibc's mmap threshold (see the module). Returns True when the threshold is fixed
    (now or before); False where it cannot be (not glibc). Cheap after the first call."""
    if "fixed" not in _state:
        _state["fixed"] = _fix_threshold()
    return _state["fixed"]


def _fix_threshold() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # only once a big buffer is seen

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def fixed() -> bool:
    """True once :func:`big_buffer` has fixed the threshold (tests, diagnostics)."""
    return _state.get("fixed", False)
