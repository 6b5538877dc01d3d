"""A subcommand loads only what it uses: the parsers of the commands its command line names
(none for the monitor), and neither the Prometheus client nor rich's console for ``budget``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sparktop import cli


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["budget", "--prompt-tokens", "1000"], ("budget",)),
        (["--theme", "light", "demo"], ("demo",)),
        (["--inventory", "budget", "snapshot"], ("snapshot", "budget")),
        ([], ()),
        (["--inventory", "c.yaml"], ()),
        (["--inventory", "c.yaml", "-h"], cli.COMMANDS),
        (["--help", "budget"], cli.COMMANDS),
        (["snapshto"], ()),
    ],
)
def test_the_parsers_built_are_those_the_command_line_names(
    argv: list[str], expected: tuple[str, ...]
) -> None:
    assert sorted(cli.wanted_commands(argv)) == sorted(expected)
    subparsers = cli._subparsers(cli.build_parser(cli.wanted_commands(argv)))
    assert sorted(subparsers) == sorted(cli.COMMANDS)  # every name, for "choose from"
    built = [name for name, sub in subparsers.items() if sub.get_default("_run") is not None]
    assert sorted(built) == sorted(expected)


def test_a_misspelt_command_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["snapshto"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert all(name in err for name in cli.COMMANDS)


def test_budget_loads_neither_the_prometheus_client_nor_the_simulator() -> None:
    code = (
        "import json, sys, io, contextlib\n"
        "from sparktop.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    status = main(['budget', '--prompt-tokens', '1000'])\n"
        "print(json.dumps([status, sorted(sys.modules)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    status, modules = json.loads(out.splitlines()[-1])
    assert status == 0
    loaded = set(modules)
    for heavy in ("httpx", "asyncssh", "asyncio", "textual", "rich.console", "sparktop.sim.model"):
        assert heavy not in loaded, heavy
    # The built-in profile comes precomputed (sparktop.sweep.profiles.precomputed): no YAML
    # parse, no validation models, no refit, and no sample types (tens of dataclasses).
    for heavy in ("yaml", "pydantic", "sparktop.sweep.profiles.profile_file", "sparktop.model"):
        assert heavy not in loaded, heavy
    assert "sparktop.commands.budget" in loaded
    assert "sparktop.commands.snapshot" not in loaded
