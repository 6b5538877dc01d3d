"""The inventory's ``keys:`` remaps checked against the keys the monitor already uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.binding import Binding

from sparktop.inventory.binding_ids import BINDING_IDS

RESERVED_KEYS = {
    "ctrl+p": "the command palette",
    "ctrl+q": "quit",
    "tab": "focus next",
    "shift+tab": "focus previous",
    "up": "moving in the Nodes table",
    "down": "moving in the Nodes table",
    "pageup": "moving in the Nodes table",
    "pagedown": "moving in the Nodes table",
    "j": "moving in the Nodes table",
    "k": "moving in the Nodes table",
    "g": "moving in the Nodes table",
    "G": "moving in the Nodes table",
}
"""Keys bound without a binding id (Textual's own and the table's), which ``keys:`` cannot
move out of the way."""


def checked_keymap(
    keys: Mapping[str, str], bindings: Sequence[Binding]
) -> tuple[dict[str, str], list[str]]:
    """The remaps to apply, and one problem per id that is unknown (not in
    :data:`~sparktop.inventory.binding_ids.BINDING_IDS`: a plan not read from an inventory
    file) or whose new key is already taken (by another binding, after the other remaps,
    or by :data:`RESERVED_KEYS`).

    ``keys`` is normalised (``question_mark``, not ``?``); a clashing remap is dropped, so
    the action keeps its default key and the key keeps what it did, and the problem says so.
    Two bindings of the same action on one key (replay's space and ``p``) are no clash.
    """
    by_id = {b.id: b for b in bindings if b.id}
    # The inventory refuses an id no screen binds; one another screen binds (replay's keys
    # in the live monitor) is not this one's to apply, nor a problem.
    unknown = sorted(set(keys) - set(by_id) - BINDING_IDS)
    problems = []
    if unknown:
        problems.append(
            f"keys: unknown binding id(s): {', '.join(unknown)}; known: {', '.join(sorted(by_id))}"
        )
    wanted = {k: v for k, v in keys.items() if k in by_id}
    taken: dict[str, list[tuple[str, Binding]]] = {}
    for binding_id, binding in by_id.items():
        for key in _keys(wanted.get(binding_id, binding.key)):
            taken.setdefault(key, []).append((binding_id, binding))
    applied: dict[str, str] = {}
    for binding_id, value in wanted.items():
        action = by_id[binding_id].action
        clashes = []
        own = _keys(by_id[binding_id].key)
        for key in _keys(value):
            # A key the binding already has by default (replay's ``g``) is no new clash.
            if key in RESERVED_KEYS and key not in own:
                clashes.append(f"{key} is {RESERVED_KEYS[key]}")
            clashes += [
                f"{key} is {other.description or other.action} ({other_id})"
                for other_id, other in taken.get(key, ())
                if other_id != binding_id and other.action != action
            ]
        if clashes:
            default = by_id[binding_id].key
            problems.append(
                f"keys: {binding_id}: {value} clashes: {'; '.join(clashes)}. "
                f"{binding_id} stays on {default}"
            )
        else:
            applied[binding_id] = value
    return applied, problems


def _keys(value: str) -> list[str]:
    return [k.strip() for k in value.split(",") if k.strip()]
