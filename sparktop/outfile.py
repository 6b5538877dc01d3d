"""Files the monitor writes (``--record``, ``--alert-log``): never through a symbolic link.

A link planted where the operator asked for a recording (``run.jsonl → ~/.bashrc``) would make
sparktop truncate or append to the link's target, so the last path component is opened with
``O_NOFOLLOW`` (and a new file with ``O_EXCL``); a recording that already exists is kept unless
the operator says ``--force``. Errors are :class:`~sparktop.errors.UserError` (exit 2), one
line naming the option and the path.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import IO

from sparktop.errors import UserError

_FLAGS = os.O_WRONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def _refuse(option: str, verb: str, path: Path, exc: OSError) -> UserError:
    if exc.errno == errno.ELOOP or (exc.errno == errno.EEXIST and path.is_symlink()):
        return UserError(f"{option}: {path} is a symbolic link; not writing through it")
    return UserError(f"{option}: cannot {verb} {path}: {exc.strerror or exc}")


def create_file(path: Path, option: str, *, force: bool = False) -> IO[bytes]:
    """A new file at ``path`` for writing (binary). An existing file is refused unless
    ``force`` (then it is truncated); a symbolic link is refused either way."""
    path = path.expanduser()
    flags = _FLAGS | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError as exc:
        if path.is_symlink():
            raise _refuse(option, "create", path, exc) from None
        raise UserError(
            f"{option}: {path} exists; not overwriting it (--force replaces it)"
        ) from None
    except OSError as exc:
        raise _refuse(option, "create", path, exc) from None
    return os.fdopen(fd, "wb")


def append_file(path: Path, option: str) -> IO[str]:
    """``path`` opened to append UTF-8 text (created when missing); a symbolic link is
    refused."""
    path = path.expanduser()
    try:
        fd = os.open(path, _FLAGS | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise _refuse(option, "open", path, exc) from None
    return os.fdopen(fd, "a", encoding="utf-8")
