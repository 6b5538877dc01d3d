"""Big buffers go back to the system once a big page was read (sparktop.heap, trial 34 item 1).

glibc raises its mmap threshold each time it unmaps a big block, after which buffers of up
to 32 MiB come from the heaps and stay resident when freed: 36 hostile engines drove the
exporter to 909 MB. Each check runs in a fresh interpreter (malloc's state is per process):
a 20 MiB buffer made and freed first, as a huge page leaves it, then a page over a MiB
scraped from a loopback server; a 4 MiB buffer made after it must be mapped on its own
(glibc's ``mallinfo2().hblkhd``), not carved from a heap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import asyncio, ctypes, sys

    from sparktop import heap
    from sparktop.sources.engines.http import fetch_metrics
    from sparktop.sources.engines.wire import EngineClient
    from sparktop.testing.http_stub import StubServer, text

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallInfo2

    def mapped_for(size):
        before = mallinfo2().hblkhd
        block = bytearray(size)
        grown = mallinfo2().hblkhd - before
        del block
        return grown

    big = bytearray(20 << 20)  # a huge page's buffer, freed: glibc raises its threshold
    del big
    PAGE = int(sys.argv[1])

    async def scrape():
        async with StubServer({"/metrics": text(b"# x\\n" * (PAGE // 4))}) as server:
            client = EngineClient(server.url, timeout_s=5.0)
            try:
                body = await fetch_metrics(client, 5.0)
            finally:
                await client.aclose()
        return len(body.data)

    got = asyncio.run(scrape())
    print(got, heap.fixed(), mapped_for(4 << 20))
    """
)


def _run(page_bytes: int) -> tuple[int, bool, int]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(page_bytes)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    size, fixed, mapped = done.stdout.split()
    return int(size), fixed == "True", int(mapped)


def _glibc_with_mallinfo2() -> bool:
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    return sys.platform.startswith("linux") and hasattr(libc, "mallinfo2")


pytestmark = pytest.mark.skipif(
    not _glibc_with_mallinfo2(), reason="glibc >= 2.33 (mallinfo2) is needed to see mappings"
)


def test_a_page_over_a_mib_makes_big_buffers_mapped_again() -> None:
    size, fixed, mapped = _run(2 << 20)
    assert size == 2 << 20
    assert fixed
    # the 4 MiB buffer is its own mapping (it came from a heap, 0 bytes mapped, before)
    assert mapped >= 4 << 20


def test_healthy_pages_leave_malloc_alone() -> None:
    size, fixed, mapped = _run(200_000)
    assert size == 200_000
    assert not fixed  # an ordinary page: nothing changed, ctypes not loaded for it
    assert mapped == 0  # glibc's own raised threshold still rules
