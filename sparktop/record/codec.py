"""Frozen-dataclass ⇄ JSON for recordings (samples, profiles), through pydantic.

``encode`` turns a dataclass into plain JSON values: :class:`~sparktop.model.NA` becomes
``{"na": reason}`` (its own pydantic schema), enums their value, tuples lists, mappings
objects, and fields equal to their default are left out (smaller files; decoding restores
them). ``decode(cls, data)`` rebuilds the dataclass with a pydantic ``TypeAdapter`` from its
type hints and raises :class:`CodecError` (with the path of the first bad field) on anything
that does not fit, unknown fields included, so a damaged record is never half-read.

One adapter per type, built once. Against the hand-written codec it replaced, a full
``NodeSample`` decodes about 10× and encodes about 5× faster (measured in one run, see
``docs/performance.md``).
"""

from __future__ import annotations

import dataclasses
import typing
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import ConfigDict, TypeAdapter, ValidationError

T = TypeVar("T")

JSON = Any
"""A JSON-compatible value (dict, list, str, int, float, bool, None)."""

_FORBID = ConfigDict(extra="forbid")


class CodecError(ValueError):
    """A JSON value that does not fit the type it is decoded as."""


def _forbid_unknown_fields(tp: Any, seen: set[Any]) -> None:
    """Every dataclass reachable from ``tp`` refuses fields it does not declare (pydantic
    ignores them by default; a recording's unknown field means damage or a newer format)."""
    if tp in seen:
        return
    seen.add(tp)
    for arg in typing.get_args(tp):
        _forbid_unknown_fields(arg, seen)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if "__pydantic_config__" not in tp.__dict__:
            tp.__pydantic_config__ = _FORBID  # type: ignore[attr-defined]
        for hint in typing.get_type_hints(tp, include_extras=True).values():
            _forbid_unknown_fields(hint, seen)


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(tp: Any) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(tp)
    if adapter is None:
        _forbid_unknown_fields(tp, set())
        adapter = _ADAPTERS[tp] = TypeAdapter(tp)
    return adapter


def _plain(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise TypeError(f"cannot record a {type(value).__name__}")


def encode(value: Any) -> JSON:
    """Plain JSON for a dataclass, NA, enum, tuple, mapping or scalar."""
    if isinstance(value, MappingProxyType):
        value = dict(value)
    return _adapter(type(value)).dump_python(
        value, mode="json", exclude_defaults=True, fallback=_plain, warnings=False
    )


def decode(tp: type[T], data: JSON) -> T:
    """Rebuild a value of type ``tp`` (usually a dataclass) from :func:`encode` output."""
    try:
        return typing.cast(T, _adapter(tp).validate_python(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in (tp.__name__, *first["loc"]))
        raise CodecError(f"{where}: {first['msg']}") from None
