"""A streamed poll's sample from the stream's pieces, not from its text split again.

A streamed poll's text is its interval's GPU section (:meth:`StreamInterval.gpu_section`)
followed by the slow tier's last reading (``/proc/meminfo``, the compute apps, the host
files), the same reading for ~10 s of polls. :func:`parse_streamed` gives the sample
:func:`~sparktop.sources.nvsmi.node.parse_probe_output` gives for that text, without finding
its sections again: the GPU section is the interval's header and rows, and the slow tier's
sections are split once per reading and found again by the reading's own string (its hash
kept), where the text's copy of it was hashed again every poll
(tests/test_nvsmi_streamed.py compares the two on every captured and hand-made case).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from sparktop.model import GpuSample, NodeSample, Num
from sparktop.sources.nvsmi.cells import KNOWN_GPU_COLUMNS, text_cell
from sparktop.sources.nvsmi.node import (
    MAX_GPUS,
    RAW_MAX,
    GpuRead,
    parse_probe_output,
    parse_sections,
    split_tail,
)
from sparktop.sources.nvsmi.stream_rows import StreamInterval
from sparktop.sources.nvsmi.tables import CSV_KEPT, _columns, _gpu, gpu_uuid, plain_cells
from sparktop.sources.probe import MARK, SECTION_GPU, SECTION_MEMINFO

_SLOW_START = f"{MARK}{SECTION_MEMINFO}"

FAILURE_WORDS = (
    "driver/library version mismatch",
    "no devices were found",
    "not found",
    "couldn't communicate with the nvidia driver",
    "couldn't find libnvidia-ml.so",
    "failed to initialize nvml",
    "is not a valid field to query",
    "gpu is lost",
    "fallen off the bus",
)
"""Words without which :func:`~sparktop.sources.nvsmi.node.classify_failure` finds no failure
in plain ASCII CSV that exited 0 (lower case; a text holding one is read the whole way)."""


def parse_streamed(node: str, interval: StreamInterval, slow: str, time_s: float) -> NodeSample:
    """``parse_probe_output(node, interval.gpu_section() + slow, time_s)``; ``slow`` is the
    slow tier's text (from its ``meminfo`` marker on, or "" before the first reading).

    Where the pieces could read otherwise as one text (a marker in a GPU row, a slow text
    that does not start at its marker), the text is parsed as a whole."""
    text = interval.gpu_section() + slow
    body = "\n".join((interval.header, *interval.rows))
    if MARK in body or (slow and not slow.startswith(_SLOW_START)):
        return parse_probe_output(node, text, time_s)
    # The text's sections: the GPU section's body between its marker and its exit status,
    # then the slow tier's (a name's first section wins, as split_probe keeps it).
    sections: dict[str, tuple[str, int | None]] = {SECTION_GPU: (body, 0)}
    if slow:
        for name, section in split_tail(slow).items():
            sections.setdefault(name, section)
    try:
        return parse_sections(node, sections, time_s, text[:RAW_MAX], _plain_gpus(interval, body))
    except Exception:  # the whole text's parse makes it the same node state
        return parse_probe_output(node, text, time_s)


@functools.lru_cache(maxsize=CSV_KEPT)
def _header_columns(header: str) -> tuple[str, ...] | None:
    """The column names of a plain header line naming two known GPU columns (as the CSV
    reader finds a header), else None."""
    cells = plain_cells(header)
    if cells is None:
        return None
    columns = _columns(cells)
    return columns if len(set(columns) & KNOWN_GPU_COLUMNS) >= 2 else None


def _plain_gpus(interval: StreamInterval, body: str) -> GpuRead | None:
    """:func:`~sparktop.sources.nvsmi.node.read_gpus` of the interval's GPU section (its
    ``body``, exit status 0) where every line is plain CSV (ASCII, no quote, NUL, CR or
    escape, no failure words) under a known header, each row with the header's number of
    cells: no failure, its GPUs, the driver version; None for anything else (the section is
    then read as text)."""
    columns = _header_columns(interval.header)
    rows = interval.rows
    if columns is None or not 0 < len(rows) <= MAX_GPUS:
        return None
    if not body.isascii() or "\x1b" in body:
        return None
    lowered = body.lower()
    if any(word in lowered for word in FAILURE_WORDS):
        return None
    table = []
    for row in rows:
        cells = plain_cells(row)
        if cells is None or len(cells) != len(columns):
            return None
        table.append(cells)
    driver = ""
    if "driver_version" in columns:
        value = text_cell(table[0][columns.index("driver_version")])
        driver = value if isinstance(value, str) else ""
    return None, _Rows(columns, table), driver


class _Rows:
    """Plain GPU rows under their header's columns (a :class:`GpuRows`)."""

    __slots__ = ("columns", "table")

    def __init__(self, columns: tuple[str, ...], table: list[tuple[str, ...]]) -> None:
        self.columns = columns
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    def uuids(self) -> list[str]:
        return [gpu_uuid(self.columns, cells) for cells in self.table]

    def made(self, process_memory_mib: Sequence[Num]) -> tuple[GpuSample, ...]:
        pairs = zip(self.table, process_memory_mib, strict=True)
        return tuple(_gpu(self.columns, cells, i, mib) for i, (cells, mib) in enumerate(pairs))
