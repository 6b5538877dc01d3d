"""Start and stop a real ``llama-server`` on 127.0.0.1 for the real-engine tests.

The binary and the GGUF model come from :mod:`sparktop.testing.real_llamacpp`; the flags are
those of ``../shared/fixtures/real/SOURCES.md`` (``--metrics -c 4096 -np 2 -t 1``) plus
``--slots`` and the served name of the real-vLLM tests. The server runs under the same
supervisor as the real vLLM (:func:`real_vllm_server.start_supervised`): its process group
ends when the watched process ends, so a killed test run leaves no server behind.

Standard library only. Errors: :class:`RealLlamacppServerError` with the tail of the log.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sparktop.testing import real_vllm_server
from sparktop.testing.real_llamacpp import RealLlamacppPaths

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


class RealLlamacppServerError(RuntimeError):
    """The server did not start or answer; the message ends with its log's tail."""


@dataclass(frozen=True)
class RealLlamacppServer:
    """A started server: its URL, process group (the supervisor's pid) and log file."""

    url: str
    port: int
    pgid: int
    log: Path
    model: str = SERVED_MODEL_NAME
    n_ctx: int = CONTEXT_TOKENS // SLOTS  # one slot's context (/props n_ctx)
    slots: int = SLOTS

    def to_json(self) -> dict[str, object]:
        return {"url": self.url, "port": self.port, "pgid": self.pgid, "log": str(self.log)}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RealLlamacppServer:
        return cls(
            url=str(data["url"]),
            port=int(str(data["port"])),
            pgid=int(str(data["pgid"])),
            log=Path(str(data["log"])),
        )

    def alive(self) -> bool:
        """True while any process of the server's group exists."""
        return real_vllm_server.group_alive(self.pgid)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM to the whole group, SIGKILL what is left after ``timeout_s``."""
        real_vllm_server.stop_group(self.pgid, timeout_s)


def server_argv(paths: RealLlamacppPaths, port: int) -> list[str]:
    """The server's command line (without the supervisor)."""
    return [
        str(paths.server), "-m", str(paths.model),
        "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS,
    ]  # fmt: skip


def start(paths: RealLlamacppPaths, log: Path, *, watch_pid: int = 0) -> RealLlamacppServer:
    """Start the server without waiting for it; ``watch_pid``'s end stops it (0: never)."""
    port = real_vllm_server.free_port()
    pgid = real_vllm_server.start_supervised(
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


def wait_ready(server: RealLlamacppServer, timeout_s: float = START_TIMEOUT_S) -> float:
    """Block until the server answers; the seconds waited. Raises RealLlamacppServerError."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        if ready(server.url):
            return time.monotonic() - started
        if not server.alive():
            raise RealLlamacppServerError(
                f"llama-server exited before answering\n{real_vllm_server.tail(server.log)}"
            )
        if time.monotonic() > deadline:
            raise RealLlamacppServerError(
                f"llama-server did not answer on {server.url} within {timeout_s:.0f} s\n"
                f"{real_vllm_server.tail(server.log)}"
            )
        # Nothing to await across processes: the port answering is the event.
        time.sleep(0.5)
