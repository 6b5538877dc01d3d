"""One real vLLM server per test run, shared by the xdist workers (``real_vllm`` fixture).

How: the controller (or the only process, without xdist) makes a state directory and hands
it to the workers (``workerinput``). The first worker whose collected tests include a
``real_vllm`` test starts the server, without waiting for it, under a file lock, and writes
its URL and process group to ``state.json``: start-up (45 s to 3 min) overlaps the other
tests. The fixture waits for readiness; the controller stops the server's process group in
``pytest_unconfigure``. The server's supervisor watches the controller's pid, so a killed
run does not leave the server behind.

``SPARKTOP_REAL_VLLM_URL=http://127.0.0.1:PORT`` uses a server already running instead.
Not installed, or failed to start: the tests skip with the reason; under CI (``CI`` set)
that is a failure, so CI cannot pass by skipping them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from sparktop.testing import real_vllm as installer
from sparktop.testing import real_vllm_server

URL_ENV = "SPARKTOP_REAL_VLLM_URL"
_STATE_KEY = pytest.StashKey["_RunState"]()
MARKER = "real_vllm"
# A real-engine test may wait for the server's start-up first (pytest-timeout's default is
# 300 s): the start-up bound plus the test itself.
TIMEOUT_S = int(real_vllm_server.START_TIMEOUT_S) + 300


def under_ci() -> bool:
    """True when ``CI`` is set to anything but empty, 0 or false."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True)
class RealVllm:
    """What a test gets: the server's base URL, served model name and max_model_len."""

    url: str
    model: str
    max_model_len: int
    log: Path | None


@dataclass
class _RunState:
    directory: Path
    watch_pid: int
    owner: bool
    server: RealVllm | None = None
    failure: str | None = None

    @property
    def file(self) -> Path:
        return self.directory / "state.json"

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with open(self.directory / ".lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def read(self) -> dict[str, object] | None:
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write(self, data: dict[str, object]) -> None:
        partial = self.file.with_suffix(".partial")
        partial.write_text(json.dumps(data), encoding="utf-8")
        partial.replace(self.file)


def real_vllm_configure(config: pytest.Config) -> None:
    """Register the marker; make (controller) or take (worker) the run's state directory."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}: runs against a real vLLM {installer.VLLM_VERSION} server started once per "
        f"run ({installer.INSTALL_HINT})",
    )
    worker_input = getattr(config, "workerinput", None)
    if worker_input is not None:
        state = _RunState(
            Path(worker_input["real_vllm_state"]), int(worker_input["real_vllm_watch"]), False
        )
    else:
        directory = Path(tempfile.mkdtemp(prefix="sparktop-real-vllm-"))
        state = _RunState(directory, os.getpid(), True)
    config.stash[_STATE_KEY] = state


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """xdist: hand the controller's state directory and pid to each worker."""
    state = node.config.stash[_STATE_KEY]  # type: ignore[attr-defined]
    node.workerinput["real_vllm_state"] = str(state.directory)  # type: ignore[attr-defined]
    node.workerinput["real_vllm_watch"] = str(state.watch_pid)  # type: ignore[attr-defined]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the server early (not waiting) when this process will run real-engine tests."""
    wanted = [
        item
        for item in session.items
        if item.get_closest_marker(MARKER) or MARKER in getattr(item, "fixturenames", ())
    ]
    for item in wanted:
        item.add_marker(pytest.mark.real_vllm)
        item.add_marker(pytest.mark.timeout(TIMEOUT_S))
    if session.config.option.collectonly or os.environ.get(URL_ENV):
        return
    if wanted and _STATE_KEY in session.config.stash:
        _ensure_started(session.config.stash[_STATE_KEY])


def _ensure_started(state: _RunState) -> None:
    with state.locked():
        if state.read() is not None:
            return
        paths = installer.RealVllmPaths.default()
        if installer.installed(paths) is None:
            state.write({"status": "missing", "reason": installer.missing_reason(paths)})
            return
        server = real_vllm_server.start(
            paths, state.directory / "server.log", watch_pid=state.watch_pid
        )
        state.write({"status": "starting", "started_at": time.time(), **server.to_json()})


def real_vllm_unconfigure(config: pytest.Config) -> None:
    """The controller stops the run's server and removes the state directory."""
    state = config.stash.get(_STATE_KEY, None)
    if state is None or not state.owner:
        return
    data = state.read()
    if data is not None and "pgid" in data:
        real_vllm_server.RealVllmServer.from_json(data).stop()
    if under_ci() or data is None or data.get("status") != "failed":
        shutil.rmtree(state.directory, ignore_errors=True)


def _unavailable(reason: str) -> NoReturn:
    if under_ci():
        pytest.fail(f"CI needs the real vLLM server: {reason}", pytrace=False)
    pytest.skip(reason)


def _external(url: str) -> RealVllm:
    base = url.rstrip("/")
    try:
        with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as resp:
            model = json.loads(resp.read())["data"][0]
        return RealVllm(base, str(model["id"]), int(model["max_model_len"]), None)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        _unavailable(f"{URL_ENV}={url} does not answer /v1/models as vLLM does: {exc}")


def _restart_if_port_taken(state: _RunState, data: dict[str, object]) -> bool:
    """The free port was taken between choosing and binding it: start once more (the first
    worker to see it does; the other finds the new state). True if a new start is there."""
    with state.locked():
        now = state.read() or {}
        if now.get("pgid") != data.get("pgid"):
            return now.get("status") == "starting"
        paths = installer.RealVllmPaths.default()
        server = real_vllm_server.start(
            paths, state.directory / "server-2.log", watch_pid=state.watch_pid
        )
        state.write(
            {"status": "starting", "restarted": True, "started_at": time.time(), **server.to_json()}
        )
        return True


def _wait(state: _RunState) -> RealVllm:
    if state.server is not None:
        return state.server
    if state.failure is not None:
        _unavailable(state.failure)
    if (external := os.environ.get(URL_ENV)) is not None:
        state.server = _external(external)
        return state.server
    _ensure_started(state)
    for attempt in (1, 2):
        data = state.read() or {}
        if data.get("status") in ("missing", "failed"):
            state.failure = str(data.get("reason"))
            _unavailable(state.failure)
        server = real_vllm_server.RealVllmServer.from_json(data)
        try:
            real_vllm_server.wait_ready(server)
        except real_vllm_server.RealVllmServerError as exc:
            taken = "address already in use" in str(exc).lower()
            if attempt == 1 and taken and _restart_if_port_taken(state, data):
                continue
            state.failure = f"the real vLLM server did not start: {exc}"
            with state.locked():
                state.write({**data, "status": "failed", "reason": state.failure})
            _unavailable(state.failure)
        with state.locked():
            now = state.read() or {}
            if now.get("status") == "starting" and now.get("pgid") == data.get("pgid"):
                started = float(str(now.get("started_at", time.time())))
                state.write({**now, "status": "ready", "ready_s": time.time() - started})
        state.server = RealVllm(server.url, server.model, server.max_model_len, server.log)
        return state.server
    raise AssertionError("unreachable")


def real_vllm_summary(config: pytest.Config) -> str | None:
    """One line for the run's summary: how long the real server took to answer."""
    state = config.stash.get(_STATE_KEY, None)
    data = state.read() if state is not None and state.owner else None
    if data is None:
        return None
    if data.get("status") == "ready":
        return (
            f"real vLLM {installer.VLLM_VERSION} answered {float(str(data['ready_s'])):.0f} s "
            f"after its start ({data['url']})"
        )
    return f"real vLLM {installer.VLLM_VERSION}: {data.get('status')}: {data.get('reason', '')}"


@pytest.fixture(scope="session")
def real_vllm(pytestconfig: pytest.Config) -> RealVllm:
    """The run's real vLLM server, waited for (skips, or fails under CI, if unavailable)."""
    return _wait(pytestconfig.stash[_STATE_KEY])
