"""Files sparktop writes (``--record``, ``--alert-log``, ``snapshot --plot``, the sweep's runs
file): never through a symbolic link.

A link planted where the operator asked for a recording (``run.jsonl → ~/.bashrc``) would make
sparktop truncate or append to the link's target, so the last path component is opened with
``O_NOFOLLOW`` (and a new file with ``O_EXCL``); a recording that already exists is kept unless
the operator says ``--force``. Errors are :class:`~sparktop.errors.UserError` (exit 2), one
line naming the option and the path.

A FIFO is refused too, at once: opened for writing it would block until a reader came (a
``--alert-log`` at a FIFO nobody read hung the monitor before it started), and a reader that
stops reading would stall every write after. Files are opened ``O_NONBLOCK`` so that even a
FIFO without a reader answers at once (``ENXIO``); a character device (``/dev/null``) is kept.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

from sparktop.errors import UserError

_FLAGS = os.O_WRONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
_NOT_A_FILE = "{option}: {path} is {kind}, not a regular file; pass a file to write"


def _checked(fd: int, path: Path, option: str) -> int:
    """``fd`` made blocking again, or closed and refused when it is a FIFO or a socket."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        os.close(fd)
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket"
        raise UserError(_NOT_A_FILE.format(option=option, path=path, kind=kind))
    os.set_blocking(fd, True)
    return fd


def _refuse(option: str, verb: str, path: Path, exc: OSError) -> UserError:
    if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and path.is_symlink()):
        return UserError(f"{option}: {path} is a symbolic link; not writing through it")
    if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP) and not path.is_symlink():
        # O_NONBLOCK on a FIFO without a reader (ENXIO), or a socket (ENXIO/EOPNOTSUPP).
        kind = "a FIFO with no reader" if path.is_fifo() else "a socket"
        return UserError(_NOT_A_FILE.format(option=option, path=path, kind=kind))
    return UserError(f"{option}: cannot {verb} {path}: {exc.strerror or exc}")


def create_file(
    path: Path, option: str, *, force: bool = False, exists_hint: str = "--force replaces it"
) -> IO[bytes]:
    """A new file at ``path`` for writing (binary). An existing file is refused unless
    ``force`` (then it is truncated), the message ending with ``exists_hint`` (what to do
    instead); a symbolic link is refused either way."""
    path = path.expanduser()
    flags = _FLAGS | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError as exc:
        if path.is_symlink():
            raise _refuse(option, "create", path, exc) from None
        raise UserError(f"{option}: {path} exists; not overwriting it ({exists_hint})") from None
    except OSError as exc:
        raise _refuse(option, "create", path, exc) from None
    fd = _checked(fd, path, option)
    try:
        return os.fdopen(fd, "wb")
    except OSError as exc:
        os.close(fd)
        raise _refuse(option, "write", path, exc) from None


def append_file(path: Path, option: str) -> IO[str]:
    """``path`` opened to append UTF-8 text (created when missing); a symbolic link, a FIFO
    or a socket is refused."""
    path = path.expanduser()
    try:
        fd = os.open(path, _FLAGS | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise _refuse(option, "open", path, exc) from None
    fd = _checked(fd, path, option)
    try:
        # Append mode seeks to the end first: a file that cannot (/proc/self/status: EINVAL)
        # is refused here, before the run, not as a traceback when the first line is written.
        return os.fdopen(fd, "a", encoding="utf-8")
    except OSError as exc:
        os.close(fd)
        raise _refuse(option, "append to", path, exc) from None
