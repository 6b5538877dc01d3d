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

:data:`IN_FLIGHT` bounds the bytes of big engine pages held at once across scrapes: a scrape
whose page would put the process past :data:`BIG_PAGES_BYTES` while others hold big pages
gives up its own page (its row says why), rather than every engine's pages adding up.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

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


BIG_PAGES_BYTES = 128 * 1024 * 1024
"""Bytes of big pages (each past :data:`BIG_BYTES`: received, and inflated) that scrapes may
hold at once, process-wide: four pages at the 32 MiB cap (36 hostile engines could hold
36 × 32 MiB at once)."""


@dataclass(slots=True)
class Ticket:
    """One scrape's share of :data:`IN_FLIGHT`: the bytes it holds, given back when it ends."""

    held: int = 0


class InFlight:
    """The bytes of big pages held at once across scrapes (any thread), bounded by
    ``limit``. A page under :data:`BIG_BYTES` never asks (a healthy cluster never takes the
    lock); one alone in flight may always grow (to its own cap), so a big page is never
    starved by an empty budget."""

    def __init__(self, limit: int = BIG_PAGES_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def grow(self, ticket: Ticket, size: int) -> bool:
        """Let ``ticket`` hold ``size`` bytes in all; False (nothing taken) when that would
        put the process over ``limit`` while other big pages are held."""
        with self._lock:
            more = size - ticket.held
            if more <= 0:
                return True
            if self.held > ticket.held and self.held + more > self.limit:
                return False
            self.held += more
            ticket.held = size
            return True

    def release(self, ticket: Ticket) -> None:
        """Give back all ``ticket`` holds (a page read, refused or abandoned)."""
        if ticket.held:
            with self._lock:
                self.held -= ticket.held
                ticket.held = 0


IN_FLIGHT = InFlight()
"""The process's budget for big engine pages (those an ``EngineSource`` scrapes)."""
