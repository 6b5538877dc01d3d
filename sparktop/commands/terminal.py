"""The monitor draws a full screen: refused when stdout is not a terminal, unless asked.

Started with its output on a pipe or a file (``sparktop -i c.yaml | head``), a full-screen
app runs until killed while the reader waits for text, and where the screen itself goes to
the file (Textual draws on stderr: ``2>&1``) the file fills with escape sequences. Every
command that opens a screen (the monitor, ``demo``, ``replay``) checks stdout and stderr first
and points at the command that prints.
"""

from __future__ import annotations

import argparse
import sys

from sparktop.errors import UserError

FORCE_HELP = (
    "open the screen even when stdout is not a terminal (by default a pipe or a file is "
    "refused, pointing at the command that prints instead)"
)


def add_force_tui(parser: argparse.ArgumentParser) -> None:
    """``--force-tui`` on a parser whose command opens the monitor."""
    parser.add_argument("--force-tui", action="store_true", help=FORCE_HELP)


def require_terminal(args: argparse.Namespace, instead: str) -> None:
    """Raise a :class:`~sparktop.errors.UserError` (exit 2) naming ``instead`` (the command
    for a pipe or a file) when stdout or stderr is not a terminal and ``--force-tui`` was not
    given."""
    if getattr(args, "force_tui", False):
        return
    streams = {"stdout": sys.__stdout__, "stderr": sys.__stderr__}
    off = [name for name, stream in streams.items() if stream is None or not stream.isatty()]
    if not off:
        return
    raise UserError(
        f"{off[0]} is not a terminal: the monitor draws a full screen; for a pipe or a file use "
        f"'{instead}' (or --force-tui to draw anyway)"
    )
