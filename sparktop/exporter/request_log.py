"""The exporter's log of requests aiohttp could not serve: one short line each, rate-limited.

aiohttp logs a bad request (an over-long header, a garbled request line, TLS spoken to the
plain port) with its whole traceback, so anyone who can reach the port could flood the
exporter's stderr. :func:`request_logger` is handed to aiohttp's ``AppRunner(logger=…)``:
each record becomes ``sparktop exporter: bad request from 1.2.3.4: LineTooLong (400: Got
more than 8190 bytes…)``, at most one line every :data:`EVERY_S` seconds, the next line
saying how many were not shown. Debug records (aiohttp's own noise level) are dropped.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TextIO

from sparktop.safe_text import printable

EVERY_S = 10.0
"""At most one line per this many seconds; the rest are counted, not printed."""
MAX_DETAIL = 120
"""Characters of the exception's message kept (a LineTooLong quotes the line it refused)."""


class OneLine(logging.Handler):
    """Writes each record as one short printable line to ``stream`` (stderr when None),
    at most one per ``every_s``; ``clock`` is ``time.monotonic`` unless given."""

    def __init__(
        self,
        stream: TextIO | None = None,
        every_s: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(logging.INFO)
        self.stream = stream
        self.every_s = every_s
        self.clock = clock
        self._last: float | None = None
        self.suppressed = 0

    def emit(self, record: logging.LogRecord) -> None:
        now = self.clock()
        if self._last is not None and now - self._last < self.every_s:
            self.suppressed += 1
            return
        self._last = now
        line = f"sparktop exporter: {one_line(record)}"
        if self.suppressed:
            line += f" ({self.suppressed:,} more since the last line)"
            self.suppressed = 0
        stream = self.stream or sys.stderr
        try:
            stream.write(line + "\n")
            stream.flush()
        except (OSError, ValueError):  # stderr closed: nothing to tell
            pass


def one_line(record: logging.LogRecord) -> str:
    """``bad request from 127.0.0.1: LineTooLong (400, message: Got more…)``."""
    try:
        text = record.getMessage()
    except (TypeError, ValueError):
        text = str(record.msg)
    text = text.replace("Error handling request from", "bad request from")
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        detail = " ".join(str(exc).split())
        if len(detail) > MAX_DETAIL:
            detail = detail[:MAX_DETAIL] + "…"
        text += f": {type(exc).__name__}" + (f" ({detail})" if detail else "")
    return printable(text)


def request_logger(handler: logging.Handler | None = None) -> logging.Logger:
    """The logger aiohttp's request handlers write to, each record through
    :class:`OneLine` (or ``handler``), never to the root logger."""
    logger = logging.getLogger("sparktop.exporter.requests")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler or OneLine())
    return logger
