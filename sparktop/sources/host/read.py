"""This machine's host files (:data:`~sparktop.sources.probe.HOST_FILES`) read the way the
probe's ``grep -sH .`` prints them, so the local source and SSH nodes share one parser.

Each file is read with a size bound; a file that cannot be read (missing, permission,
``EINVAL`` from a driver) is skipped, like ``grep -s`` does. ``root`` prefixes every path
(tests point it at a directory shaped like ``/sys``); the printed paths are without it.
"""

from __future__ import annotations

import glob

from sparktop.sources.probe import HOST_FILES, HOST_MAX_LINES

FILE_MAX_BYTES = 4096
"""A sysfs attribute is at most one page."""


def read_host_files(root: str = "", max_lines: int = HOST_MAX_LINES) -> str:
    """``path:line`` for every non-empty line of every file the globs match (blocking: call it
    in a worker thread)."""
    out: list[str] = []
    for pattern in HOST_FILES:
        for path in sorted(glob.glob(root + pattern)):
            try:
                with open(path, "rb") as f:
                    data = f.read(FILE_MAX_BYTES)
            except OSError:
                continue
            shown = path[len(root) :] if root else path
            for line in data.decode("utf-8", "replace").splitlines():
                if line.strip():
                    out.append(f"{shown}:{line}")
                    if len(out) >= max_lines:
                        return "\n".join(out) + "\n"
    return "\n".join(out) + ("\n" if out else "")
