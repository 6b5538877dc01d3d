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


def test_an_invalid_name_in_a_help_line_names_the_line() -> None:
    """The library raises a bare ValueError for ``# HELP evil\\x1b[2J help`` (an invalid
    name): the reason read ``prometheus_client: ValueError``. It names the line, quoted."""
    from tests.real_page import REAL_LOAD_PAGE

    real = REAL_LOAD_PAGE.read_text()
    page = real + "# HELP evil\x1b[2J help\n" + 'vllm:num_requests_running{engine="1"} 2\n'
    line = real.count("\n") + 1
    assert parse_page(page).error == (
        f"page is not valid Prometheus text (prometheus_client: line {line:,} refused: "
        "# HELP evil␛[2J help)"
    )


def test_the_quoted_text_is_clipped_and_binary_pages_give_one_stable_reason() -> None:
    """A garbled page put ~60 characters of mojibake into the reason, new at every scrape
    (a new alert text each poll); a long offending text is quoted to 40 characters."""
    import random

    rng = random.Random(34)
    errors = {
        parse_page(rng.randbytes(20_000).decode("utf-8", errors="replace")).error for _ in range(5)
    }
    assert errors == {
        "page is not valid Prometheus text (prometheus_client: the page is not UTF-8 text "
        "(binary data?))"
    }
    long = parse_page('vllm:num_requests_running{engine="0"} 1 2 ' + "x" * 300 + "\n").error
    assert long == (
        "page is not valid Prometheus text (prometheus_client: could not convert string to "
        "float: '" + "x" * 39 + "…)"
    )
