"""``sparktop budget --endpoint`` against hostile servers on 127.0.0.1 (issue 19 items 4, 14,
15): a server that echoes the bearer token in its error bodies, one that trickles every
answer, one that redirects elsewhere. The command ends, says what it could not get, never
prints a server's body, and the token appears in no output (stdout, stderr, --json).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from sparktop.cli import main
from sparktop.commands import budget as budget_command
from sparktop.sweep.tokens import exact_tokens
from sparktop.testing.http_stub import serve_threaded

TOKEN = "sekrit-token-4711"
ENV = "SPARKTOP_TEST_HOSTILE_KEY"


class Echo(BaseHTTPRequestHandler):
    """Every answer is an error whose body quotes the request, Authorization included."""

    def _echo(self) -> None:
        body = f"denied: you sent {self.headers.get('Authorization')}\x1b]52;c;cHduZWQ=\x07"
        data = body.encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _echo

    def log_message(self, *args: object) -> None:
        pass


class Trickle(BaseHTTPRequestHandler):
    """Valid headers, then one body byte every 50 ms (no single read ever times out)."""

    def _slow(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        try:
            for _ in range(100_000):
                self.wfile.write(b"#")
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    do_GET = do_POST = _slow

    def log_message(self, *args: object) -> None:
        pass


class Elsewhere(BaseHTTPRequestHandler):
    def _move(self) -> None:
        self.send_response(307)
        self.send_header("Location", "http://192.0.2.1:8000" + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _move

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv(ENV, TOKEN)
    yield TOKEN


@pytest.mark.parametrize("as_json", [False, True])
def test_an_echoing_server_gets_neither_its_body_nor_the_token_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: object, token: str, as_json: bool
) -> None:
    prompt = tmp_path / "prompt.txt"  # type: ignore[operator]
    prompt.write_text("a few words to count")
    flag = ["--json"] if as_json else []
    with serve_threaded(Echo) as url:
        code = main(
            ["budget", "--file", str(prompt), "--endpoint", url, "--api-key-env", ENV, *flag]
        )
    out, err = capsys.readouterr()
    assert code == 1
    for text in (out, err):
        assert token not in text and "denied" not in text and "\x1b" not in text
    assert "HTTP 500" in err


def test_a_trickling_server_never_hangs_the_budget(
    capsys: pytest.CaptureFixture[str],
    tmp_path: object,
    token: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(exact_tokens, "TOKENIZE_DEADLINE_S", 1.0)
    monkeypatch.setattr(budget_command, "LIVE_TIMEOUT_S", 0.5)
    prompt = tmp_path / "prompt.txt"  # type: ignore[operator]
    prompt.write_text("a few words to count")
    with serve_threaded(Trickle) as url:
        code = main(["budget", "--file", str(prompt), "--endpoint", url, "--api-key-env", ENV])
    out, err = capsys.readouterr()
    assert code == 1 and f"{url}/tokenize did not answer within 1 s" in err
    assert "unreachable" not in out + err
    assert "answer not complete within 1 s" in out  # the live scrape's own deadline
    assert token not in out + err
    # Never "answered but not usefully (unreachable …)"; the advice names the option that
    # stands in for the live pool.
    assert "answered but not usefully" not in err and "--kv-pool T" in err


def test_a_redirect_elsewhere_is_not_followed_and_said(
    capsys: pytest.CaptureFixture[str], tmp_path: object, token: str
) -> None:
    prompt = tmp_path / "prompt.txt"  # type: ignore[operator]
    prompt.write_text("a few words to count")
    with serve_threaded(Elsewhere) as url:
        code = main(["budget", "--file", str(prompt), "--endpoint", url, "--api-key-env", ENV])
    out, err = capsys.readouterr()
    assert code == 1
    assert "/tokenize answered HTTP 307 (a redirect): not followed" in out + err
    assert "redirected to another origin (http://192.0.2.1:8000); not followed" in err


def test_a_slow_tokenize_is_said_as_slow_not_unreachable(
    capsys: pytest.CaptureFixture[str], tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Metrics answer, ``/tokenize`` answers only after the deadline: the exact count is
    said to be late ("did not answer within 1 s"), never "endpoint unreachable"."""
    import threading

    from sparktop.testing.vllm_page import FakeVllm

    release = threading.Event()
    page = FakeVllm(kv_cache_size_tokens=1_000_000).page()

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page if self.path == "/metrics" else b"{}"
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            release.wait(10)
            with contextlib.suppress(OSError):
                self.send_response(200)
                self.send_header("Content-Length", "12")
                self.end_headers()
                self.wfile.write(b'{"count": 3}')

        def log_message(self, *args: object) -> None:
            pass

    monkeypatch.setattr(exact_tokens, "TOKENIZE_DEADLINE_S", 1.0)
    prompt = tmp_path / "prompt.txt"  # type: ignore[operator]
    prompt.write_text("a few words to count")
    with serve_threaded(Slow) as url:
        try:
            code = main(["budget", "--file", str(prompt), "--endpoint", url])
        finally:
            release.set()  # before the server joins its handler threads
    out, err = capsys.readouterr()
    assert code == 1 and f"{url}/tokenize did not answer within 1 s" in err
    assert "unreachable" not in out + err


class _Counting(BaseHTTPRequestHandler):
    """vLLM's ``/tokenize`` (a word a token) recording the size of each request it reads;
    404 to every GET (no ``/props``, no ``/metrics``)."""

    seen: list[int]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(len(body))
        data = b'{"count": %d}' % len(body.split())
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_scan_dir_sends_at_most_the_send_cap_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    """A trial pointed the pane at /usr/share: 135 MB went to /tokenize. ``--scan-dir`` with
    ``--endpoint`` sends at most ``--max-send-mb`` (default 8), then estimates and says so."""
    root = tmp_path / "src"  # type: ignore[operator]
    root.mkdir()
    for i in range(20):
        (root / f"f{i:02}.txt").write_text("word " * 2000)  # 10,000 bytes each
    handler = type("Counting", (_Counting,), {"seen": []})
    with serve_threaded(handler) as url:
        code = main(["budget", "--scan-dir", str(root), "--endpoint", url, "--max-send-mb", "0.05"])
    out, err = capsys.readouterr()
    cap = int(0.05 * 1024 * 1024)
    assert len(handler.seen) == 5 and sum(handler.seen) < cap + 5 * 100  # the JSON around it
    assert "(estimated)" in out and "20 counted" in out
    assert "sparktop: note: estimated (send cap): the text is over 0.05 MiB" in err
    assert "(--max-send-mb raises it)" in err
    assert code == 1  # the live scrape found no /metrics, as before; the cap is only a note
    assert "gave no usable metrics" in err or "unreachable" in err


def test_max_send_mb_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "--prompt-tokens", "5", "--max-send-mb", "0"]) == 2
    assert "--max-send-mb must be > 0 and at most 4,096, got 0.0" in capsys.readouterr().err
