"""Simulated time: a monotonic clock that can run faster than the wall clock (tests, demos)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class SimClock:
    """Seconds of simulated time since the clock was created, ``speed`` × wall time.

    ``speed`` may change while running; simulated time stays continuous. ``epoch_s`` maps
    simulated time onto a Unix timestamp (for ``process_start_time_seconds`` and the like).
    ``wall`` is injectable so tests can drive the clock by hand.
    """

    def __init__(self, speed: float = 1.0, *, wall: Callable[[], float] = time.monotonic) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self._wall = wall
        self._speed = float(speed)
        self._wall0 = wall()
        self._sim0 = 0.0
        self._epoch0 = time.time()
        self._paused_at: float | None = None

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        if value <= 0:
            raise ValueError(f"speed must be positive, got {value}")
        if self._paused_at is not None:
            self._speed = float(value)
            return
        self._sim0 = self.now()
        self._wall0 = self._wall()
        self._speed = float(value)

    def now(self) -> float:
        """Simulated seconds since start (frozen while paused)."""
        if self._paused_at is not None:
            return self._paused_at
        return self._sim0 + (self._wall() - self._wall0) * self._speed

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def pause(self) -> None:
        """Freeze simulated time (the model stops; servers still answer from its state)."""
        if self._paused_at is None:
            self._paused_at = self.now()

    def resume(self) -> None:
        if self._paused_at is not None:
            self._sim0, self._wall0 = self._paused_at, self._wall()
            self._paused_at = None

    def epoch_s(self, sim_s: float | None = None) -> float:
        """The Unix time a simulated instant corresponds to (default: now)."""
        return self._epoch0 + (self.now() if sim_s is None else sim_s)

    def wall_s(self, sim_s: float) -> float:
        """How many wall seconds a simulated duration takes at the current speed."""
        return sim_s / self._speed

    async def sleep(self, sim_s: float) -> None:
        """Sleep for a simulated duration."""
        await asyncio.sleep(max(0.0, sim_s) / self._speed)
