"""The budget's numeric inputs, parsed and bounded the same way wherever they are typed
(``sparktop budget`` flags and the monitor's budget pane).

A count is a whole number, optionally with ``,`` or ``_`` thousands separators, from a minimum
(1, or 0 for output tokens) up to :data:`MAX_COUNT`; a prompt count may also carry a size
suffix as ``sparktop sweep --prompts`` takes it: ``128k`` (×1,024), ``1m`` (×1,048,576).
Anything else — ``-5``, ``1e9``, ``2.5``, 2^60 — is refused with one line naming the field,
never taken as something else (a file name) or carried into the arithmetic (past a trillion
the estimate is floating-point noise).
"""

from __future__ import annotations

import re

from sparktop.errors import UserError

MAX_COUNT = 10**12
"""Largest token count, concurrency or limit the budget takes (a trillion: past any context)."""

_NUMBER_LIKE = re.compile(r"[+-]?(\d[\d,_]*)?(\.\d*)?([eE][+-]?\d+)?")
_WHOLE = re.compile(r"\+?\d{1,3}(,\d{3})+|\+?\d+(_\d+)*")
_SIZED = re.compile(r"\+?(\d+(?:\.\d+)?)([kKmM])")
_SIZE_FACTOR = {"k": 1024, "m": 1 << 20}


def parse_size(text: str) -> int | None:
    """``128k`` → 131,072, ``1.5k`` → 1,536, ``1m`` → 1,048,576 (as ``sweep --prompts``
    reads them); None when ``text`` has no size suffix. Raises :class:`UserError` for a size
    that is not a whole number of tokens (``1.0001k``)."""
    match = _SIZED.fullmatch(text.strip())
    if match is None:
        return None
    value = float(match[1]) * _SIZE_FACTOR[match[2].lower()]
    if not value.is_integer():
        raise UserError(f"{text.strip()!r} is not a whole number of tokens")
    return int(value)


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
    if _SIZED.fullmatch(text):
        return True
    return any(ch.isdigit() for ch in text) and _NUMBER_LIKE.fullmatch(text) is not None


def parse_count(name: str, text: str, low: int = 1, *, sizes: bool = False) -> int:
    """A typed count: digits with optional ``,``/``_`` separators, within ``low``..MAX_COUNT;
    with ``sizes`` also ``128k``/``1m`` (:func:`parse_size`, for prompt tokens).

    Raises :class:`UserError` (``concurrency: expected a whole number, got '2.5'``, or the
    bounds message of :func:`check_count`).
    """
    cleaned = text.strip()
    sized = parse_size(cleaned) if sizes else None
    if sized is not None:
        return check_count(name, sized, low)
    negative = re.fullmatch(r"-\d[\d,_]*", cleaned)
    if negative:
        return check_count(name, -int(cleaned[1:].replace(",", "").replace("_", "")), low)
    if not _WHOLE.fullmatch(cleaned):
        raise UserError(f"{name}: expected a whole number, got {cleaned!r}")
    return check_count(name, int(cleaned.replace(",", "").replace("_", "")), low)
