"""Help texts name what the code has (built-in profiles, the tour's steps), and every usage
error of a subcommand names that subcommand and its --help."""

from __future__ import annotations

import re

import pytest

from sparktop.cli import main
from sparktop.sim.scenarios import SCENARIOS, fault_names, timeline
from sparktop.sweep.profiles.builtin import builtin_profile_names


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # unwrapped


def test_profiles_help_names_every_builtin_profile(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "profiles")
    names = builtin_profile_names()
    assert len(names) >= 3
    for name in names:
        assert name in text
    assert "Two are built in" not in text


def test_demo_help_lists_the_tour_steps_the_demo_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = _help(capsys, "demo")
    tour = SCENARIOS["tour"]
    printed = [part.rsplit(" ", 1)[0] for part in timeline(tour).split(", ")]
    assert list(fault_names(tour)) == printed
    listed = re.search(r"looping: (.*?) \(", text)
    assert listed is not None, text
    assert listed.group(1).split(", ") == printed
    assert "thermal-blip" in printed and "load-change" in printed


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["snapshot", "--bogus"], "snapshot"),
        (["snapshot", "--inventory"], "snapshot"),
        (["budget"], "budget"),
        (["budget", "--prompt-tokens", "5", "extra"], "budget"),
        (["--theme", "light", "snapshot"], "snapshot"),
        (["--bogus"], None),
    ],
)
def test_usage_errors_name_the_subcommand_and_its_help(
    capsys: pytest.CaptureFixture[str], argv: list[str], command: str | None
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    prog = f"sparktop {command}" if command else "sparktop"
    assert err.startswith(f"{prog}: error: "), err
    assert err.rstrip().endswith(f"(see '{prog} --help')"), err
    assert len(err.strip().splitlines()) == 1
