"""An SSH port given as ``--endpoint`` (trial 34 item 9): ``budget`` and ``sweep`` say what
the port is, as the scrape does, instead of waiting out their 30 s deadlines on a server
that sent its banner and waits for the client's. The deadlines are cut to 3 s here so the
old behaviour fails fast too; the banner server is on 127.0.0.1.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.sweep.runner import sweep_run
from sparktop.sweep.tokens import exact_tokens

BANNER = b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n"


class _Sshd(socketserver.BaseRequestHandler):
    """Sends the banner on accept, then reads until the client goes (an sshd waiting for
    the client's banner), at most 30 s."""

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.sendall(BANNER)
        sock.settimeout(30)
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass


@pytest.fixture
def ssh_port() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Sshd)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_budget_names_an_ssh_port_and_stops(
    ssh_port: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(exact_tokens, "TOKENIZE_DEADLINE_S", 3.0)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("a few words to count")
    code = main(["budget", "--file", str(prompt), "--endpoint", ssh_port])
    out, err = capsys.readouterr()
    assert code == 1
    assert err.strip() == (
        f"sparktop: error: endpoint {ssh_port} is not an HTTP server "
        "(it sent an SSH banner: SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13)"
    )
    assert "did not answer" not in err and out == ""


def test_sweep_names_an_ssh_port_with_the_error_prefix(
    ssh_port: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sweep_run, "DISCOVERY_STEP_S", 3.0)
    output = tmp_path / "x.yaml"
    code = main(["sweep", "--endpoint", ssh_port, "-o", str(output), "--yes"])
    _out, err = capsys.readouterr()
    assert code == 1
    assert err.strip().endswith(
        f"sparktop: error: {ssh_port}: not an HTTP server "
        "(it sent an SSH banner: SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13)"
    )
    assert "within 3 s" not in err and not output.exists()
