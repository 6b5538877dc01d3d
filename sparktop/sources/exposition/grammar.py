"""The tokens of the Prometheus text format (0.0.4) as sparktop's readers match them.

:mod:`sparktop.sources.exposition.text` (every line it takes) and
:mod:`sparktop.sources.exposition.runs` (runs of plain lines) build their patterns from these,
so a plain line is a line the line reader takes, token for token. Each is a strict subset of
what prometheus_client accepts.
"""

from __future__ import annotations

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
"""A legacy metric name."""
LABEL_NAME = r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*"
"""A label name; ``__…`` is reserved (the library refuses it)."""
VALUE = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN"
"""A sample value: a decimal number (the grammar ``float()`` reads over these characters),
``±Inf`` or ``NaN``."""
LABEL_VALUE = r'"[^"\\]*(?:\\.[^"\\]*)*"'
"""A label value in its quotes, with its escapes (``\\\\``, ``\\n``, ``\\"``)."""
