"""prometheus_client's parse errors quote the offending text with ``repr`` (``'\\x1b'``); what
the user sees is the product's own rendering of server text (ESC → ``␛``), the same in the
sample, ``snapshot`` text and ``snapshot --json`` (issue 20)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.sources.exposition.page import parse_page
from sparktop.testing.http_stub import metrics_handler, serve_threaded

BAD_PAGE = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{engine="0"} 1 2 \x1b[2J\n'
    "# TYPE vllm:num_requests_waiting gauge\n"
    'vllm:num_requests_waiting{engine="0"} 0\n'
)


@pytest.fixture
def broken_url() -> Iterator[str]:
    with serve_threaded(metrics_handler(BAD_PAGE, b"{}")) as url:
        yield url


def test_the_library_message_shows_control_characters_as_symbols() -> None:
    error = parse_page(BAD_PAGE).error
    assert error.startswith("page is not valid Prometheus text (prometheus_client: ")
    assert "␛[2J" in error and "\\x1b" not in error and "\x1b" not in error


def test_a_literal_backslash_in_the_page_stays_a_backslash() -> None:
    error = parse_page('vllm:num_requests_running{engine="0"} 1 2 a\\x1b\n').error
    assert "a\\x1b" in error and "\\\\" not in error and "␛" not in error


@pytest.mark.parametrize("as_json", [False, True])
def test_snapshot_says_the_parse_error_in_the_visible_rendering(
    broken_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(f"engines: [{{name: dsv4, url: '{broken_url}'}}]\n")
    flag = ["--json"] if as_json else []
    main(["snapshot", "--inventory", str(inventory), "--window", "0", *flag])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b" not in out and "\\\\x1b" not in out
    if as_json:
        (engine,) = json.loads(out)["engines"]
        text = json.dumps(engine, ensure_ascii=False)
    else:
        text = out
    assert "prometheus_client" in text and "␛[2J" in text
