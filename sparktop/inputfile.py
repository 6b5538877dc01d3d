"""Read a small input file (an inventory, a profile) that may be a pipe, without hanging.

``--inventory <(sops -d cluster.yaml)`` hands over ``/dev/fd/63``: an inherited pipe whose
writer exists, so it is read to the end however long the writer takes, as ``cat`` would.
A *named* FIFO may have no writer at all (``mkfifo f; sparktop --inventory f``): opening it
normally blocks until one comes, forever. Here it is opened non-blocking and given
``FIFO_WAIT_S`` for something to be written (or a writer to come and go); after that the
read fails with one line naming the file instead of hanging. A terminal is refused (it would
wait for typing); sockets cannot be opened at all. Regular files and devices that answer at
once (``/dev/null``, ``/dev/zero``) read as before, up to the caller's byte limit.
"""

from __future__ import annotations

import errno
import os
import select
import stat
from pathlib import Path

FIFO_WAIT_S = 2.0
"""Seconds a named FIFO (or a device) gets for its first byte or end of input; long enough
for ``mkfifo f; sparktop … f & cat x.yaml > f``, short enough to be an answer."""

_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_NOCTTY", 0)
)  # fmt: skip
_CHUNK = 64 * 1024


def read_limited(path: str | Path, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``path`` (a caller passes its maximum + 1 to tell "too large").

    Raises ``FileNotFoundError``, ``IsADirectoryError``, ``PermissionError`` as ``open`` does,
    and ``OSError`` whose ``strerror`` says what is wrong for a socket, a terminal, or a named
    FIFO (or a device) with nothing to read within :data:`FIFO_WAIT_S`.
    """
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISSOCK(_mode(path)):
            raise OSError(errno.ENXIO, "a socket, not a file", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            _wait_for_input(fd, path, mode)
            os.set_blocking(fd, True)
        return _read(fd, limit)
    finally:
        os.close(fd)


def _mode(path: str | Path) -> int:
    try:
        return os.stat(path).st_mode
    except OSError:
        return 0


def _wait_for_input(fd: int, path: str | Path, mode: int) -> None:
    """Return once ``fd`` has input or is at its end; a pipe inherited from the shell (process
    substitution, ``/dev/stdin``) has a writer, so it is waited for without a limit."""
    if os.isatty(fd):
        raise OSError(errno.ENOTTY, "a terminal, not a file", str(path))
    if _inherited_pipe(fd, path):
        return
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if not poller.poll(FIFO_WAIT_S * 1000):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device"
        raise OSError(
            errno.EAGAIN,
            f"{kind} with nothing written to it in {FIFO_WAIT_S:g} s (no writer?); "
            "pass a regular file, or a pipe with a writer such as <(cat FILE)",
            str(path),
        )


def _inherited_pipe(fd: int, path: str | Path) -> bool:
    """True for an anonymous pipe (``pipe:[…]`` in /proc), not a FIFO on a filesystem; where
    /proc is missing, judged by the path the shell gave (``/dev/fd/N``, ``/dev/stdin``)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
    except OSError:
        return str(path).startswith(("/dev/fd/", "/dev/stdin"))


def _read(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(_CHUNK, left))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
