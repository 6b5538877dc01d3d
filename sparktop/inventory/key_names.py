"""Key strings the inventory's ``keys:`` may bind, checked the way Textual names key events.

Textual itself accepts any string as a binding's key (``ctrl+zz`` is bound, and never fires),
so a typo under ``keys:`` would silently leave an action on no key. The inventory is read
without Textual, so its key names are declared here; ``tests/ui/test_key_names.py`` holds
them to Textual's own (``textual.keys.Keys``, the kitty protocol's functional keys,
``_character_to_key``).

A key event reads ``[modifier+]…key``: modifiers in alphabetical order (Textual sorts them),
then one printable character (``q``, ``?``, ``+``) or a key name (``f5``, ``escape``,
``space``, ``question_mark``). A binding's value may list several keys, comma-separated.
"""

from __future__ import annotations

import unicodedata

from sparktop.inventory.names import clip

MODIFIERS = ("alt", "ctrl", "hyper", "meta", "shift", "super")
"""Textual's modifier names, in the order a key event lists them."""

NAMED_KEYS = frozenset(
    {
        "escape", "enter", "return", "newline", "tab", "space", "backspace", "insert", "delete",
        "home", "end", "pageup", "pagedown", "up", "down", "left", "right",
        *(f"f{n}" for n in range(1, 36)),
        "at", "caps_lock", "scroll_lock", "num_lock", "print_screen", "pause", "menu",
        "kp_begin", "add", "subtract", "multiply", "divide", "decimal", "separator", "equal",
        "media_play", "media_pause", "media_play_pause", "media_reverse", "media_stop",
        "media_fast_forward", "media_rewind", "media_track_next", "media_track_previous",
        "media_record", "lower_volume", "raise_volume", "mute_volume",
        "left_shift", "left_control", "left_alt", "left_super", "left_hyper", "left_meta",
        "right_shift", "right_control", "right_alt", "right_super", "right_hyper", "right_meta",
        "iso_level3_shift", "iso_level5_shift", "left_square_brace",
    }
)  # fmt: skip
"""Keys named by a word rather than a character (Textual's ``Keys`` and functional keys)."""

_REPLACEMENTS = {
    "solidus": "slash",
    "reverse_solidus": "backslash",
    "commercial_at": "at",
    "hyphen_minus": "minus",
    "plus_sign": "plus",
    "low_line": "underscore",
}
"""Textual's short names for some characters' Unicode names (``textual.keys``)."""


def character_key(character: str) -> str:
    """The key name Textual gives a key event for one typed ``character``: the character
    itself when alphanumeric, else its Unicode name in lower case with ``_`` for spaces and
    dashes (``?`` → ``question_mark``, ``/`` → ``slash``)."""
    if character.isalnum():
        return character
    try:
        name = unicodedata.name(character).lower().replace("-", "_").replace(" ", "_")
    except ValueError:
        name = {"\t": "tab"}.get(character, character)
    return _REPLACEMENTS.get(name, name)


_ASCII_NAMES = frozenset(character_key(chr(code)) for code in range(0x21, 0x7F))


def _is_character_name(name: str) -> bool:
    if name in _ASCII_NAMES:
        return True
    try:
        character = unicodedata.lookup(name.replace("_", " "))
    except KeyError:
        return False
    return character_key(character) == name


_LEGACY = frozenset({"ctrl+@"})
"""Modified characters Textual's legacy parser delivers as such (``Keys.ControlAt``)."""


def key_problem(key: str) -> str | None:
    """What is wrong with one key string (``ctrl+zz``: ``'zz' is not a key name …``), None
    for a key Textual can deliver (see the module docstring)."""
    if not key:
        return "an empty key (the , key is named comma)"
    if len(key) == 1:
        return None if key.isprintable() and not key.isspace() else _UNPRINTABLE
    head, _, base = key.rpartition("+")
    if not base:  # "ctrl++": the + key under a modifier
        head, base = key[:-2], "+"
    modifiers = head.split("+") if head else []
    unknown = [m for m in modifiers if m not in MODIFIERS]
    if unknown:
        return f"'{unknown[0]}' is not a modifier ({', '.join(MODIFIERS)})"
    if len(set(modifiers)) != len(modifiers):
        return "a modifier is given twice"
    if modifiers != sorted(modifiers):
        return f"Textual lists modifiers in order: write '{'+'.join([*sorted(modifiers), base])}'"
    if len(base) == 1:
        if not base.isprintable() or base.isspace():
            return _UNPRINTABLE
        if modifiers and not base.isalnum() and key not in _LEGACY:
            # A modified key event names its character (ctrl+question_mark).
            return f"with a modifier the key is named: write '{head}+{character_key(base)}'"
        return None
    if base in NAMED_KEYS or _is_character_name(base):
        return None
    return (
        f"'{base}' is not a key name (one character, or a name such as f5, escape, space, "
        "pageup, question_mark)"
    )


_UNPRINTABLE = "not a printable character (name it: space, tab, …)"


def keys_problem(value: str) -> str | None:
    """What is wrong with a ``keys:`` value (one key, or several comma-separated, as
    Textual splits a binding's keys), None when every key in it is one Textual can deliver."""
    for key in (k.strip() for k in value.split(",")):
        problem = key_problem(key)
        if problem:
            return f"invalid key '{clip(key or value)}': {problem}"
    return None
