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


RETRY_S = 1.0
"""How long after a stop signal its :class:`Terminated` is raised again while clean-up has
not started (it was swallowed where it landed)."""

_ALARM = getattr(signal, "SIGALRM", None)


class Stopping:
    """What :func:`raise_on_signals` yields: call :meth:`cleaning` when clean-up starts."""

    def __init__(self, signals: tuple[signal.Signals, ...]) -> None:
        self.signals = signals
        self.signum: int | None = None
        self.started = False

    def fired(self, signum: int) -> None:
        self.signum = self.signum or signum
        if _ALARM is not None and not self.started:
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)

    def cleaning(self) -> None:
        """From now on the stop signals are ignored, so clean-up is not cut short."""
        self.started = True
        if _ALARM is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s in self.signals:
            signal.signal(s, signal.SIG_IGN)


@contextmanager
def raise_on_signals(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[Stopping]:
    """Inside the block the first of ``signals`` raises :class:`Terminated` in the main
    thread, and again every :data:`RETRY_S` until the block calls :meth:`Stopping.cleaning`
    (from then on they are ignored, so clean-up is not cut short); the previous handlers come
    back afterwards. Raised again because a handler's exception can be swallowed where it
    lands (a finalizer run by the garbage collector, a callback that catches it), and a
    process deaf to its SIGTERM is stopped only by SIGKILL, its key left behind. Call from
    the main thread only."""
    stopping = Stopping(signals)

    def _raise(signum: int, frame: FrameType | None) -> None:
        stopping.fired(signum)
        raise Terminated(signum)

    def _again(signum: int, frame: FrameType | None) -> None:
        if stopping.signum is not None and not stopping.started:
            stopping.fired(stopping.signum)
            raise Terminated(stopping.signum)

    previous = {s: signal.signal(s, _raise) for s in signals}
    alarm = signal.signal(_ALARM, _again) if _ALARM is not None else None
    try:
        yield stopping
    finally:
        if _ALARM is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(_ALARM, alarm)
        for s, handler in previous.items():
            signal.signal(s, handler)
