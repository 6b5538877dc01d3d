"""Figures read from benchmark result files: positive, finite, bounded; what a refused
document looks like, for the one-line refusal; and the :class:`ImportedRow` every importer
produces. Shared by the importers (:mod:`sparktop.sweep.profiles.import_formats`,
:mod:`sparktop.sweep.profiles.import_aiperf`), their checks and the profile writer."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from sparktop.errors import UserError
from sparktop.safe_text import printable

MAX_FIGURE = 1e15
"""Larger than any count, rate, duration or Unix time a benchmark writes: past it a figure is
refused (JSON allows a 4,000-digit integer, and ``Infinity``/``NaN`` from Python writers)."""
MAX_CONCURRENCY = 1_000_000


@dataclass(frozen=True, slots=True)
class ImportedRow:
    """One cell read from a result file. ``where`` names the file (and line or entry);
    ``approximate`` says why the concurrency is measured rather than set (empty if set)."""

    where: str
    tool: str
    aggregate_kind: str
    prompt_tokens: int
    concurrency: int
    ttft_s: float
    decode_tps: float
    aggregate_tps: float
    wall_s: float
    observations: int
    output_tokens: int
    model: str = ""
    approximate: str = ""

    @property
    def prefill_tps(self) -> float:
        return self.prompt_tokens / self.ttft_s


def num(value: Any) -> float | None:
    """``value`` as a float when it is a finite positive number up to :data:`MAX_FIGURE`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not 0 < value <= MAX_FIGURE:  # NaN fails it; an int of any size compares exactly
        return None
    return float(value)


def what(value: Any) -> str:
    """A refused figure in a few words: ``Infinity``, ``a 4,001-digit integer``, ``-3``."""
    if isinstance(value, float) and not math.isfinite(value):
        return {math.inf: "Infinity", -math.inf: "-Infinity"}.get(value, "NaN")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_FIGURE:
        return f"a {len(str(abs(value))):,}-digit integer"
    return printable(json.dumps(value))[:40] if value is not None else "missing"


def need(doc: dict[str, Any], key: str, where: str) -> float:
    value = num(doc.get(key))
    if value is None:
        raise UserError(
            f"{where}: '{key}' is {what(doc.get(key))}, not a finite positive number "
            f"(up to {MAX_FIGURE:.0e})"
        )
    return value


def mean(metric: Any) -> float | None:
    return num(metric.get("mean")) if isinstance(metric, dict) else None


def keys(doc: dict[str, Any], limit: int = 6) -> str:
    names = [printable(str(k))[:40] for k in list(doc)[:limit]]
    more = ", …" if len(doc) > limit else ""
    return ", ".join(names) + more


def describe(doc: Any) -> str:
    """What a JSON document looks like, in a few words (for the refusal)."""
    if isinstance(doc, dict):
        return f"a JSON object with keys {keys(doc)}" if doc else "an empty JSON object"
    if isinstance(doc, list):
        objects = [d for d in doc if isinstance(d, dict)]
        if objects and len(objects) == len(doc):
            return f"a JSON list of {len(doc)} objects with keys {keys(objects[0])}"
        return f"a JSON list of {len(doc)} values"
    return f"a JSON {type(doc).__name__.replace('str', 'string').replace('NoneType', 'null')}"
