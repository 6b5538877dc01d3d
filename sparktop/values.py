"""Readings that may be missing: :class:`NA` keeps the reason, never a silent 0; and the
read-only maps samples carry.

Shared by every sample type (:mod:`sparktop.model`, :mod:`sparktop.hostmodel`), which
re-export these names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, TypeGuard

if TYPE_CHECKING:
    from pydantic_core import core_schema


@dataclass(frozen=True, slots=True)
class NA:
    """A value that is not available, with the reason as the source gave it.

    ``NA`` is falsy, formats as ``n/a`` and sorts before every number (see :func:`sort_key`).
    """

    reason: str = "not available"

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return "n/a"

    def __format__(self, spec: str) -> str:
        return "n/a"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> core_schema.CoreSchema:
        """Recordings write NA as ``{"na": reason}`` (:mod:`sparktop.record.codec`)."""
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            _na_from_json,
            serialization=core_schema.plain_serializer_function_ser_schema(_na_to_json),
        )


def _na_from_json(value: object) -> NA:
    if isinstance(value, NA):
        return value
    if isinstance(value, dict) and set(value) == {"na"} and isinstance(value["na"], str):
        return NA(value["na"])
    raise ValueError("expected {'na': reason}")


def _na_to_json(value: NA) -> dict[str, str]:
    return {"na": value.reason}


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


class _ReadOnlyMap:
    """pydantic metadata of :data:`FloatMap` and :data:`TextMap`: a record decodes the map
    read-only again and writes it as a JSON object (``AfterValidator`` and ``PlainSerializer``
    spelt out, so that importing this module, which every sample type does, does not import
    pydantic: ``sparktop budget`` never needs it)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        from pydantic_core import core_schema

        schema = core_schema.no_info_after_validator_function(_frozen, handler(source))
        schema["serialization"] = core_schema.plain_serializer_function_ser_schema(
            dict, return_schema=handler.generate_schema(dict)
        )
        return schema


FloatMap: TypeAlias = Annotated[Mapping[str, float], _ReadOnlyMap()]
"""A read-only ``name → float`` field (a record decodes it read-only again, and writes it
as a JSON object)."""
TextMap: TypeAlias = Annotated[Mapping[str, str], _ReadOnlyMap()]
"""A read-only ``name → str`` field, like :data:`FloatMap`."""


Num: TypeAlias = float | NA
"""A float reading, or :class:`NA` with the reason it is missing."""


def is_num(value: object) -> TypeGuard[float]:
    """True for a finite ``int``/``float`` (``bool`` excluded); False for ``NA``, NaN, ±Inf."""
    kind = type(value)
    # Exact types first: called ~100k times a UI tick on a large cluster.
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is int:
        return True
    if kind is bool or kind is NA:
        return False
    return isinstance(value, int | float) and math.isfinite(float(value))


def num_or(value: Num | None, default: float) -> float:
    """The float inside ``value``, or ``default`` when it is missing."""
    return float(value) if is_num(value) else default


def sort_key(value: object) -> tuple[int, float]:
    """A key that sorts missing values first and numbers by value."""
    return (1, float(value)) if is_num(value) else (0, 0.0)


HUGE = 1e12
"""From this magnitude a figure prints as ``1.23e+15``: a hostile exporter's ``1e300`` made
300-digit cells (no reading sparktop shows is this large)."""


def bounded(value: float, spec: str) -> str:
    """``format(value, spec)``, or ``%.3g`` for a magnitude of :data:`HUGE` or more."""
    return format(value, ".3g") if abs(value) >= HUGE else format(value, spec)


def fmt_num(value: Num | None, spec: str = ",.0f", unit: str = "") -> str:
    """Format a reading with a format spec and optional unit suffix; ``n/a`` when missing;
    a huge magnitude in scientific notation (:func:`bounded`)."""
    if not is_num(value):
        return "n/a"
    text = bounded(value, spec)
    return f"{text} {unit}" if unit else text


MIB_PER_GIB = 1024.0


def gib_text(mib: Num | None) -> str:
    """MiB as GiB without the unit, as every output writes memory: ``1.4`` under 10 GiB,
    ``92`` from 10 (``n/a`` when unknown). The snapshot's table and the monitor's cells and
    details use it."""
    if not is_num(mib):
        return "n/a"
    gib = float(mib) / MIB_PER_GIB
    return bounded(gib, ".0f") if gib >= 10 else bounded(gib, ".1f")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 file``, ``2 files``, ``1,024 files``: a count with its noun agreeing (``plural``
    for nouns that do not take an ``s``)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def minutes_text(seconds: float) -> str:
    """``6 min 20 s``, ``5 min``, ``45 s``: a length in whole seconds, for help texts."""
    total = round(seconds)
    minutes, rest = divmod(total, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"
