"""Command-line slips a new user makes: each is named by the flag typed, refused with one line
(exit 2) before the screen opens, or warned about on stderr."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sparktop.cli import main
from sparktop.sim.scenarios import SCENARIOS, fault_names
from sparktop.testing.http_stub import metrics_handler, serve_threaded
from sparktop.testing.vllm_page import FakeVllm


@pytest.fixture
def no_tui(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The monitor's screen replaced by a record of what it was handed; nothing probed."""
    opened: list[Any] = []

    def run_tui(plan: Any, sources: Sequence[Any], alerts: Any = None, **kw: Any) -> int:
        opened.append(plan)
        return 0

    monkeypatch.setattr("sparktop.ui.app.run_tui", run_tui)
    monkeypatch.setattr("sparktop.sources.build.local_engine_answers", lambda url="": False)
    return opened


def run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_a_bad_serve_metrics_address_names_serve_metrics(
    no_tui: list[Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run(["--serve-metrics", "999.1.1.1:80", "--force-tui"]) == 2
    err = capsys.readouterr().err
    assert "--serve-metrics '999.1.1.1:80': expected HOST:PORT" in err
    assert "--listen" not in err and not no_tui
    # The exporter's own flag is still the one it names.
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text("nodes: [{name: a, local: true}]\n")
    assert run(["exporter", "-i", str(inventory), "--listen", "999.1.1.1:80"]) == 2
    assert "--listen '999.1.1.1:80'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["", "   "])
def test_an_empty_on_alert_command_is_refused(
    no_tui: list[Any], capsys: pytest.CaptureFixture[str], command: str
) -> None:
    assert run(["--on-alert", command, "--force-tui"]) == 2
    err = capsys.readouterr().err
    assert "--on-alert: empty command" in err and err.count("\n") == 1
    assert not no_tui


def test_an_unset_api_key_env_is_warned_about_and_a_set_one_never_shown(
    no_tui: list[Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeVllm(engines=1, kv_cache_size_tokens=100_000)
    with serve_threaded(metrics_handler(fake.page().decode())) as url:
        monkeypatch.delenv("SPARKTOP_TEST_UNSET_TOKEN", raising=False)
        argv = ["--endpoint", url, "--api-key-env", "SPARKTOP_TEST_UNSET_TOKEN", "--force-tui"]
        assert run(argv) == 0 and len(no_tui) == 1
        err = capsys.readouterr().err
        assert "warning: --api-key-env SPARKTOP_TEST_UNSET_TOKEN: the variable is not set" in err
        monkeypatch.setenv("SPARKTOP_TEST_UNSET_TOKEN", "s3cret-token")
        assert run(argv) == 0
        err = capsys.readouterr().err
        assert "warning" not in err and "s3cret-token" not in err


def test_an_unknown_scenario_lists_every_one_the_tour_plays(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(["demo", "--scenario", "nope"]) == 2
    err = capsys.readouterr().err
    listed = err.split("choose from ", 1)[1].strip().split(", ")
    assert listed == list(SCENARIOS)
    played = fault_names(SCENARIOS["tour"])
    assert "thermal-blip" in played and "load-change" in played
    assert set(played) <= set(listed)
