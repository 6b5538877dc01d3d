"""The inventory's ``profile:`` is checked when the file loads: an unknown name or a missing
profile file is a usage error (exit 2) naming the file and line, like ``budget --profile``;
a profile file that does not load is refused by the plan, naming the same line."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.errors import UserError
from sparktop.inventory import load_inventory, parse_inventory
from sparktop.plan import Plan
from sparktop.sweep.profiles.builtin import builtin_profile_names
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

NODES = "nodes:\n  - {name: spark-1, host: 127.0.0.1}\n"


def _write(folder: Path, profile: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cluster.yaml"
    path.write_text(f"cluster: c\nprofile: {profile}\n{NODES}", encoding="utf-8")
    return path


def _builtin_text() -> str:
    folder = resources.files("sparktop.sweep").joinpath("profiles")
    return folder.joinpath(f"{DEFAULT_PROFILE}.yaml").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def _no_user_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKTOP_PROFILE_DIR", str(tmp_path / "no-user-profiles"))


def test_a_builtin_name_loads_unchanged(tmp_path: Path) -> None:
    assert load_inventory(_write(tmp_path, DEFAULT_PROFILE)).profile == DEFAULT_PROFILE


def test_an_unknown_name_is_refused_with_file_line_and_the_builtins(tmp_path: Path) -> None:
    path = _write(tmp_path, "nosuch")
    with pytest.raises(UserError) as exc:
        load_inventory(path)
    message = str(exc.value)
    assert message.startswith(f"{path}:2:10: profile: unknown profile 'nosuch'; built-in: ")
    assert all(name in message for name in builtin_profile_names())


def test_a_typo_gets_a_did_you_mean() -> None:
    with pytest.raises(UserError, match=rf"did you mean '{DEFAULT_PROFILE}'\?"):
        parse_inventory(f"profile: {DEFAULT_PROFILE[:-1]}\n{NODES}", "cluster.yaml")


def test_every_command_that_loads_the_inventory_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "nosuch")
    assert main(["snapshot", "--inventory", str(path)]) == 2
    assert main(["--inventory", str(path)]) == 2  # the monitor refuses before its screen opens
    err = capsys.readouterr().err
    assert err.count(f"sparktop: error: {path}:2:10: profile: unknown profile 'nosuch'") == 2
    assert "Traceback" not in err


def test_a_path_is_relative_to_the_inventory_and_kept_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "site"
    (folder / "sweeps").mkdir(parents=True)
    (folder / "sweeps" / "mine.yaml").write_text(_builtin_text(), encoding="utf-8")
    path = _write(folder, "./sweeps/mine.yaml")
    monkeypatch.chdir(tmp_path)  # not the inventory's directory
    inventory = load_inventory(path.relative_to(tmp_path))
    assert inventory.profile == str(folder / "sweeps" / "mine.yaml")


def test_a_missing_or_broken_profile_file_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "./sweeps/mine.yaml")
    with pytest.raises(UserError) as exc:
        load_inventory(path)
    assert str(exc.value) == (
        f"{path}:2:10: profile: profile file ./sweeps/mine.yaml not found "
        f"(looked for {tmp_path / 'sweeps' / 'mine.yaml'})"
    )
    (tmp_path / "sweeps").mkdir()
    (tmp_path / "sweeps" / "mine.yaml").write_text("name: [", encoding="utf-8")
    inventory = load_inventory(path)  # it exists: the plan loads it, once, and says where
    with pytest.raises(UserError, match=rf"^{path}:2:10: profile: .*mine\.yaml:1:"):
        Plan.from_inventory(inventory)
    assert main(["snapshot", "--inventory", str(path)]) == 2


def test_a_user_profile_name_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    users = tmp_path / "user-profiles"
    users.mkdir()
    (users / "lab-sweep.yaml").write_text(_builtin_text(), encoding="utf-8")
    monkeypatch.setenv("SPARKTOP_PROFILE_DIR", str(users))
    assert load_inventory(_write(tmp_path / "inv", "lab-sweep")).profile == "lab-sweep"
    with pytest.raises(UserError, match=r"did you mean 'lab-sweep'.*; yours: lab-sweep"):
        load_inventory(_write(tmp_path / "inv", "lab-swep"))


def test_no_profile_key_is_fine_and_an_empty_one_is_not() -> None:
    assert parse_inventory(NODES, "cluster.yaml").profile is None
    with pytest.raises(UserError, match=r"cluster\.yaml:1:10: profile: empty"):
        parse_inventory(f"profile: ''\n{NODES}", "cluster.yaml")


def test_sweep_does_not_import_the_inventory() -> None:
    """inventory → sweep only: loading every sweep module leaves sparktop.inventory unloaded."""
    code = (
        "import importlib, pkgutil, sys, sparktop.sweep as s\n"
        "for m in pkgutil.walk_packages(s.__path__, 'sparktop.sweep.'):\n"
        "    importlib.import_module(m.name)\n"
        "sys.exit('sparktop.inventory' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
