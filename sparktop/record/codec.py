"""Generic frozen-dataclass ⇄ JSON conversion for recordings (samples, profiles, alerts).

``encode`` turns a dataclass into plain JSON values: :class:`~sparktop.model.NA` becomes
``{"na": reason}``, enums their value, tuples lists, mappings objects, and fields equal to
their default are left out (smaller files; decoding restores them). ``decode(cls, data)``
rebuilds the dataclass from its type hints and raises :class:`CodecError` on anything that
does not fit, so a damaged record is never half-read.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from sparktop.model import NA

T = TypeVar("T")

JSON = Any
"""A JSON-compatible value (dict, list, str, int, float, bool, None)."""


class CodecError(ValueError):
    """A JSON value that does not fit the type it is decoded as."""


def encode(value: Any) -> JSON:
    """Plain JSON for a dataclass, NA, enum, tuple, mapping or scalar."""
    if isinstance(value, NA):
        return {"na": value.reason}
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, JSON] = {}
        for f, default in _defaults(type(value)):
            item = getattr(value, f.name)
            if default is not _NO_DEFAULT and _same(item, default):
                continue
            out[f.name] = encode(item)
        return out
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    return value


_NO_DEFAULT = object()


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an exotic __eq__ must not break recording
        return False


@functools.cache
def _defaults(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any], ...]:
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = _NO_DEFAULT
        out.append((f, default))
    return tuple(out)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def decode(tp: type[T], data: JSON) -> T:
    """Rebuild a value of type ``tp`` (usually a dataclass) from :func:`encode` output."""
    try:
        return typing.cast(T, _decode(tp, data, tp.__name__))
    except CodecError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise CodecError(f"{tp.__name__}: {exc}") from None


def _decode(tp: Any, data: JSON, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _decode_union(typing.get_args(tp), data, where)
    if tp is Any:
        return data
    if tp is NA:
        if isinstance(data, dict) and set(data) == {"na"} and isinstance(data["na"], str):
            return NA(data["na"])
        raise CodecError(f"{where}: expected {{'na': reason}}, got {data!r:.60}")
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(data, list):
            raise CodecError(f"{where}: expected a list, got {type(data).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
        if len(args) != len(data):
            raise CodecError(f"{where}: expected {len(args)} items, got {len(data)}")
        return tuple(
            _decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, data, strict=True))
        )
    if origin in (Mapping, dict, typing.Mapping) or tp in (Mapping, dict):
        if not isinstance(data, dict):
            raise CodecError(f"{where}: expected an object, got {type(data).__name__}")
        args = typing.get_args(tp) or (str, Any)
        items = {str(k): _decode(args[1], v, f"{where}.{k}") for k, v in data.items()}
        return items if origin is dict or tp is dict else types.MappingProxyType(items)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise CodecError(f"{where}: {data!r:.40} is not a {tp.__name__}") from None
    return _decode_scalar(tp, data, where)


def _decode_scalar(tp: Any, data: JSON, where: str) -> Any:
    if tp is type(None):
        if data is None:
            return None
    elif tp is bool:
        if isinstance(data, bool):
            return data
    elif tp is float:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data)
    elif tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif tp is str:
        if isinstance(data, str):
            return data
    else:
        raise CodecError(f"{where}: cannot decode type {tp!r}")
    raise CodecError(f"{where}: expected {getattr(tp, '__name__', tp)}, got {data!r:.40}")


def _decode_union(args: tuple[Any, ...], data: JSON, where: str) -> Any:
    # Try the most specific member first: NA, then dataclasses, then scalars.
    ordered = sorted(args, key=lambda a: 0 if a is NA else 1 if dataclasses.is_dataclass(a) else 2)
    for member in ordered:
        try:
            return _decode(member, data, where)
        except CodecError:
            continue
    names = " | ".join(getattr(a, "__name__", str(a)) for a in args)
    raise CodecError(f"{where}: {data!r:.40} fits none of {names}")


def _decode_dataclass(cls: type, data: JSON, where: str) -> Any:
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - known
    if unknown:
        raise CodecError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    kwargs = {name: _decode(hints[name], value, f"{where}.{name}") for name, value in data.items()}
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise CodecError(f"{where}: {exc}") from None
