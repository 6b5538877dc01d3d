"""SIGHUP and SIGTERM stop ``sparktop sim`` and ``sparktop demo`` the way Ctrl-C does.

Both commands keep a client private key in a temporary directory that must not outlive them;
without a handler, closing the terminal (SIGHUP) or ``kill`` (SIGTERM) ends the process
before any ``finally`` runs. Under :func:`raise_on_signals` those signals raise
:class:`Terminated` in the main thread instead, so the usual clean-up paths run.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    s for s in (getattr(signal, "SIGHUP", None), signal.SIGTERM) if s is not None
)
"""The signals handled like Ctrl-C (SIGHUP does not exist on Windows)."""


class Terminated(KeyboardInterrupt):
    """A stop signal arrived. A ``KeyboardInterrupt`` so that code stopping on Ctrl-C stops
    on it too; ``exit_code`` is the shell's ``128 + signal number``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum


@contextmanager
def raise_on_signals(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Inside the block, the first of ``signals`` raises :class:`Terminated` in the main
    thread and later ones are ignored (so clean-up is not cut short); the previous handlers
    come back afterwards. Call from the main thread only."""

    def _raise(signum: int, frame: FrameType | None) -> None:
        for s in signals:
            signal.signal(s, signal.SIG_IGN)
        raise Terminated(signum)

    previous = {s: signal.signal(s, _raise) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
