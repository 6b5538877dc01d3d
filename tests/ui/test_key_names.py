"""The inventory's key names (``sparktop/inventory/key_names.py``, read without Textual) held
to Textual's: every key Textual names is accepted, and names it never delivers are refused."""

from __future__ import annotations

import string

import pytest
from textual._keyboard_protocol import FUNCTIONAL_KEYS
from textual.keys import KEY_ALIASES, Keys, _character_to_key

from sparktop.inventory.key_names import NAMED_KEYS, character_key, key_problem, keys_problem
from sparktop.ui.app import SparktopApp
from sparktop.ui.replay import ReplayApp
from sparktop.ui.screens.help import all_bindings


def test_every_key_textual_names_is_accepted() -> None:
    named = [k.value for k in Keys if not k.value.startswith("<") and k.value != "ctrl-at"]
    named += [k for k in FUNCTIONAL_KEYS.values() if len(k) > 1]
    named += [alias for aliases in KEY_ALIASES.values() for alias in aliases]
    problems = {key: key_problem(key) for key in named}
    assert {k: p for k, p in problems.items() if p} == {}
    assert {"f5", "escape", "pageup", "iso_level3_shift"} <= NAMED_KEYS


@pytest.mark.parametrize("character", [*string.printable.strip(), "é", "£", "→", "ß"])
def test_characters_are_named_as_textual_names_them(character: str) -> None:
    assert character_key(character) == _character_to_key(character)
    assert key_problem(character) is None
    assert key_problem(f"ctrl+{_character_to_key(character)}") is None


def test_the_monitors_own_keys_are_valid() -> None:
    bindings = all_bindings(SparktopApp) + all_bindings(ReplayApp)
    assert len(bindings) > 20
    assert {b.id: keys_problem(b.key) for b in bindings if keys_problem(b.key)} == {}


@pytest.mark.parametrize(
    "value", ["ctrl+zz", "zz", "f99", "ctrl+", "cmd+q", "shift+ctrl+x", "q,", "ctrl+?", "alt+alt+x"]
)
def test_keys_textual_never_delivers_are_refused(value: str) -> None:
    assert keys_problem(value)
