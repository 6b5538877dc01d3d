"""The budget's numeric inputs, parsed and bounded the same way wherever they are typed
(``sparktop budget`` flags and the monitor's budget pane).

A count is a whole number, optionally with ``,`` or ``_`` thousands separators, from a minimum
(1, or 0 for output tokens) up to :data:`MAX_COUNT`. Anything else — ``-5``, ``1e9``, ``2.5``,
2^60 — is refused with one line naming the field, never taken as something else (a file name)
or carried into the arithmetic (past a trillion the estimate is floating-point noise).
"""

from __future__ import annotations

import re

from sparktop.errors import UserError

MAX_COUNT = 10**12
"""Largest token count, concurrency or limit the budget takes (a trillion: past any context)."""

_NUMBER_LIKE = re.compile(r"[+-]?(\d[\d,_]*)?(\.\d*)?([eE][+-]?\d+)?")
_WHOLE = re.compile(r"\+?\d{1,3}(,\d{3})+|\+?\d+(_\d+)*")


def check_count(name: str, value: int, low: int = 1) -> int:
    """``value`` when ``low <= value <= MAX_COUNT``; else :class:`UserError` naming ``name``
    (``--concurrency must be at least 1, got 0``)."""
    if value < low:
        raise UserError(f"{name} must be at least {low:,}, got {value:,}")
    if value > MAX_COUNT:
        raise UserError(f"{name} must be at most {MAX_COUNT:,}, got {value:,}")
    return value


def looks_like_number(text: str) -> bool:
    """True for text a person means as a number (``-5``, ``1e9``, ``2.5``, ``12,000``)."""
    text = text.strip()
    return any(ch.isdigit() for ch in text) and _NUMBER_LIKE.fullmatch(text) is not None


def parse_count(name: str, text: str, low: int = 1) -> int:
    """A typed count: digits with optional ``,``/``_`` separators, within ``low``..MAX_COUNT.

    Raises :class:`UserError` (``concurrency: expected a whole number, got '2.5'``, or the
    bounds message of :func:`check_count`).
    """
    cleaned = text.strip()
    negative = re.fullmatch(r"-\d[\d,_]*", cleaned)
    if negative:
        return check_count(name, -int(cleaned[1:].replace(",", "").replace("_", "")), low)
    if not _WHOLE.fullmatch(cleaned):
        raise UserError(f"{name}: expected a whole number, got {cleaned!r}")
    return check_count(name, int(cleaned.replace(",", "").replace("_", "")), low)
