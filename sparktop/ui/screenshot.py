"""Palette → Screenshot: an SVG of the screen in the working directory (or a given folder).

Textual saves to the user's Downloads folder, which servers do not have ("Failed to save
screenshot"). Here the file goes where the monitor was started, is never written through a
symbolic link or over an existing file, and a notification says where it went (or why not).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from textual.app import App

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def save_screenshot(
    app: App[Any], filename: str | None = None, path: str | None = None
) -> Path | None:
    """Write the screen as SVG to ``path`` (default: the working directory) and notify where;
    None (and an error notification naming the folder) when it cannot be written."""
    folder = Path(path).expanduser() if path else Path.cwd()
    stamp = datetime.now().strftime("%Y-%m-%dT%H_%M_%S")
    name = filename or f"sparktop_{stamp}.svg"
    target = folder / name
    try:
        fd = os.open(target, _FLAGS, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(app.export_screenshot())
    except OSError as exc:
        app.notify(
            f"screenshot not saved to {folder}: {exc.strerror or exc}",
            title="Screenshot",
            severity="error",
        )
        return None
    app.notify(f"screenshot saved to {target.absolute()}", title="Screenshot")
    return target
