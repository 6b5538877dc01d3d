"""Profile files an operator (or an attacker) might hand sparktop get the inventory's YAML
guards: each of ``budget --profile FILE``, ``profiles FILE`` and an inventory's ``profile:``
refuses them in one line with exit 2, at once — never a hang or a ``RecursionError``."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktop.errors import UserError
from sparktop.sweep.profiles.loader import load_profile
from sparktop.yamltree import MAX_DEPTH, MAX_VALUES
from tests.conftest import CASES

ALIAS_BOMB = CASES / "profiles" / "alias-bomb.yaml"
DEEP_NESTING = CASES / "profiles" / "deep-nesting.yaml"
EXPECTED = {
    ALIAS_BOMB: f"more than {MAX_VALUES:,} values: too large for a profile",
    DEEP_NESTING: f"nesting too deep (more than {MAX_DEPTH} levels",
}


def _commands(case: Path, tmp_path: Path) -> dict[str, list[str]]:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(f"nodes: [{{name: a, local: true}}]\nprofile: {case}\n", encoding="utf-8")
    return {
        "budget --profile": ["budget", "--profile", str(case), "--prompt-tokens", "1000"],
        "profiles FILE": ["profiles", str(case)],
        "inventory profile:": ["snapshot", "--inventory", str(inventory)],
    }


@pytest.mark.timeout(30)  # the alias bomb used to spin at 100 % CPU for good
@pytest.mark.parametrize("case", [ALIAS_BOMB, DEEP_NESTING], ids=lambda p: p.name)
@pytest.mark.parametrize("command", ["budget --profile", "profiles FILE", "inventory profile:"])
def test_hostile_profiles_are_refused_in_one_line(
    case: Path, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparktop.cli import main

    assert main(_commands(case, tmp_path)[command]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and str(case) in lines[0] and EXPECTED[case] in lines[0]
    assert "Traceback" not in captured.err and "RecursionError" not in captured.err


def test_the_refusal_names_where_the_nesting_goes_too_deep() -> None:
    with pytest.raises(UserError) as info:
        load_profile(str(DEEP_NESTING))
    line = next(i for i, text in enumerate(DEEP_NESTING.read_text().splitlines(), 1) if "[" in text)
    assert str(info.value).startswith(f"{DEEP_NESTING}:{line}:")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: !!python/object/apply:os.system [id]\n", "unsupported YAML tag"),
        ("name: a\nname: b\n", "p.yaml:2: duplicate key 'name' (first at line 1)"),
        ("- " * 200 + "x\n", "nesting too deep"),
        ("a: &a [x]\n" + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}]\n"
                                  for i in range(40)), "b30[0]: nesting too deep"),
    ],
    ids=["tag", "duplicate", "deep-block", "deep-through-aliases"],
)  # fmt: skip
def test_the_inventory_guards_apply_to_profiles(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as info:
        load_profile(str(path))
    assert expected in str(info.value) and "\n" not in str(info.value)
