"""Pure parsers for nvidia-smi CSV, ``/proc/meminfo`` and the batched probe's output.

Every cell goes through :func:`parse_cell`: ``[N/A]``, ``[Not Supported]``, ``N/A``, empty…
become :class:`~sparktop.model.NA` with the text kept, never 0. Columns are mapped by
header name (units stripped, old and new field names folded together), so the parsers work
with or without ``nounits`` and whichever spelling the driver printed. Nothing here does I/O.
"""

from __future__ import annotations

from sparktop.sources.nvsmi.cells import (
    ALIASES,
    ParseError,
    first_line,
    normalise_header,
    parse_cell,
    parse_mask,
)
from sparktop.sources.nvsmi.node import (
    classify_failure,
    is_unified,
    parse_meminfo,
    parse_probe_output,
    split_probe,
    unsupported_field,
)
from sparktop.sources.nvsmi.tables import (
    looks_like_csv,
    parse_apps_csv,
    parse_gpu_csv,
    sum_num,
    with_process_memory,
)

__all__ = [
    "ALIASES",
    "ParseError",
    "classify_failure",
    "first_line",
    "is_unified",
    "looks_like_csv",
    "normalise_header",
    "parse_apps_csv",
    "parse_cell",
    "parse_gpu_csv",
    "parse_mask",
    "parse_meminfo",
    "parse_probe_output",
    "split_probe",
    "sum_num",
    "unsupported_field",
    "with_process_memory",
]
