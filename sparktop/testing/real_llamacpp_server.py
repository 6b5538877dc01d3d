"""Start and stop a real ``llama-server`` on 127.0.0.1 for the real-engine tests.

The binary and the GGUF model come from :mod:`sparktop.testing.real_llamacpp`; the flags are
those of ``../shared/fixtures/real/SOURCES.md`` (``--metrics -c 4096 -np 2 -t 1``) plus
``--slots`` and the served name of the real-vLLM tests. The server runs under
:mod:`~sparktop.testing.real_server`'s supervisor, as the real vLLM does: its process group
ends when the watched process ends, so a killed test run leaves no server behind.

Standard library only. Errors: :class:`RealLlamacppServerError` with the tail of the log.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sparktop.testing import real_server
from sparktop.testing.real_llamacpp import RealLlamacppPaths
from sparktop.testing.real_server import RealServer, ServerError

SERVED_MODEL_NAME = "tiny-llama"
CONTEXT_TOKENS = 4096  # -c: the KV pool, split between the slots
SLOTS = 2  # -np
SERVER_ARGS = (
    "--metrics", "--slots", "--no-webui",
    "-c", str(CONTEXT_TOKENS), "-np", str(SLOTS), "-t", "1",
    "--alias", SERVED_MODEL_NAME,
)  # fmt: skip
# Loading a 14 MB model takes a second; the bound is for a machine at load 40.
START_TIMEOUT_S = 300.0


class RealLlamacppServerError(ServerError):
    """The server did not start or answer; the message ends with its log's tail."""


@dataclass(frozen=True)
class RealLlamacppServer(RealServer):
    """A started llama-server (see :class:`~sparktop.testing.real_server.RealServer`), its
    served name, one slot's context (``/props`` n_ctx) and its number of slots."""

    model: str = SERVED_MODEL_NAME
    n_ctx: int = CONTEXT_TOKENS // SLOTS
    slots: int = SLOTS


def server_argv(paths: RealLlamacppPaths, port: int) -> list[str]:
    """The server's command line (without the supervisor)."""
    return [
        str(paths.server), "-m", str(paths.model),
        "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS,
    ]  # fmt: skip


def start(paths: RealLlamacppPaths, log: Path, *, watch_pid: int = 0) -> RealLlamacppServer:
    """Start the server without waiting for it; ``watch_pid``'s end stops it (0: never)."""
    port = real_server.free_port()
    pgid = real_server.start_supervised(
        server_argv(paths, port), log, watch_pid=watch_pid, env={}, cwd=paths.root
    )
    return RealLlamacppServer(url=f"http://127.0.0.1:{port}", port=port, pgid=pgid, log=log)


def ready(url: str, timeout_s: float = 5.0) -> bool:
    """True when ``/health`` answers 200 (llama-server answers 503 while loading)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as resp:
            body = json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return isinstance(body, dict) and body.get("status") == "ok"


def wait_ready(server: RealServer, timeout_s: float = START_TIMEOUT_S) -> float:
    """Block until the server answers; the seconds waited. Raises RealLlamacppServerError."""
    return real_server.wait_ready(
        server, ready, what="llama-server", timeout_s=timeout_s, poll_s=0.5,
        error=RealLlamacppServerError,
    )  # fmt: skip
