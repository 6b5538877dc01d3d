"""YAML → plain data plus the line/column of every key and value, for error messages.

PyYAML's ``compose`` keeps a start mark on every node; walking the node tree ourselves
lets a pydantic error location (``('nodes', 1, 'host')``) be turned into ``file:line:col``.
The walk also rejects duplicate keys, which ``yaml.safe_load`` silently merges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Loc = tuple[str | int, ...]
"""A path into the document: mapping keys and sequence indices."""

MAX_DEPTH = 32
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the document: where (1-based line/column) and what."""

    line: int
    column: int
    path: str
    message: str


@dataclass(slots=True)
class Marks:
    """Where each path starts: ``key`` for mapping keys, ``value`` for values and items."""

    key: dict[Loc, yaml.Mark] = field(default_factory=dict)
    value: dict[Loc, yaml.Mark] = field(default_factory=dict)

    def nearest(self, loc: Loc) -> tuple[Loc, yaml.Mark | None]:
        """The longest prefix of ``loc`` present in the document, and its value mark."""
        for end in range(len(loc), -1, -1):
            prefix = loc[:end]
            if prefix in self.value:
                return prefix, self.value[prefix]
        return (), None


def loc_to_path(loc: Loc) -> str:
    """``('nodes', 1, 'host')`` → ``nodes[1].host``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class YamlSyntaxError(Exception):
    """The text is not valid YAML; ``problem`` says where and why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _syntax_problem(exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = str(getattr(exc, "problem", None) or exc).replace(
        "character '\\t'", "a tab character"
    )
    context = getattr(exc, "context", None)
    message = f"YAML error: {problem}"
    if context:
        message += f" ({context})"
    if "a tab" in problem:
        message += "; indent with spaces, not tabs"
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return Problem(line, column, "", " ".join(message.split()))


def compose(text: str) -> tuple[Any, Marks, list[Problem]]:
    """Parse one YAML document into dicts/lists/scalars with marks for every path.

    Returns ``(data, marks, problems)`` where problems are duplicate or non-string keys.
    Raises :class:`YamlSyntaxError` for text that is not YAML (tabs, unclosed brackets…).
    """
    marks = Marks()
    problems: list[Problem] = []
    try:
        loader = yaml.SafeLoader(text)  # checks for unprintable characters already
        try:
            root = loader.get_single_node()
            data = None if root is None else _build(loader, root, (), marks, problems, 0)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(_syntax_problem(exc)) from None
    except RecursionError:
        raise YamlSyntaxError(Problem(1, 1, "", "YAML error: nesting too deep")) from None
    return data, marks, problems


def _at(mark: yaml.Mark, loc: Loc, message: str) -> Problem:
    return Problem(mark.line + 1, mark.column + 1, loc_to_path(loc), message)


def _build(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    loc: Loc,
    marks: Marks,
    problems: list[Problem],
    depth: int,
) -> Any:
    marks.value.setdefault(loc, node.start_mark)
    if depth > MAX_DEPTH:
        problems.append(_at(node.start_mark, loc[:2], "nesting too deep"))
        return None
    if isinstance(node, yaml.SequenceNode):
        return [
            _build(loader, item, (*loc, i), marks, problems, depth + 1)
            for i, item in enumerate(node.value)
        ]
    if not isinstance(node, yaml.MappingNode):
        return loader.construct_object(node, deep=True)
    first_seen: dict[object, yaml.Mark] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = key_node.value
        if key in first_seen:
            problems.append(
                _at(
                    key_node.start_mark,
                    loc,
                    f"duplicate key {key!r} (first at line {first_seen[key].line + 1})",
                )
            )
        first_seen.setdefault(key, key_node.start_mark)
    loader.flatten_mapping(node)  # resolves '<<' merge keys; later keys win
    result: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            problems.append(
                _at(key_node.start_mark, loc, f"key {key!r} must be a string (quote it)")
            )
            continue
        marks.key[(*loc, key)] = key_node.start_mark
        marks.value.pop((*loc, key), None)  # a merged-over key points at the overriding one
        result[key] = _build(loader, value_node, (*loc, key), marks, problems, depth + 1)
    return result
