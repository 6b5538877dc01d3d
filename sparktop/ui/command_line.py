"""The ``:`` command line, as in k9s and vim: a few words for what the keys and the palette do
(``:q``, ``:help``, ``:budget``, ``:node spark-3``, ``:details dsv41``, or a bare name).

:func:`parse_command` reads one line against the nodes and engines the monitor knows and
returns what to do (:class:`Resolved`) or, for a line it cannot read, the one-line reason
the monitor shows (naming the nearest command or name). No Textual here: the command bar
(``sparktop/ui/widgets/command_bar.py``) takes the line, the app runs the result.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Command:
    """One command: its name, shorter names, the app action it runs (``""``: a jump or a
    screen for ``takes``), what it takes (``""``, ``node``, ``engine``, ``any``) and help."""

    name: str
    aliases: tuple[str, ...]
    action: str
    takes: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("quit", ("q", "q!", "qa", "exit"), "quit", "", "quit the monitor"),
    Command("help", ("h", "?"), "help", "", "this screen: every column, source and key"),
    Command("budget", ("b",), "toggle_budget", "", "open / close the context budget"),
    Command("pause", ("p",), "toggle_pause", "", "pause / resume polling"),
    Command("events", ("e",), "toggle_events", "", "show / hide the events pane"),
    Command("theme", ("t",), "cycle_theme", "", "next colour theme"),
    Command("node", ("n", "no"), "", "node", "move the Nodes cursor to NAME"),
    Command("engine", ("en",), "", "engine", "scroll the engines pane to NAME"),
    Command("details", ("d",), "", "any", "open NAME's detail screen (node or engine)"),
    Command("curve", ("c",), "show_curve", "engine",
            "NAME's live window on the profile's curve (no NAME: the engine in focus)"),
)  # fmt: skip
"""Every command, in the order the help screen lists them."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a line asks for: ``command`` (a :class:`Command` name, ``node`` or ``engine`` for
    a bare name) and the node or engine it is about (``kind`` ``node``/``engine``), if any."""

    command: str
    action: str = ""
    target: str = ""
    kind: str = ""


def _command(word: str) -> Command | None:
    for command in COMMANDS:
        if word == command.name or word in command.aliases:
            return command
    starts = [c for c in COMMANDS if len(word) >= 2 and c.name.startswith(word)]
    return starts[0] if len(starts) == 1 else None


def _named(
    name: str, nodes: Sequence[str], engines: Sequence[str], takes: str
) -> list[tuple[str, str]]:
    """(kind, name) of the nodes and engines ``name`` names: exactly, else ignoring case,
    else those whose name starts with it (several: ambiguous)."""
    pools = [("node", nodes), ("engine", engines)]
    wanted = [(kind, names) for kind, names in pools if takes in (kind, "any")]
    for same in (str.__eq__, lambda a, b: a.casefold() == b.casefold(),
                 lambda a, b: a.casefold().startswith(b.casefold())):  # fmt: skip
        found = [(kind, n) for kind, names in wanted for n in names if same(n, name)]
        if found:
            return found[:1] if same is str.__eq__ else found
    return []


def _unknown(word: str, names: Sequence[str], prefix: str = ":", listed: str = "") -> str:
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {prefix}{close[0]}?)"
    if listed:
        return f" ({listed}: {_some(names) or 'none yet'})"
    return " (:help lists the commands)"


def _some(names: Sequence[str], most: int = 6) -> str:
    return ", ".join(names[:most]) + (", …" if len(names) > most else "")


def parse_command(line: str, nodes: Sequence[str], engines: Sequence[str]) -> Resolved | str:
    """What ``line`` (what was typed after ``:``) asks for among ``nodes`` and ``engines``
    (their names), or the reason it asks for nothing known (one line, printable words:
    names only from ``nodes``/``engines`` and the line itself)."""
    words = line.strip().lstrip(":").split()
    if not words:
        return Resolved("")
    word, args = words[0], words[1:]
    command = _command(word.casefold())
    if command is None:
        found = _named(word, nodes, engines, "any") if not args else []
        if len(found) == 1:  # a bare name, as k9s's `:pods`: jump to it
            kind, name = found[0]
            return Resolved(kind, target=name, kind=kind)
        if found:
            return f":{word} names {len(found)}: {_some([n for _k, n in found])}"
        everything = [c.name for c in COMMANDS] + [*nodes, *engines]
        return f"unknown command :{word}{_unknown(word, everything)}"
    if not command.takes:
        if args:
            return f":{command.name} takes no name (got {' '.join(args)})"
        return Resolved(command.name, command.action)
    if not args:
        if command.action:  # :curve alone: as its key does
            return Resolved(command.name, command.action)
        what = "node or engine" if command.takes == "any" else command.takes
        return f":{command.name} needs a {what} name (:{command.name} NAME)"
    if len(args) > 1:
        return f":{command.name} takes one name (got {' '.join(args)})"
    found = _named(args[0], nodes, engines, command.takes)
    if len(found) > 1:
        return f"{args[0]} names {len(found)}: {_some([n for _k, n in found])}"
    if not found:
        known = {"node": [*nodes], "engine": [*engines]}.get(command.takes, [*nodes, *engines])
        what = command.takes if command.takes != "any" else "node or engine"
        listed = {"node": "nodes", "engine": "engines"}.get(command.takes, "nodes and engines")
        hint = _unknown(args[0], known, f":{command.name} ", listed)
        return f"no {what} {args[0]}{hint}"
    kind, name = found[0]
    return Resolved(command.name, target=name, kind=kind)


def commands_markdown() -> str:
    """The help screen's section on the command line."""
    lines = [
        "## Command line (`:`)",
        "",
        "As in k9s: `:` opens a one-line prompt above the Nodes table; Enter runs it, Escape "
        "closes it. A bare node or engine name jumps to it; a command's first letters do "
        "when they name one command.",
        "",
    ]
    for command in COMMANDS:
        arg = " NAME" if command.takes else ""
        short = ", ".join(f"`:{a}`" for a in command.aliases)
        lines.append(f"- `:{command.name}{arg}` ({short}): {command.help}")
    return "\n".join(lines)
