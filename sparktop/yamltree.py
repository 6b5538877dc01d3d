"""YAML → plain data plus the line/column of every key and value, for error messages.

The one YAML loader for files an operator hands sparktop (inventories and sweep profiles), so
both get the same guards: a value budget against alias bombs, a depth limit, no custom tags.

PyYAML's ``compose`` keeps a start mark on every node; walking the node tree ourselves
lets a pydantic error location (``('nodes', 1, 'host')``) be turned into ``file:line:col``.
The walk also rejects duplicate keys, which ``yaml.safe_load`` silently merges.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

Loc = tuple[str | int, ...]
"""A path into the document: mapping keys and sequence indices."""

MAX_DEPTH = 32
MAX_VALUES = 50_000
"""Values built at most: aliases can make a small file expand exponentially ("billion
laughs"); a real inventory or profile has a few thousand."""
_STANDARD_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = _STANDARD_TAG + "merge"
_COLLECTION_TAGS = frozenset({_STANDARD_TAG + "seq", _STANDARD_TAG + "map"})
_REPORTED = object()
"""A value already reported as a problem: its key is left out so no second error follows."""


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
    reported: set[Loc] = field(default_factory=set)
    """Paths whose value was already reported as a problem and left out of the data."""

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


class _TooMany(Exception):
    pass


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


class _TooDeep(Exception):
    def __init__(self, mark: Any) -> None:
        super().__init__("nesting too deep")
        self.line: int = mark.line + 1 if mark else 1
        self.column: int = mark.column + 1 if mark else 1


class _Loader(yaml.SafeLoader):
    """SafeLoader whose composer stops at ``MAX_DEPTH`` levels of nesting.

    PyYAML composes recursively and its scanner slows with every open flow level, so 5,000
    nested ``[`` would take seconds and end in a ``RecursionError``; stopping at the limit
    reads no further than the first too-deep node.
    """

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self._depth > MAX_DEPTH and not self.check_event(yaml.AliasEvent):
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
            raise _TooDeep(event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def compose(text: str, what: str = "an inventory") -> tuple[Any, Marks, list[Problem]]:
    """Parse one YAML document into dicts/lists/scalars with marks for every path.

    Returns ``(data, marks, problems)`` where problems are duplicate or non-string keys.
    Raises :class:`YamlSyntaxError` for text that is not YAML (tabs, unclosed brackets…),
    nesting deeper than ``MAX_DEPTH`` or more than ``MAX_VALUES`` values; ``what`` names the
    kind of file in the size message ("an inventory", "a profile").
    """
    try:
        loader = _Loader(text)  # checks for unprintable characters already
        try:
            root = loader.get_single_node()
            builder = _Builder(loader)
            data = None if root is None else builder.build(root, (), 0)
            data = None if data is _REPORTED else data
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(_syntax_problem(exc)) from None
    except _TooDeep as exc:
        message = f"nesting too deep (more than {MAX_DEPTH} levels of lists or mappings)"
        raise YamlSyntaxError(Problem(exc.line, exc.column, "", message)) from None
    except _TooMany:
        message = (
            f"more than {MAX_VALUES:,} values: too large for {what} "
            "(or YAML aliases '*' expand too far)"
        )
        raise YamlSyntaxError(Problem(1, 1, "", message)) from None
    return data, builder.marks, builder.problems


def _at(mark: yaml.Mark, loc: Loc, message: str) -> Problem:
    return Problem(mark.line + 1, mark.column + 1, loc_to_path(loc), message)


@dataclass(slots=True)
class _Builder:
    """Walks the node tree once, recording marks and problems, within a value budget."""

    loader: yaml.SafeLoader
    marks: Marks = field(default_factory=Marks)
    problems: list[Problem] = field(default_factory=list)
    budget: int = MAX_VALUES

    def build(self, node: yaml.Node, loc: Loc, depth: int) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _TooMany
        self.marks.value.setdefault(loc, node.start_mark)
        if depth > MAX_DEPTH:
            self.problems.append(_at(node.start_mark, loc[:2], "nesting too deep"))
            self.marks.reported.add(loc)
            return _REPORTED
        if not isinstance(node, yaml.ScalarNode) and node.tag not in _COLLECTION_TAGS:
            # Scalars with such tags fail in construct_object; collections must fail too.
            tag = node.tag.replace(_STANDARD_TAG, "!!")
            self.problems.append(_at(node.start_mark, loc, f"unsupported YAML tag '{tag}'"))
            self.marks.reported.add(loc)
            return _REPORTED
        if isinstance(node, yaml.SequenceNode):
            items = [self.build(item, (*loc, i), depth + 1) for i, item in enumerate(node.value)]
            return [None if item is _REPORTED else item for item in items]
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, loc, depth)
        return self.loader.construct_object(node, deep=True)

    def _mapping(self, node: yaml.MappingNode, loc: Loc, depth: int) -> dict[str, Any]:
        first_seen: dict[object, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            if key in first_seen:
                line = first_seen[key].line + 1
                message = f"duplicate key '{key}' (first at line {line})"
                self.problems.append(_at(key_node.start_mark, loc, message))
            first_seen.setdefault(key, key_node.start_mark)
        self.loader.flatten_mapping(node)  # resolves '<<' merge keys; later keys win
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            # A list or mapping key is never built: through aliases it could be huge.
            key = (
                self.loader.construct_object(key_node)
                if isinstance(key_node, yaml.ScalarNode)
                else None
            )
            if not isinstance(key, str):
                message = (
                    f"key {key!r} must be text (quote it)"
                    if isinstance(key_node, yaml.ScalarNode)
                    else "a key must be text, not a list or mapping"
                )
                self.problems.append(_at(key_node.start_mark, loc, message))
                continue
            self.marks.key[(*loc, key)] = key_node.start_mark
            self.marks.value.pop((*loc, key), None)  # a merged-over key points at the override
            value = self.build(value_node, (*loc, key), depth + 1)
            if value is not _REPORTED:
                result[key] = value
        return result


_PLAUSIBLE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""A key an author could have meant as one of ours: a word, no ':', '$', '=' or spaces (a
shadow file's ``user:$6$…`` line or a ``.env``'s ``KEY=value`` are no typo of anything)."""


def looks_like(keys: Iterable[object], known: Sequence[str]) -> bool:
    """Whether a document whose top-level keys are ``keys`` is one of ours with ``known``
    keys: at least half of its keys are known or a plausible typo of one (answered with "did
    you mean"), so one near match (``prometheus:!:20791:::::`` beside 30 password hashes)
    does not make a file of secrets a document whose keys are quoted back as unknown."""
    listed = [str(k) for k in keys]
    like = sum(
        1
        for k in listed
        if k in known or (_PLAUSIBLE_KEY.fullmatch(k) and difflib.get_close_matches(k, known, n=1))
    )
    return like > 0 and 2 * like >= len(listed)


def content_kind(value: object) -> str:
    """What a document that is not a mapping looks like, never quoting it (it may be a file
    of secrets handed over by mistake): ``a list``, ``KEY=value lines (a .env or shell
    file?)``, ``a PEM block (a key or certificate?)``, ``plain text``, ``a number``."""
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    text = str(value).lstrip()
    if text.startswith("-----BEGIN"):
        return "a PEM block (a key or certificate?), not YAML keys"
    if re.match(r"(export\s+)?[A-Za-z_][A-Za-z0-9_]*=", text):
        return "KEY=value lines (a .env or shell file?), not YAML keys"
    return "plain text, not YAML keys"
