"""Load ``cluster.yaml`` into an :class:`Inventory`, or fail with one clear line.

Every failure is a :class:`~sparktop.errors.UserError` whose message starts with
``file:line:col:`` and names the key path, e.g.
``cluster.yaml:6:5: nodes[1]: unknown key 'hots' (did you mean 'host'?); line 5:
nodes[1].host: field required (or set 'local: true')``.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from sparktop.errors import UserError
from sparktop.inputfile import read_limited
from sparktop.inventory.binding_ids import BINDING_IDS
from sparktop.inventory.key_names import keys_problem
from sparktop.inventory.models import EngineConfig, Inventory
from sparktop.inventory.names import clip
from sparktop.inventory.profile_ref import resolve_profile
from sparktop.safe_text import printable, without_credentials
from sparktop.yamltree import (
    Loc,
    Marks,
    Problem,
    YamlSyntaxError,
    compose,
    content_kind,
    loc_to_path,
    looks_like,
)

MAX_BYTES = 1 << 20
MAX_SHOWN = 5
_LOADER_ONLY = frozenset({"source_path", "profile_at"})
"""Model fields the loader sets itself; they are not YAML keys."""
_YAML_KEYS = tuple(k for k in Inventory.model_fields if k not in _LOADER_ONLY)


def load_inventory(path: Path) -> Inventory:
    """Read and validate an inventory file.

    Raises :class:`UserError` (exit 2) for an unreadable file, invalid YAML or any
    validation problem; the message is one line naming the file, line, column and key path.
    """
    label = _one_line(str(path))
    try:
        # Bounded read: `--inventory /dev/zero` (or a huge file) must not eat memory; a
        # FIFO nobody writes to fails after a moment instead of blocking the open forever.
        raw = read_limited(Path(path).expanduser(), MAX_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{label}: is a directory, expected a YAML file") from None
    except PermissionError:
        raise UserError(f"{label}: permission denied") from None
    except OSError as exc:
        raise UserError(f"{label}: cannot read: {exc.strerror or exc}") from None
    except RuntimeError:  # expanduser: "~nosuchuser/…"
        raise UserError(f"{label}: cannot expand '~' (no such user or no home directory)") from None
    if len(raw) > MAX_BYTES:
        raise UserError(f"{label}: too large for an inventory (over {MAX_BYTES:,} bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{label}: not UTF-8 text (byte {exc.start})") from None
    base_dir = Path(path).expanduser().absolute().parent
    inventory = parse_inventory(text, label, base_dir=base_dir)
    return inventory.model_copy(update={"source_path": Path(path)})


def parse_inventory(text: str, source: str, *, base_dir: Path | None = None) -> Inventory:
    """Validate inventory YAML text; ``source`` names it in messages (usually the file).

    ``profile:`` must name a known profile or an existing file (see
    :mod:`sparktop.inventory.profile_ref`; the plan loads it, and names this file and line
    when it does not load); a profile path is read relative to ``base_dir`` (None: the
    working directory) and kept absolute in the returned inventory.
    """
    try:
        data, marks, problems = compose(text)
    except YamlSyntaxError as exc:
        raise UserError(_format(source, [exc.problem])) from None
    if not isinstance(data, dict):
        if problems:
            raise UserError(_format(source, problems))
        if data is None:
            raise UserError(
                f"{_one_line(source)}:1:1: the inventory is empty (expected nodes: and engines:)"
            )
        raise UserError(
            f"{_one_line(source)}:1:1: the inventory must be a mapping of keys "
            f"(cluster:, nodes:, …), got {content_kind(data)}"
        )
    if data and not looks_like(data, _YAML_KEYS):
        # Not an inventory at all (a path typed wrong): its keys are its contents, and a file
        # of secrets must not be quoted back key by key.
        raise UserError(
            f"{_one_line(source)}:1:1: not a sparktop inventory (its {len(data)} top-level "
            f"keys are not inventory keys: {', '.join(_YAML_KEYS)})"
        )
    for key in _LOADER_ONLY & data.keys():
        problems.append(_unknown_key(key, (), marks, Inventory))
        del data[key]
    engines = data.get("engines")
    for i, entry in enumerate(engines if isinstance(engines, list) else ()):
        if isinstance(entry, dict) and "profile_at" in entry:
            problems.append(_unknown_key("profile_at", ("engines", i), marks, EngineConfig))
            del entry["profile_at"]
    problems += _unknown_binding_ids(data.get("keys"), marks)
    problems += _bad_key_strings(data.get("keys"), marks)
    try:
        inventory = Inventory.model_validate(data)
    except ValidationError as exc:
        errors = [e for e in exc.errors(include_url=False) if not _reported(e["loc"], marks)]
        found = [_problem(error, marks) for error in errors]
    else:
        if not problems:
            return _with_profile(inventory, source, marks, base_dir)
        found = []
    # YAML-level problems and unknown keys first: a typo usually explains the "field
    # required" that follows it.
    early = problems + [p for p in found if p.message.startswith("unknown key")]
    late = [p for p in found if not p.message.startswith("unknown key")]
    raise UserError(_format(source, _by_position(early) + _by_position(late)))


def _unknown_binding_ids(keys: object, marks: Marks) -> list[Problem]:
    """One problem per id under ``keys:`` that no key of the monitor has, at its line, with
    the nearest known id (a mapping of anything else is the model's to refuse)."""
    if not isinstance(keys, dict):
        return []
    found = []
    for key in keys:
        if not isinstance(key, str) or key in BINDING_IDS:
            continue
        mark = marks.key.get(("keys", key)) or marks.nearest(("keys",))[1]
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        close = difflib.get_close_matches(key, sorted(BINDING_IDS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else "the monitor's ? screen lists the ids"
        found.append(Problem(line, column, "keys", f"unknown binding id '{clip(key)}' ({hint})"))
    return found


def _bad_key_strings(keys: object, marks: Marks) -> list[Problem]:
    """One problem per ``keys:`` value that is no key Textual delivers (``ctrl+zz``), at its
    line: Textual binds any string, so such a remap would leave the action on no key."""
    if not isinstance(keys, dict):
        return []
    found = []
    for binding_id, value in keys.items():
        problem = keys_problem(value) if isinstance(value, str) else None
        if problem and isinstance(binding_id, str):
            mark = marks.value.get(("keys", binding_id)) or marks.nearest(("keys",))[1]
            line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            found.append(Problem(line, column, f"keys.{clip(binding_id)}", problem))
    return found


def _with_profile(
    inventory: Inventory, source: str, marks: Marks, base_dir: Path | None
) -> Inventory:
    """The inventory with its ``profile:`` keys (top-level and each engine's) checked, a path
    made absolute and each key's place kept (``profile_at``)."""
    found: list[Problem] = []

    def resolve(name: str, loc: Loc) -> tuple[str, str]:
        mark = marks.value.get(loc)
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        try:
            resolved = resolve_profile(name, base_dir)
        except UserError as exc:
            found.append(Problem(line, column, loc_to_path(loc), str(exc)))
            resolved = name
        return resolved, _one_line(f"{source}:{line}:{column}")

    update: dict[str, Any] = {}
    if inventory.profile is not None:
        update["profile"], update["profile_at"] = resolve(inventory.profile, ("profile",))
    engines = list(inventory.engines)
    for i, engine in enumerate(engines):
        if engine.profile is not None:
            profile, at = resolve(engine.profile, ("engines", i, "profile"))
            engines[i] = engine.model_copy(update={"profile": profile, "profile_at": at})
    if found:
        raise UserError(_format(source, _by_position(found)))
    return inventory.model_copy(update={**update, "engines": tuple(engines)})


def _reported(loc: tuple[str | int, ...], marks: Marks) -> bool:
    """True when the YAML walk already reported this value (no second error about it)."""
    return any(loc[: len(prefix)] == prefix for prefix in marks.reported)


def _by_position(problems: list[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.line, p.column))


def _format(source: str, problems: list[Problem]) -> str:
    """One line: the first problem's position, then up to ``MAX_SHOWN`` problems in order."""
    first = problems[0]
    parts = []
    for problem in problems[:MAX_SHOWN]:
        text = f"{problem.path}: {problem.message}" if problem.path else problem.message
        if problem is not first and problem.line != first.line:
            text = f"line {problem.line}: {text}"
        parts.append(text)
    if len(problems) > MAX_SHOWN:
        parts.append(f"and {len(problems) - MAX_SHOWN} more")
    return _one_line(f"{source}:{first.line}:{first.column}: " + "; ".join(parts))


def _one_line(text: str) -> str:
    """User-supplied text as one line that cannot break the terminal: control, bidi and
    zero-width characters shown as symbols (ESC → ``␛``, LF → ``␊``), as every output does."""
    return printable(text)


_EXPECTED = {
    "model_type": "a mapping of keys",
    "dict_type": "a mapping of keys",
    "tuple_type": "a list",
    "list_type": "a list",
    "string_type": "text",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "path_type": "a file path",
}
"""pydantic error type → what the operator should have written (instead of pydantic's words)."""


def _problem(error: ErrorDetails, marks: Marks) -> Problem:
    loc: Loc = tuple(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden" and loc:
        return _unknown_key(loc[-1], loc[:-1], marks, _model_at(loc[:-1]))
    prefix, mark = marks.nearest(loc)
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    if kind == "missing":
        return Problem(line, column, loc_to_path(loc), _lower_first(error["msg"]))
    shown = error.get("input")
    if isinstance(shown, str) and "://" in shown:
        shown = without_credentials(shown)  # a URL's password or ?token= never reaches a message
    if kind in _EXPECTED:
        message = f"expected {_EXPECTED[kind]}{_keys_hint(kind, loc)}, got {_describe(shown)}"
        return Problem(line, column, loc_to_path(prefix), message)
    message = _lower_first(error["msg"].removeprefix("Value error, "))
    if isinstance(shown, str | int | float | bool):
        quoted = clip(shown) if isinstance(shown, str) else _describe(shown)
        if quoted not in message:
            message += f" (got {_describe(shown)})"
    return Problem(line, column, loc_to_path(prefix), message)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _keys_hint(kind: str, loc: Loc) -> str:
    model = _model_at(loc) if kind == "model_type" else None
    if model is None:
        return ""
    names = [name for name in model.model_fields if name not in _LOADER_ONLY][:3]
    return " (" + ", ".join(f"{name}:" for name in names) + ", …)"


def _describe(value: object) -> str:
    """How a YAML value reads to its author: ``a list``, ``'text'``, ``12``, ``true``."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{clip(value)}'"  # quoted as written; control characters shown as symbols
    return clip(repr(value) if isinstance(value, int | float) else str(value))


def _unknown_key(
    key: str | int, parent: Loc, marks: Marks, model: type[BaseModel] | None
) -> Problem:
    mark = marks.key.get((*parent, key)) or marks.nearest(parent)[1]
    line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    message = f"unknown key '{key}'"
    if model is not None:
        allowed = [name for name in model.model_fields if name not in _LOADER_ONLY]
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
        message += (
            f" (did you mean {close[0]!r}?)"
            if close
            else f" (expected one of: {', '.join(allowed)})"
        )
    return Problem(line, column, loc_to_path(parent), message)


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (to list its valid keys)."""
    current: Any = Inventory
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, str) and _is_model(current):
            field = current.model_fields.get(part)
            if field is None:
                return None
            current = field.annotation
        elif isinstance(part, int) and typing.get_origin(current) is tuple:
            current = typing.get_args(current)[0]
        else:
            return None
    current = _unwrap(current)
    return current if _is_model(current) else None


def _unwrap(annotation: Any) -> Any:
    """``X | None`` → ``X``; ``Annotated[X, …]`` → ``X``."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _unwrap(args[0])
    return annotation


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)
