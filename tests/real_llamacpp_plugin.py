"""One real ``llama-server`` per test run, shared by the xdist workers (``real_llamacpp``).

The scheme is :mod:`tests.real_server_plugin`'s. ``SPARKTOP_REAL_LLAMACPP_URL=http://127.0.0.1:PORT``
uses a server already running instead; not built or failed to start: the tests skip with the
reason and how to install (under CI, ``CI`` set, they fail).
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktop.testing.real_engines import LLAMACPP
from sparktop.testing.real_llamacpp_server import RealLlamacppServer
from sparktop.testing.real_server import RealServer
from tests.real_server_plugin import RealServerPlugin

URL_ENV = "SPARKTOP_REAL_LLAMACPP_URL"


@dataclass(frozen=True)
class RealLlamacpp:
    """What a test gets: the server's base URL, served model name, one slot's context
    (``n_ctx``), the number of slots and the server's log (None for an external server)."""

    url: str
    model: str
    n_ctx: int
    slots: int
    log: Path | None


def _external(base: str) -> RealLlamacpp:
    with urllib.request.urlopen(f"{base}/props", timeout=10) as resp:
        props = json.loads(resp.read())
    with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as resp:
        model = json.loads(resp.read())["data"][0]["id"]
    n_ctx = int(props["default_generation_settings"]["n_ctx"])
    return RealLlamacpp(base, str(model), n_ctx, int(props["total_slots"]), None)


def _found(server: RealServer) -> RealLlamacpp:
    assert isinstance(server, RealLlamacppServer)
    return RealLlamacpp(server.url, server.model, server.n_ctx, server.slots, server.log)


PLUGIN = RealServerPlugin[RealLlamacpp](
    LLAMACPP, marker="real_llamacpp", url_env=URL_ENV, external=_external, found=_found
)


@pytest.fixture(scope="session")
def real_llamacpp(pytestconfig: pytest.Config) -> RealLlamacpp:
    """The run's real llama-server, waited for (skips, or fails under CI, if unavailable)."""
    return PLUGIN.wait(pytestconfig)
