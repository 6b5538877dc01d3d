"""nvidia-smi ``--query-gpu`` and ``--query-compute-apps`` CSV, mapped by header name."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence

from sparktop.model import NA, GpuSample, Num, SlowdownCounters, is_num
from sparktop.sources.nvsmi.cells import (
    COUNTER_COLUMNS,
    KNOWN_GPU_COLUMNS,
    NUMERIC_COLUMNS,
    ParseError,
    normalise_header,
    parse_cell,
    parse_mask,
    text_cell,
)

# -- GPU CSV -----------------------------------------------------------------------------------


def csv_rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    return [[cell.strip() for cell in row] for row in csv.reader(lines, skipinitialspace=True)]


def find_header(rows: list[list[str]], known: frozenset[str]) -> int | None:
    """Index of the first row that names at least two known columns (warnings may precede it)."""
    for i, row in enumerate(rows):
        if len({normalise_header(cell) for cell in row} & known) >= 2:
            return i
    return None


def parse_gpu_csv(text: str, fields: Sequence[str] | None = None) -> tuple[GpuSample, ...]:
    """GPUs from ``nvidia-smi --query-gpu=… --format=csv[,nounits][,noheader]``.

    Columns are found by header name; without a header, pass the requested ``fields`` (in
    order). Lines before the header (driver warnings) and rows whose cell count differs from
    the header's are skipped. Raises :class:`ParseError` when no header can be found or no
    row fits it. An empty result means the header came with no GPU rows.
    """
    rows = csv_rows(text)
    start = find_header(rows, KNOWN_GPU_COLUMNS)
    if start is not None:
        header, body = rows[start], rows[start + 1 :]
    elif fields is not None:
        header, body = list(fields), rows
    else:
        first = text.strip().splitlines()[0] if text.strip() else "no output"
        raise ParseError(f"no nvidia-smi CSV header in output: {first[:80]}")
    columns = [normalise_header(cell) for cell in header]
    fitting = [row for row in body if len(row) == len(columns)]
    if body and not fitting:
        raise ParseError(f"rows do not match the {len(columns)}-column header")
    return tuple(
        _gpu(dict(zip(columns, row, strict=True)), position) for position, row in enumerate(fitting)
    )


def _gpu(cells: Mapping[str, str], position: int) -> GpuSample:
    index = parse_cell(cells.get("index", ""))
    uuid = text_cell(cells.get("uuid", ""))
    name = text_cell(cells.get("name", ""))
    numbers: dict[str, Num] = {
        attr: parse_cell(cells[column]) if column in cells else NA("not queried")
        for column, attr in NUMERIC_COLUMNS.items()
    }
    mask_text = cells.get("clocks_event_reasons.active")
    counters = {
        attr: parse_cell(cells[column])
        for column, attr in COUNTER_COLUMNS.items()
        if column in cells
    }
    return GpuSample(
        index=int(index) if is_num(index) else position,
        uuid=uuid if isinstance(uuid, str) else "",
        name=name if isinstance(name, str) else "",
        pstate=text_cell(cells["pstate"]) if "pstate" in cells else NA("not queried"),
        clock_event_mask=parse_mask(mask_text) if mask_text is not None else NA("not queried"),
        counters=SlowdownCounters(**counters),
        **numbers,
    )


# -- per-process memory ------------------------------------------------------------------------

KNOWN_APP_COLUMNS = frozenset({"uuid", "pid", "used_memory", "process_name", "name"})


def parse_apps_csv(text: str, fields: Sequence[str] | None = None) -> dict[str, float]:
    """GPU UUID → Σ ``used_memory`` (MiB) from ``nvidia-smi --query-compute-apps=…``.

    With a header, columns are found by name (``gpu_uuid``, ``used_gpu_memory [MiB]``…);
    without one, by ``fields``, else the UUID is taken as the first column and the memory as
    the last. Elided UUIDs (``GPU-...``) are kept as they are. Processes whose memory is
    ``[N/A]`` are left out of the sum. No processes → ``{}``.
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
    totals: dict[str, float] = {}
    for row in body:
        if columns and len(row) != len(columns):
            continue
        used = parse_cell(row[memory_at])
        if is_num(used):
            uuid = row[uuid_at]
            totals[uuid] = totals.get(uuid, 0.0) + used
    return totals


def looks_like_csv(text: str) -> bool:
    """True when the text has a recognisable nvidia-smi CSV header, or is uniform CSV rows."""
    rows = csv_rows(text)
    if not rows:
        return False
    if find_header(rows, KNOWN_GPU_COLUMNS | KNOWN_APP_COLUMNS) is not None:
        return True
    return len(rows[0]) >= 2 and all(len(row) == len(rows[0]) for row in rows)
