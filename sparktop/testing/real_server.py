"""Run a real engine's server for the tests: on a free 127.0.0.1 port, in a process group
of its own under a tiny supervisor, waited for until it answers, and stopped as a group.

The supervisor ends the whole group (an API server, its engine core, its workers) when the
process it watches ends, so a killed test run never leaves a 3 GB server behind. Used by
:mod:`~sparktop.testing.real_vllm_server` and :mod:`~sparktop.testing.real_llamacpp_server`.

Standard library only. Errors: :class:`ServerError` with the tail of the server's log.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from sparktop.testing.real_install import tail

# The supervisor: runs the server (argv after "--") in this process group and ends the group
# when the watched pid or the server ends. pidfds make both waits events; /proc polling only
# where pidfd_open is missing.
_SUPERVISOR = r"""
import os, select, signal, subprocess, sys, time
watch = int(sys.argv[1])
def default_signals():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
# The group's SIGTERM is for the server; the supervisor stays to finish the job.
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
child = subprocess.Popen(sys.argv[3:], preexec_fn=default_signals)
def watched_gone():
    try:
        with open(f"/proc/{watch}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True
def others():
    me, group, found = os.getpid(), os.getpgrp(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group and fields[0] != "Z":
                found.append(int(entry))
    return found
try:
    child_fd = os.pidfd_open(child.pid)
    watch_fd = os.pidfd_open(watch) if watch else -1
    while child.poll() is None:
        ready, _, _ = select.select([child_fd] + ([watch_fd] if watch else []), [], [])
        if watch_fd in ready:
            break
except OSError:
    while child.poll() is None and not (watch and watched_gone()):
        time.sleep(1)
os.killpg(0, signal.SIGTERM)
deadline = time.monotonic() + 20
while others() and time.monotonic() < deadline:
    time.sleep(0.2)
code = child.poll()
if others():
    os.killpg(0, signal.SIGKILL)
sys.exit(code if code is not None else 1)
"""


# Supervisors this process started, so their exit is reaped rather than left as a zombie
# that keeps the process group "alive".
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class ServerError(RuntimeError):
    """The server did not start or answer; the message ends with its log's tail."""


@dataclass(frozen=True)
class RealServer:
    """A started server: its URL, port, process group (the supervisor's pid) and log file."""

    url: str
    port: int
    pgid: int
    log: Path
    model: str = ""
    """The served model name (each engine's subclass sets its own)."""

    def to_json(self) -> dict[str, object]:
        return {"url": self.url, "port": self.port, "pgid": self.pgid, "log": str(self.log)}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Self:
        return cls(
            url=str(data["url"]),
            port=int(str(data["port"])),
            pgid=int(str(data["pgid"])),
            log=Path(str(data["log"])),
        )

    def alive(self) -> bool:
        """True while any process of the server's group exists."""
        return group_alive(self.pgid)

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM to the whole group, SIGKILL what is left after ``timeout_s``."""
        stop_group(self.pgid, timeout_s)


def wait_ready(
    server: RealServer,
    ready: Callable[[str], bool],
    *,
    what: str,
    timeout_s: float,
    poll_s: float,
    error: type[ServerError] = ServerError,
) -> float:
    """Block until ``ready(server.url)``; the seconds waited. Raises ``error`` (named by
    ``what``, e.g. "the vLLM server") with the log's tail if the server exits first or does
    not answer within ``timeout_s``."""
    started = time.monotonic()
    deadline = started + timeout_s
    while True:
        if ready(server.url):
            return time.monotonic() - started
        if not server.alive():
            raise error(f"{what} exited before answering\n{tail(server.log, 30)}")
        if time.monotonic() > deadline:
            raise error(
                f"{what} did not answer on {server.url} within {timeout_s:.0f} s\n"
                f"{tail(server.log, 30)}"
            )
        # Nothing to await across processes: the port answering is the event.
        time.sleep(poll_s)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_supervised(
    argv: list[str], log: Path, *, watch_pid: int, env: dict[str, str], cwd: Path
) -> int:
    """Run ``argv`` under the supervisor in a new process group; the group's id.

    Output (the supervisor's and the program's) goes to ``log``. The group is ended when
    ``watch_pid`` ends (0: never) or the program exits.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", _SUPERVISOR, str(watch_pid), "--", *argv],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **env},
            cwd=str(cwd),
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` exists (our own exited child is reaped)."""
    child = _CHILDREN.get(pgid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pgid]
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(pgid: int, timeout_s: float = 30.0) -> None:
    """SIGTERM to process group ``pgid``, then SIGKILL if it outlives ``timeout_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    child = _CHILDREN.pop(pgid, None)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(5)
