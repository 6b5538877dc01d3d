"""Bounded time series (ring buffers) for sparklines, plots, rates and alert rules."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from itertools import islice


class Series:
    """A fixed-capacity series of ``(time_s, value)`` points; old points fall off the front."""

    __slots__ = ("_points",)

    def __init__(self, capacity: int) -> None:
        self._points: deque[tuple[float, float]] = deque(maxlen=capacity)

    def append(self, time_s: float, value: float) -> None:
        self._points.append((time_s, value))

    def __len__(self) -> int:
        return len(self._points)

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return iter(self._points)

    def values(self, last: int | None = None) -> tuple[float, ...]:
        """The newest ``last`` values (all when None), oldest first, as a fresh tuple."""
        if last is not None and last <= 0:
            return ()  # list[-0:] would be the whole series
        points = self._points
        if last is None or last >= len(points):
            return tuple(v for _, v in points)
        # From the newest end: a sparkline's few points cost a few, not the whole series.
        newest = [v for _, v in islice(reversed(points), last)]
        newest.reverse()
        return tuple(newest)

    def span_s(self, last: int | None = None) -> float:
        """Seconds from the oldest of the newest ``last`` points (all when None) to the
        newest: the time a plot of :meth:`values` with the same ``last`` covers (0 with
        fewer than two points)."""
        points = self._points
        n = len(points) if last is None else min(last, len(points))
        if n < 2:
            return 0.0
        return points[-1][0] - points[-n][0]

    def since(self, time_s: float) -> tuple[tuple[float, float], ...]:
        """Points at or after ``time_s``."""
        return tuple(p for p in self._points if p[0] >= time_s)

    @property
    def last(self) -> tuple[float, float] | None:
        return self._points[-1] if self._points else None


class History:
    """Series keyed by ``(subject, metric)``, e.g. ``("spark-1/GPU-…", "sm_clock_mhz")``.

    Every series has the same capacity, so memory is bounded by subjects × metrics × capacity.
    """

    def __init__(self, capacity: int = 600) -> None:
        self.capacity = capacity
        self._series: dict[tuple[str, str], Series] = {}

    def add(self, subject: str, metric: str, time_s: float, value: float) -> None:
        key = (subject, metric)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = Series(self.capacity)
        series.append(time_s, value)

    def get(self, subject: str, metric: str) -> Series:
        """The series, or an empty one (not stored) when nothing was recorded."""
        return self._series.get((subject, metric)) or Series(1)

    def __len__(self) -> int:
        return len(self._series)

    def point_count(self) -> int:
        return sum(len(s) for s in self._series.values())
