"""The rows of a ``nvidia-smi --query-gpu=… -lms N`` stream, grouped into intervals.

Pure: no I/O. The stream prints its CSV header once, then one row per GPU every interval;
:class:`RowGrouper` splits the output into bounded lines and the rows after the header into
intervals, each of which reads like the one-shot probe's GPU section.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

from sparktop.sources.nvsmi.cells import KNOWN_GPU_COLUMNS, first_line, normalise_header
from sparktop.sources.probe import MARK, SECTION_GPU

MAX_LINE_CHARS = 4096
"""A stream line longer than this is not nvidia-smi CSV (a GPU row is ~250 characters)."""
MAX_ROWS = 64
"""Rows in one interval (GPUs per node) beyond which the stream is refused."""
MAX_PREAMBLE_LINES = 8
"""Lines allowed before the CSV header (driver warnings) before the output is refused."""


class StreamGarbage(Exception):
    """Stream output that is not nvidia-smi's CSV (the message says what was seen)."""


_FIELD_LIMIT = csv.field_size_limit()


def _cells(line: str) -> list[str]:
    """The line's cells as the csv module reads them, stripped; a trailing comma adds none.

    A line without a quote, NUL or CR (every row nvidia-smi prints) is split at its commas,
    which is what the csv module makes of it (tests/test_stream.py compares the two): the
    module's reader was half of reading a streamed row."""
    if not line or '"' in line or "\0" in line or "\r" in line or len(line) > _FIELD_LIMIT:
        row = [cell.strip() for cell in next(csv.reader([line], skipinitialspace=True))]
    else:
        row = [cell.strip() for cell in line.split(",")]
    if len(row) > 1 and row[-1] == "" and line.rstrip().endswith(","):
        row.pop()
    return row


@dataclass(frozen=True, slots=True)
class StreamInterval:
    """One interval's rows: ``time_s`` is when its last row arrived (wall clock)."""

    time_s: float
    header: str
    rows: tuple[str, ...]

    def gpu_section(self) -> str:
        """The rows in the probe's GPU section shape (header, rows, exit status 0)."""
        body = "\n".join((self.header, *self.rows))
        return f"{MARK}{SECTION_GPU}\n{body}\n{MARK}rc 0\n"


class RowGrouper:
    """Splits stream output into lines and the rows after the header into intervals.

    An interval closes when ``expected_rows`` rows arrived (the GPU count of the last one-shot
    probe) or when a GPU index repeats. Pure: no I/O. Raises :class:`StreamGarbage` for a
    line over :data:`MAX_LINE_CHARS`, more than :data:`MAX_ROWS` rows in an interval, more
    than :data:`MAX_PREAMBLE_LINES` lines before a header, or a row whose cell count is not
    the header's. One-cell lines after the header (warnings) are skipped.
    """

    def __init__(self, expected_rows: int | None = None) -> None:
        self.expected_rows = expected_rows
        self.header: str | None = None
        self.preamble: list[str] = []
        self._columns: list[str] = []
        self._index: int | None = None
        self._rows: list[str] = []
        self._keys: set[str] = set()
        self._partial = ""

    def feed(self, chunk: str, time_s: float) -> list[StreamInterval]:
        """Take more output; the intervals it completed, oldest first."""
        lines = (self._partial + chunk).split("\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_LINE_CHARS:
            raise StreamGarbage(f"a line longer than {MAX_LINE_CHARS:,} characters")
        done: list[StreamInterval] = []
        for line in lines:
            if len(line) > MAX_LINE_CHARS:
                raise StreamGarbage(f"a line of {len(line):,} characters")
            interval = self._line(line.strip(), time_s)
            if interval is not None:
                done.append(interval)
        return done

    def _line(self, text: str, time_s: float) -> StreamInterval | None:
        if not text:
            return None
        cells = _cells(text)
        if self.header is None:
            names = [normalise_header(cell) for cell in cells]
            if len(set(names) & KNOWN_GPU_COLUMNS) >= 2:
                self.header, self._columns = text, names
                self._index = names.index("index") if "index" in names else None
                return None
            self.preamble.append(text)
            if len(self.preamble) > MAX_PREAMBLE_LINES:
                raise StreamGarbage(f"not nvidia-smi CSV: {first_line(self.preamble[0])}")
            return None
        if len(cells) == 1:
            return None  # a warning line (stderr is merged)
        if len(cells) != len(self._columns):
            raise StreamGarbage(
                f"a row of {len(cells)} cells under a {len(self._columns)}-column header: "
                + first_line(text, 60)
            )
        if all(normalise_header(c) == name for c, name in zip(cells, self._columns, strict=True)):
            return None  # the header again (a row differs at its first cell: ends there)
        done = None
        key = cells[self._index] if self._index is not None else None
        if key is not None and key in self._keys:
            done = self._close(time_s)
        self._rows.append(text)
        if key is not None:
            self._keys.add(key)
        if len(self._rows) > MAX_ROWS:
            raise StreamGarbage(f"more than {MAX_ROWS} GPU rows in one interval")
        if self.expected_rows and len(self._rows) >= self.expected_rows:
            return self._close(time_s)
        return done

    def _close(self, time_s: float) -> StreamInterval:
        assert self.header is not None
        interval = StreamInterval(time_s, self.header, tuple(self._rows))
        self._rows, self._keys = [], set()
        return interval
