"""One real engine server per test run, shared by the xdist workers: the scheme both
``tests/real_vllm_plugin.py`` and ``tests/real_llamacpp_plugin.py`` use.

How: the controller (or the only process, without xdist) makes a state directory per engine
and hands it to the workers (``workerinput``). The first worker whose collected tests use
the engine's fixture or marker starts the server, without waiting for it, under a file lock,
and writes its URL and process group to ``state.json``: start-up (seconds for llama-server,
45 s to 3 min for vLLM) overlaps the other tests. The fixture waits for readiness; the
controller stops the server's process group in ``pytest_unconfigure``. The server's
supervisor watches the controller's pid, so a killed run does not leave the server behind.

``<url_env>=http://127.0.0.1:PORT`` uses a server already running instead. Not installed,
or failed to start: the tests skip with the reason; under CI (``CI`` set) that is a failure,
so CI cannot pass by skipping them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, NoReturn, TypeVar

import pytest

from sparktop.testing.real_engines import RealEngine
from sparktop.testing.real_server import RealServer, ServerError

T = TypeVar("T")
"""What a test gets from the fixture (the engine's own record: URL, model, limits)."""


def under_ci() -> bool:
    """True when ``CI`` is set to anything but empty, 0 or false."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@dataclass
class _RunState(Generic[T]):
    directory: Path
    watch_pid: int
    owner: bool
    server: T | None = None
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


class RealServerPlugin(Generic[T]):
    """The run's server of one real engine; each hook is called by ``tests/conftest.py``.

    ``marker``: the pytest marker (also the fixture's name); ``url_env``: the variable naming
    an external server; ``external(url)``: the record of an external server (raises
    ``ValueError``/``OSError``/``KeyError`` if it does not answer as the engine does);
    ``found(server)``: the record of a started server."""

    def __init__(
        self,
        engine: RealEngine,
        *,
        marker: str,
        url_env: str,
        external: Callable[[str], T],
        found: Callable[[RealServer], T],
    ) -> None:
        self.engine, self.marker, self.url_env = engine, marker, url_env
        self.external, self.found = external, found
        self.key = pytest.StashKey[_RunState[T]]()
        # A real-engine test may wait for the server's start-up first (pytest-timeout's
        # default is 300 s): the start-up bound plus the test itself.
        self.timeout_s = int(engine.start_timeout_s) + 300

    def configure(self, config: pytest.Config) -> None:
        """Register the marker; make (controller) or take (worker) the state directory."""
        config.addinivalue_line(
            "markers",
            f"{self.marker}: runs against a {self.engine.label} started once per run "
            f"({self.engine.install_hint})",
        )
        worker_input = getattr(config, "workerinput", None)
        if worker_input is not None:
            state = _RunState[T](
                Path(worker_input[f"{self.marker}_state"]),
                int(worker_input[f"{self.marker}_watch"]),
                False,
            )
        else:
            directory = Path(tempfile.mkdtemp(prefix=f"sparktop-{self.engine.prefix}-"))
            state = _RunState[T](directory, os.getpid(), True)
        config.stash[self.key] = state

    def configure_node(self, node: object) -> None:
        """xdist: hand the controller's state directory and pid to a worker."""
        state = node.config.stash[self.key]  # type: ignore[attr-defined]
        node.workerinput[f"{self.marker}_state"] = str(state.directory)  # type: ignore[attr-defined]
        node.workerinput[f"{self.marker}_watch"] = str(state.watch_pid)  # type: ignore[attr-defined]

    def collection_finish(self, session: pytest.Session) -> None:
        """Start the server early (not waiting) when this process will run its tests."""
        wanted = [
            item
            for item in session.items
            if item.get_closest_marker(self.marker)
            or self.marker in getattr(item, "fixturenames", ())
        ]
        for item in wanted:
            item.add_marker(getattr(pytest.mark, self.marker))
            item.add_marker(pytest.mark.timeout(self.timeout_s))
        if session.config.option.collectonly or os.environ.get(self.url_env):
            return
        if wanted and self.key in session.config.stash:
            self._ensure_started(session.config.stash[self.key])

    def _start(self, state: _RunState[T], log: str, **extra: object) -> None:
        server = self.engine.start(self.engine.paths(), state.directory / log, state.watch_pid)
        state.write({"status": "starting", **extra, "started_at": time.time(), **server.to_json()})

    def _ensure_started(self, state: _RunState[T]) -> None:
        with state.locked():
            if state.read() is not None:
                return
            paths = self.engine.paths()
            if self.engine.installed(paths) is None:
                state.write({"status": "missing", "reason": self.engine.missing_reason(paths)})
                return
            self._start(state, "server.log")

    def unconfigure(self, config: pytest.Config) -> None:
        """The controller stops the run's server and removes the state directory."""
        state = config.stash.get(self.key, None)
        if state is None or not state.owner:
            return
        data = state.read()
        if data is not None and "pgid" in data:
            self.engine.from_json(data).stop()
        if under_ci() or data is None or data.get("status") != "failed":
            shutil.rmtree(state.directory, ignore_errors=True)

    def _unavailable(self, reason: str) -> NoReturn:
        if under_ci():
            pytest.fail(f"CI needs the {self.engine.label}: {reason}", pytrace=False)
        pytest.skip(reason)

    def _restart_if_port_taken(self, state: _RunState[T], data: dict[str, object]) -> bool:
        """The free port was taken between choosing and binding it: start once more (the
        first worker to see it does; the other finds the new state). True if a new start
        is there."""
        with state.locked():
            now = state.read() or {}
            if now.get("pgid") != data.get("pgid"):
                return now.get("status") == "starting"
            self._start(state, "server-2.log", restarted=True)
            return True

    def wait(self, config: pytest.Config) -> T:
        """The run's server, waited for (skips, or fails under CI, if unavailable)."""
        state = config.stash[self.key]
        if state.server is not None:
            return state.server
        if state.failure is not None:
            self._unavailable(state.failure)
        if (url := os.environ.get(self.url_env)) is not None:
            try:
                state.server = self.external(url.rstrip("/"))
            except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                self._unavailable(
                    f"{self.url_env}={url} does not answer as a {self.engine.label} does: {exc}"
                )
            return state.server
        self._ensure_started(state)
        for attempt in (1, 2):
            data = state.read() or {}
            if data.get("status") in ("missing", "failed"):
                state.failure = str(data.get("reason"))
                self._unavailable(state.failure)
            server = self.engine.from_json(data)
            try:
                self.engine.wait_ready(server)
            except ServerError as exc:
                taken = "address already in use" in str(exc).lower()
                if attempt == 1 and taken and self._restart_if_port_taken(state, data):
                    continue
                state.failure = f"the {self.engine.label} did not start: {exc}"
                with state.locked():
                    state.write({**data, "status": "failed", "reason": state.failure})
                self._unavailable(state.failure)
            with state.locked():
                now = state.read() or {}
                if now.get("status") == "starting" and now.get("pgid") == data.get("pgid"):
                    started = float(str(now.get("started_at", time.time())))
                    state.write({**now, "status": "ready", "ready_s": time.time() - started})
            state.server = self.found(server)
            return state.server
        raise AssertionError("unreachable")

    def summary(self, config: pytest.Config) -> str | None:
        """One line for the run's summary: how long the real server took to answer."""
        state = config.stash.get(self.key, None)
        data = state.read() if state is not None and state.owner else None
        if data is None:
            return None
        if data.get("status") == "ready":
            return (
                f"{self.engine.label} answered {float(str(data['ready_s'])):.0f} s "
                f"after its start ({data['url']})"
            )
        return f"{self.engine.label}: {data.get('status')}: {data.get('reason', '')}"
