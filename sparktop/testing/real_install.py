"""What installing any real engine for the tests needs: the cache folder, its lock, logged
steps with their seconds, and the install record read back.

Each real engine (:mod:`~sparktop.testing.real_vllm`, :mod:`~sparktop.testing.real_llamacpp`)
keeps one folder under ``${SPARKTOP_REAL_CACHE:-~/.cache/sparktop}``, holds its ``.lock``
while installing (two runs sharing the cache do not collide), appends every step's output to
its ``install.log`` and writes its ``install.json`` last (present = installed).

Standard library only: ``.ci/run`` runs the installers before sparktop's environment exists.
Errors: :class:`InstallError` with the failing step and the tail of its output.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

Note = Callable[[str], None]
"""Says one line of progress (to stderr, or nowhere)."""


class InstallError(RuntimeError):
    """An install step failed; the message names the step and ends with its output's tail."""


@dataclass(frozen=True)
class CacheFolder:
    """One real engine's cache folder: its install record and install log."""

    root: Path

    @property
    def stamp(self) -> Path:
        """``install.json``, written last: present = installed."""
        return self.root / "install.json"

    @property
    def log(self) -> Path:
        """``install.log``: every step's command and output."""
        return self.root / "install.log"


def cache_dir(name: str) -> Path:
    """``$SPARKTOP_REAL_CACHE`` (else ``~/.cache/sparktop``) / ``name``."""
    base = os.environ.get("SPARKTOP_REAL_CACHE") or str(Path.home() / ".cache" / "sparktop")
    return Path(base).expanduser() / name


def read_json(path: Path) -> dict[str, object] | None:
    """A JSON object from ``path``; None if missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def write_json(path: Path, record: dict[str, object]) -> None:
    """``record`` as indented JSON (an install record or model stamp, written last)."""
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log (empty if unreadable)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def now_utc() -> str:
    """The time as install records write it (``2026-12-05T04:38:29Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@contextlib.contextmanager
def locked(root: Path) -> Iterator[None]:
    """Hold ``root/.lock`` (made with ``root`` if missing) for the block."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_step(
    log: Path,
    step: str,
    argv: list[str],
    timeout_s: float,
    *,
    error: type[InstallError] = InstallError,
    cwd: Path | None = None,
) -> str:
    """Run one step, appending its command and stderr to ``log``; its stdout is returned
    (and logged). Raises ``error`` naming the step: a missing program, no result after
    ``timeout_s``, or a non-zero exit with the log's tail."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n=== {step}: {' '.join(argv)}\n")
        out.flush()
        try:
            done = subprocess.run(
                argv,
                stdout=subprocess.PIPE,
                stderr=out,
                text=True,
                timeout=timeout_s,
                check=False,
                cwd=None if cwd is None else str(cwd),
                env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            )
        except FileNotFoundError as exc:
            raise error(f"{step}: {argv[0]} is not installed") from exc
        except subprocess.TimeoutExpired as exc:
            raise error(f"{step}: no result after {timeout_s:.0f} s") from exc
        out.write(done.stdout)
    if done.returncode != 0:
        raise error(f"{step} failed (exit {done.returncode}); the end of {log}:\n{tail(log)}")
    return done.stdout


class Timer:
    """Times one step into ``seconds[name]`` (when it succeeds) and says its start and end."""

    def __init__(self, seconds: dict[str, float], note: Note, name: str) -> None:
        self.seconds, self.note, self.name = seconds, note, name

    def __enter__(self) -> None:
        self.note(f"{self.name} ...")
        self.started = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        taken = time.monotonic() - self.started
        if exc[0] is None:
            self.seconds[self.name] = round(taken, 1)
            self.note(f"{self.name} done in {taken:.0f} s")


def say(prefix: str, enabled: bool) -> Note:
    """A :data:`Note` printing ``prefix: text`` to stderr, or a silent one."""

    def note(text: str) -> None:
        if enabled:
            print(f"{prefix}: {text}", file=sys.stderr, flush=True)

    return note
