"""nvidia-smi ``--query-gpu`` and ``--query-compute-apps`` CSV, mapped by header name."""

from __future__ import annotations

import csv
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from sparktop.hostmodel import GpuProcess
from sparktop.model import NA, GpuSample, Num, SlowdownCounters, is_num
from sparktop.sources.nvsmi.cells import (
    COUNTER_COLUMNS,
    KNOWN_GPU_COLUMNS,
    NUMERIC_COLUMNS,
    ParseError,
    first_line,
    normalise_header,
    parse_cell,
    parse_mask,
    plausible,
    text_cell,
)

# -- GPU CSV -----------------------------------------------------------------------------------


CSV_KEPT = 64
"""Texts kept split (:func:`csv_rows`): a poll reads its GPU CSV three times in a row."""


def csv_rows(text: str) -> list[list[str]]:
    """Each non-blank line split as CSV, cells stripped; a trailing comma adds no empty cell.

    Line by line, so a stray ``"`` in a warning cannot swallow the lines after it (nvidia-smi
    never quotes a line break). A poll's GPU text is read three times (the failure check,
    the GPUs, the driver version): it is split once and kept (:data:`CSV_KEPT` texts).
    Lines end at ``\\n`` (a CRLF's CR is dropped); a CR inside a line (a GPU name) is kept
    as ``␍``, the symbol :func:`~sparktop.safe_text.printable` shows for it, since the csv
    module refuses a bare CR.
    """
    return [list(row) for row in _csv_rows(text)]


@functools.lru_cache(maxsize=CSV_KEPT)
def _csv_rows(text: str) -> tuple[tuple[str, ...], ...]:
    rows = []
    for raw in text.split("\n"):
        line = raw.removesuffix("\r").replace("\r", "\u240d")
        if not line.strip():
            continue
        if '"' in line or "\0" in line or len(line) > _FIELD_LIMIT:
            row = [cell.strip() for cell in next(csv.reader([line], skipinitialspace=True))]
            if len(row) > 1 and row[-1] == "" and line.rstrip().endswith(","):
                row.pop()
            rows.append(tuple(row))
        else:
            rows.append(_split(line))
    return tuple(rows)


def _split(line: str) -> tuple[str, ...]:
    """What the csv module makes of a line with no quote, NUL or CR: split at the commas,
    cells stripped; a trailing comma adds no empty cell."""
    row = [cell.strip() for cell in line.split(",")]
    if len(row) > 1 and row[-1] == "" and line.rstrip().endswith(","):
        row.pop()
    return tuple(row)


def plain_cells(line: str) -> tuple[str, ...] | None:
    """A line's cells as :func:`csv_rows` reads it, for a non-blank line with no quote, NUL
    or CR that the csv module's field limit allows; None for any other line."""
    if '"' in line or "\0" in line or "\r" in line or len(line) > _FIELD_LIMIT:
        return None
    return _split(line) if line.strip() else None


_FIELD_LIMIT = csv.field_size_limit()
"""A line longer than the csv module's field limit goes through it (and fails as it does)."""


@functools.lru_cache(maxsize=CSV_KEPT)
def _columns(header: tuple[str, ...]) -> tuple[str, ...]:
    """The header row's cells as column names (:func:`normalise_header`), once per header:
    every poll of a node reads the same header."""
    return tuple(normalise_header(cell) for cell in header)


@functools.lru_cache(maxsize=CSV_KEPT)
def _names(row: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_columns(row))


def find_header(rows: Sequence[Sequence[str]], known: frozenset[str]) -> int | None:
    """Index of the first row that names at least two known columns (warnings may precede it)."""
    for i, row in enumerate(rows):
        if len(_names(tuple(row)) & known) >= 2:
            return i
    return None


def parse_gpu_csv(text: str, fields: Sequence[str] | None = None) -> tuple[GpuSample, ...]:
    """GPUs from ``nvidia-smi --query-gpu=… --format=csv[,nounits][,noheader]``.

    Columns are found by header name; without a header, pass the requested ``fields`` (in
    order). Lines before the header and one-cell lines after it (driver warnings) are
    skipped. Raises :class:`ParseError` when no header can be found, no row fits it, or a
    row has a different number of cells. An empty result means a header and no GPU rows.
    """
    rows = _csv_rows(text)
    start = find_header(rows, KNOWN_GPU_COLUMNS)
    if start is not None:
        header, body = rows[start], rows[start + 1 :]
    elif fields is not None:
        header, body = tuple(fields), rows
    else:
        first = text.strip().splitlines()[0] if text.strip() else "no output"
        raise ParseError(f"no nvidia-smi CSV header in output: {first[:80]}")
    columns = _columns(header)
    fitting = [row for row in body if len(row) == len(columns)]
    for number, row in enumerate(body, start=1):
        # One-cell lines are warnings on stderr (2>&1); a GPU row with the wrong number of
        # cells is refused rather than left out: a GPU must not silently disappear.
        if len(row) > 1 and len(row) != len(columns):
            raise ParseError(
                f"GPU row {number} has {len(row)} cells but the header has {len(columns)}: "
                + first_line(", ".join(row), 60)
            )
    if body and not fitting:
        raise ParseError(f"rows do not match the {len(columns)}-column header")
    return tuple(_gpu(columns, row, position) for position, row in enumerate(fitting))


def driver_version(text: str) -> str:
    """The ``driver_version`` column of nvidia-smi's GPU CSV (first GPU row), or "" when the
    column is absent or not a version (``[N/A]``…)."""
    rows = _csv_rows(text)
    start = find_header(rows, KNOWN_GPU_COLUMNS)
    if start is None:
        return ""
    columns = _columns(rows[start])
    if "driver_version" not in columns:
        return ""
    at = columns.index("driver_version")
    for row in rows[start + 1 :]:
        if len(row) == len(columns):
            value = text_cell(row[at])
            return value if isinstance(value, str) else ""
    return ""


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where a GPU header puts each column (by :func:`_layout`, once per header)."""

    at: Mapping[str, int]
    """Column name → its cell's place (a repeated name: its last place, as a dict of the
    row would keep)."""
    numbers: tuple[tuple[str, str, int], ...]
    """(column, GpuSample attribute, place) of each numeric column present."""
    absent: tuple[str, ...]
    """GpuSample attributes of the numeric columns not queried."""
    counters: tuple[tuple[str, str, int], ...]
    texts: tuple[int | None, ...]
    """The places of ``index``, ``uuid``, ``name``, ``pstate`` and
    ``clocks_event_reasons.active`` (None: not queried)."""


_TEXTS = ("index", "uuid", "name", "pstate", "clocks_event_reasons.active")
CELLS_KEPT = 4096
"""GPU cells kept read (:func:`_kept`): most of a row's cells (counters, limits, [N/A], idle
readings) are the same text from poll to poll."""
KEPT_CHARS = 40
"""Longer cells are read each time (a hostile one may be ~128 KiB: not kept 4,096 times)."""


@functools.lru_cache(maxsize=CELLS_KEPT)
def _kept(column: str, text: str) -> float | NA:
    return plausible(column, parse_cell(text))


def _number(column: str, text: str) -> float | NA:
    """``plausible(column, parse_cell(text))``, kept for the newest short cells."""
    if len(text) > KEPT_CHARS:
        return plausible(column, parse_cell(text))
    return _kept(column, text)


_NOT_QUERIED = NA("not queried")
_NOT_AVAILABLE = NA()
"""GpuSample's own default process memory (a GPU read from the CSV alone)."""


@functools.lru_cache(maxsize=CSV_KEPT)
def _layout(columns: tuple[str, ...]) -> _Layout:
    at = {column: i for i, column in enumerate(columns)}
    return _Layout(
        at=at,
        numbers=tuple((c, attr, at[c]) for c, attr in NUMERIC_COLUMNS.items() if c in at),
        absent=tuple(attr for c, attr in NUMERIC_COLUMNS.items() if c not in at),
        counters=tuple((c, attr, at[c]) for c, attr in COUNTER_COLUMNS.items() if c in at),
        texts=tuple(at.get(c) for c in _TEXTS),
    )


def gpu_uuid(columns: tuple[str, ...], row: Sequence[str]) -> str:
    """The UUID the row's GPU gets (:func:`_gpu`): its ``uuid`` cell, "" when not one."""
    uuid_at = _layout(columns).texts[1]
    uuid = text_cell(row[uuid_at]) if uuid_at is not None else None
    return uuid if isinstance(uuid, str) else ""


def _gpu(
    columns: tuple[str, ...],
    row: Sequence[str],
    position: int,
    process_memory_mib: Num = _NOT_AVAILABLE,
) -> GpuSample:
    """One GPU from a row that fits ``columns`` (the layout is the header's, kept)."""
    layout = _layout(columns)
    index_at, uuid_at, name_at, pstate_at, mask_at = layout.texts
    index = parse_cell(row[index_at]) if index_at is not None else None
    uuid = text_cell(row[uuid_at]) if uuid_at is not None else None
    name = text_cell(row[name_at]) if name_at is not None else None
    numbers: dict[str, Num] = {attr: _number(column, row[i]) for column, attr, i in layout.numbers}
    for attr in layout.absent:
        numbers[attr] = _NOT_QUERIED
    counters = {attr: _number(column, row[i]) for column, attr, i in layout.counters}
    return GpuSample(
        index=int(index) if index is not None and is_num(index) else position,
        uuid=uuid if isinstance(uuid, str) else "",
        name=name if isinstance(name, str) else "",
        pstate=text_cell(row[pstate_at]) if pstate_at is not None else _NOT_QUERIED,
        clock_event_mask=parse_mask(row[mask_at]) if mask_at is not None else _NOT_QUERIED,
        counters=SlowdownCounters(**counters),
        process_memory_mib=process_memory_mib,
        **numbers,
    )


# -- per-process memory ------------------------------------------------------------------------

KNOWN_APP_COLUMNS = frozenset({"uuid", "pid", "used_memory", "process_name", "name"})
_KNOWN_COLUMNS = KNOWN_GPU_COLUMNS | KNOWN_APP_COLUMNS


def parse_apps_csv(text: str, fields: Sequence[str] | None = None) -> dict[str, Num]:
    """GPU UUID → Σ ``used_memory`` (MiB) from ``nvidia-smi --query-compute-apps=…``.

    With a header, columns are found by name (``gpu_uuid``, ``used_gpu_memory [MiB]``…);
    without one, by ``fields``, else the UUID is taken as the first column and the memory as
    the last. Elided UUIDs (``GPU-...``) are kept as they are. A process whose memory is
    ``[N/A]`` (MIG, some drivers) makes its GPU's total NA with that text: a sum without it
    would understate. No processes → ``{}``.
    """
    rows = [row for row in csv_rows(text) if len(row) >= 2]
    start = find_header(rows, KNOWN_APP_COLUMNS)
    if start is not None:
        header, body = rows[start], rows[start + 1 :]
        columns = [normalise_header(cell) for cell in header]
    elif fields is not None:
        columns, body = [normalise_header(f) for f in fields], rows
    else:
        columns, body = [], rows
    uuid_at = columns.index("uuid") if "uuid" in columns else 0
    memory_at = columns.index("used_memory") if "used_memory" in columns else -1
    totals: dict[str, Num] = {}
    for row in body:
        if columns and len(row) != len(columns):
            continue
        uuid = row[uuid_at]
        totals[uuid] = add(totals.get(uuid, 0.0), parse_cell(row[memory_at]))
    return totals


MAX_PROCESSES = 256
"""Processes listed per node (more is a broken or hostile nvidia-smi)."""


def parse_processes(
    text: str, total_mib: Num = NA("memory total unknown")
) -> tuple[GpuProcess, ...]:
    """Compute processes from ``--query-compute-apps=gpu_uuid,pid,process_name,used_memory``
    (columns by header name), newest first: the highest pid first (Linux hands out pids in
    increasing order until they wrap). ``share_pct`` is ``used_mib`` ÷ ``total_mib`` (on GB10
    the host's MemTotal: the memory is unified). Rows without a numeric pid are skipped."""
    rows = [row for row in csv_rows(text) if len(row) >= 2]
    start = find_header(rows, KNOWN_APP_COLUMNS)
    if start is None:
        return ()
    columns = [normalise_header(cell) for cell in rows[start]]
    out: list[GpuProcess] = []
    for row in rows[start + 1 :]:
        if len(row) != len(columns) or len(out) >= MAX_PROCESSES:
            continue
        cells = dict(zip(columns, row, strict=True))
        pid = parse_cell(cells.get("pid", ""))
        if not is_num(pid):
            continue
        used = parse_cell(cells.get("used_memory", "")) if "used_memory" in cells else NA()
        name = text_cell(cells.get("process_name", cells.get("name", "")))
        share: Num = NA("memory total unknown")
        if is_num(used) and is_num(total_mib) and total_mib > 0:
            share = used / total_mib * 100.0
        out.append(
            GpuProcess(
                pid=int(pid),
                name=name if isinstance(name, str) else "",
                gpu_uuid=cells.get("uuid", ""),
                used_mib=used,
                share_pct=share,
            )
        )
    return tuple(sorted(out, key=lambda p: -p.pid))


def with_process_memory(
    gpus: tuple[GpuSample, ...], by_uuid: Mapping[str, Num]
) -> tuple[GpuSample, ...]:
    """Each GPU with ``process_memory_mib`` set from ``uuid → Σ used_memory`` (MiB)
    (:func:`process_memory`)."""
    values = process_memory([gpu.uuid for gpu in gpus], by_uuid)
    return tuple(replace(g, process_memory_mib=v) for g, v in zip(gpus, values, strict=True))


def process_memory(uuids: Sequence[str], by_uuid: Mapping[str, Num]) -> list[Num]:
    """Each GPU's (by its UUID) process memory from ``uuid → Σ used_memory`` (MiB).

    A GPU with no process is a real 0. Entries whose UUID matches no GPU (elided ``GPU-...``)
    go to the only GPU when there is one; with several GPUs those GPUs' values become NA.
    """
    known = set(uuids)
    unmatched = [v for k, v in by_uuid.items() if k not in known]
    if unmatched and len(uuids) == 1:
        return [sum_num([by_uuid.get(uuids[0], 0.0), *unmatched])]
    if unmatched:
        reason = NA("process memory not attributable to a GPU (UUID elided)")
        return [reason for _ in uuids]
    return [by_uuid.get(uuid, 0.0) for uuid in uuids]


def sum_num(values: Iterable[Num]) -> Num:
    """The sum, or the first NA among the values (0.0 for none)."""
    total: Num = 0.0
    for value in values:
        total = add(total, value)
    return total


def add(a: Num, b: Num) -> Num:
    """``a + b``, or the first NA: a total with a missing part is missing."""
    if isinstance(a, NA):
        return a
    return b if isinstance(b, NA) else a + b


def looks_like_csv(text: str) -> bool:
    """True when the text has a recognisable nvidia-smi CSV header, or is uniform CSV rows."""
    rows = _csv_rows(text)
    if not rows:
        return False
    if find_header(rows, _KNOWN_COLUMNS) is not None:
        return True
    return len(rows[0]) >= 2 and all(len(row) == len(rows[0]) for row in rows)
