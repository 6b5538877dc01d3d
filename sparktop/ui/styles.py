"""Style names used by the views → theme variables, and spans → Content.

Colours live only in the theme files; views name a role (``warn``, ``crit``…) and this module
maps it to a ``$spark-*`` variable resolved by the active theme at render time.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.content import Content

STYLE_VARIABLES = {
    "": "",
    "bold": "bold",
    "ok": "$spark-ok",
    "warn": "$spark-warn",
    "crit": "$spark-crit bold",
    "dim": "$spark-dim",
    "stale": "$spark-stale",
    "accent": "$spark-accent",
    "bar": "$spark-bar",
}


def styled(cell: tuple[str, str]) -> Content:
    """One (text, role) cell as Content; the text is never parsed as markup."""
    text, role = cell
    return Content.styled(text, STYLE_VARIABLES.get(role, ""))


def line(spans: Iterable[tuple[str, str]]) -> Content:
    """A line of (text, role) spans as Content (plain text parts, no markup parsing)."""
    return Content.assemble(*((t, STYLE_VARIABLES.get(r, "")) for t, r in spans))


def lines(rows: Iterable[Iterable[tuple[str, str]]]) -> Content:
    return Content("\n").join(line(r) for r in rows)
