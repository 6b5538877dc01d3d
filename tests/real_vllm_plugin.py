"""One real vLLM server per test run, shared by the xdist workers (``real_vllm`` fixture).

The scheme is :mod:`tests.real_server_plugin`'s. ``SPARKTOP_REAL_VLLM_URL=http://127.0.0.1:PORT``
uses a server already running instead; not installed or failed to start: the tests skip
with the reason (under CI, ``CI`` set, they fail).
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktop.testing.real_engines import VLLM
from sparktop.testing.real_server import RealServer
from sparktop.testing.real_vllm_server import RealVllmServer
from tests.real_server_plugin import RealServerPlugin

URL_ENV = "SPARKTOP_REAL_VLLM_URL"


@dataclass(frozen=True)
class RealVllm:
    """What a test gets: the server's base URL, served model name and max_model_len."""

    url: str
    model: str
    max_model_len: int
    log: Path | None


def _external(base: str) -> RealVllm:
    with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as resp:
        model = json.loads(resp.read())["data"][0]
    return RealVllm(base, str(model["id"]), int(model["max_model_len"]), None)


def _found(server: RealServer) -> RealVllm:
    assert isinstance(server, RealVllmServer)
    return RealVllm(server.url, server.model, server.max_model_len, server.log)


PLUGIN = RealServerPlugin[RealVllm](
    VLLM, marker="real_vllm", url_env=URL_ENV, external=_external, found=_found
)


@pytest.fixture(scope="session")
def real_vllm(pytestconfig: pytest.Config) -> RealVllm:
    """The run's real vLLM server, waited for (skips, or fails under CI, if unavailable)."""
    return PLUGIN.wait(pytestconfig)
