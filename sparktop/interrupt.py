"""Ctrl-C ends any command with status 130 and no traceback, from the first instant.

Python turns SIGINT into ``KeyboardInterrupt`` wherever the main thread happens to be; while
the command line and its modules are still being imported (over half a second on a busy
machine) that is inside an import, outside every handler, and prints a traceback (the shell
then sees the process killed by the signal). The entry point (:mod:`sparktop.__main__`)
installs :func:`exit_at_once` before importing anything else: until a command runs, Ctrl-C
ends the process there and then (nothing is open yet). :func:`interruptible` brings the usual
``KeyboardInterrupt`` back while a command runs, so it can close connections, stop the
simulator and restore the terminal, and ``main`` turns it into 130.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_INTERRUPTED = 128 + signal.SIGINT
"""The shell's status for a command ended by Ctrl-C (130)."""


def exit_at_once(signum: int, frame: FrameType | None) -> None:
    """SIGINT handler for the start-up: end the process now, quietly, with status 130."""
    os._exit(EXIT_INTERRUPTED)


def install_early() -> None:
    """Make Ctrl-C exit 130 at once (call first thing in the entry point, main thread)."""
    signal.signal(signal.SIGINT, exit_at_once)


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block Ctrl-C raises ``KeyboardInterrupt`` (so clean-up runs); after it,
    the start-up handler is back for the exit. A no-op unless :func:`install_early` ran
    (an in-process caller of ``main`` keeps its own handling)."""
    if signal.getsignal(signal.SIGINT) is not exit_at_once:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, exit_at_once)
