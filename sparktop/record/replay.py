"""Replay: a timeline over a recording, with play, seek and jump-to-next-alert.

:class:`ReplaySource` moves a position over the ticks of a :class:`Recording` and hands out
:class:`Step` s: the ticks to apply to the consumer's cluster state (after clearing it when
``reset``). Seeking backwards (or far forwards) rebuilds the state from the
``rebuild_ticks`` ticks before the target, so history (sparklines, KV slope) is there again
without decoding the whole file. A tick that fails to decode ends the recording there, like
damage found while reading.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass

from sparktop.alerts.model import Event
from sparktop.cluster import ClusterState
from sparktop.model import Sample
from sparktop.record.codec import CodecError
from sparktop.record.reader import Recording, StopInfo
from sparktop.record.tick import Tick

REBUILD_TICKS = 120
"""Ticks replayed into a fresh state after a seek (2 minutes of history at 1 Hz)."""

MAX_GAP_S = 5.0
"""Longest wait between two ticks during play (a recording paused for an hour plays on)."""


@dataclass(frozen=True, slots=True)
class Step:
    """Ticks to apply, oldest first; clear the state first when ``reset``."""

    reset: bool
    ticks: tuple[Tick, ...]

    @property
    def last(self) -> Tick | None:
        return self.ticks[-1] if self.ticks else None


def new_samples(state: ClusterState, tick: Tick) -> Iterator[Sample]:
    """The tick's samples that ``state`` has not seen yet (a tick repeats unchanged ones)."""
    for node in tick.nodes:
        seen = state.nodes.get(node.node)
        if seen is None or seen.time_s != node.time_s:
            yield node
    for engine in tick.engines:
        seen_e = state.engines.get(engine.engine)
        if seen_e is None or seen_e.time_s != engine.time_s:
            yield engine


def apply_step(state: ClusterState, step: Step) -> ClusterState:
    """Apply a step to ``state`` (or to a fresh one when ``reset``); returns the state used."""
    target = ClusterState(state.history.capacity) if step.reset else state
    for tick in step.ticks:
        for sample in tuple(new_samples(target, tick)):
            target.apply(sample)
    return target


def clock_text(offset_s: float) -> str:
    """``1:02:03`` or ``02:03``."""
    whole = max(0, int(offset_s))
    hours, rest = divmod(whole, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes:02d}:{seconds:02d}"


class ReplaySource:
    """A position over a recording. ``index`` is the tick last handed out (-1 before play)."""

    def __init__(self, recording: Recording, *, rebuild_ticks: int = REBUILD_TICKS) -> None:
        self.recording = recording
        self.rebuild_ticks = rebuild_ticks
        self.index = -1

    # -- where we are ----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.recording)

    @property
    def start_s(self) -> float:
        return self.recording.time_s(0) if len(self) else 0.0

    @property
    def duration_s(self) -> float:
        return self.recording.time_s(len(self) - 1) - self.start_s if len(self) else 0.0

    @property
    def time_s(self) -> float:
        """Wall-clock time of the current tick (the recording's start before play)."""
        return self.recording.time_s(self.index) if self.index >= 0 else self.start_s

    @property
    def position_s(self) -> float:
        return self.time_s - self.start_s

    @property
    def at_end(self) -> bool:
        return self.index >= len(self) - 1

    @property
    def stop(self) -> StopInfo | None:
        return self.recording.stop

    def current(self) -> Tick | None:
        return self._tick(self.index) if self.index >= 0 else None

    def label(self, speed: float, paused: bool) -> str:
        """``▶ 10× 00:42 / 10:00`` plus ``end of recording`` or where a damaged one stopped."""
        mark = "⏸" if paused else "▶"
        text = f"{mark} {speed:g}× {clock_text(self.position_s)} / {clock_text(self.duration_s)}"
        if self.at_end:
            text += "  end of recording"
            if self.stop is not None:
                text += f" ({self.stop})"
        return text

    # -- moving ----------------------------------------------------------------------------

    def step(self) -> Step | None:
        """The next tick, or None at the end."""
        if self.at_end:
            return None
        tick = self._tick(self.index + 1)
        if tick is None:
            return None
        self.index += 1
        return Step(False, (tick,))

    def delay_s(self, speed: float) -> float | None:
        """Recorded gap to the next tick ÷ ``speed`` (capped at :data:`MAX_GAP_S`); None at end."""
        if self.at_end:
            return None
        if self.index < 0:
            return 0.0
        gap = self.recording.time_s(self.index + 1) - self.recording.time_s(self.index)
        return min(MAX_GAP_S, max(0.0, gap)) / max(speed, 1e-6)

    def seek_index(self, target: int) -> Step:
        """Go to tick ``target`` (clamped); the step brings a state there."""
        target = max(0, min(len(self) - 1, target))
        if target > self.index and target - self.index <= self.rebuild_ticks:
            first, reset = self.index + 1, False
        else:
            first, reset = max(0, target - self.rebuild_ticks + 1), True
        ticks = []
        for i in range(first, target + 1):
            tick = self._tick(i)
            if tick is None:
                break
            ticks.append(tick)
        self.index = first + len(ticks) - 1 if ticks else min(self.index, len(self) - 1)
        return Step(reset, tuple(ticks))

    def seek(self, offset_s: float) -> Step:
        """Go to the last tick at or before ``offset_s`` from the start."""
        times = [self.recording.time_s(i) for i in range(len(self))]
        target = bisect.bisect_right(times, self.start_s + offset_s) - 1
        return self.seek_index(max(0, target))

    def seek_by(self, delta_s: float) -> Step:
        """Move ``delta_s`` seconds (negative: back) from the current position."""
        return self.seek(self.position_s + delta_s)

    def next_alert(self) -> Step | None:
        """Jump to the next tick where an alert fires or escalates; None when there is none."""
        for i in range(self.index + 1, len(self)):
            if self.recording.has_alert_events(i):
                return self.seek_index(i)
        return None

    def events_until(self, index: int | None = None, limit: int = 200) -> list[Event]:
        """Recorded alert events up to tick ``index`` (default: current), oldest first."""
        end = self.index if index is None else index
        found: list[Event] = []
        for i in range(end, -1, -1):
            if self.recording.event_count(i):
                tick = self._tick(i)
                if tick is not None:
                    found[:0] = tick.events
                if len(found) >= limit:
                    break
        return found[-limit:]

    def decode_ticks(self, count: int | None = None) -> None:
        """Decode the first ``count`` ticks (default all) as a replay playing them would: the
        first that does not decode ends the recording there (:attr:`stop` says where and
        why). For the text summary, which otherwise decodes only the ticks holding alert
        events, and for a check before the monitor starts."""
        for i in range(len(self) if count is None else min(count, len(self))):
            if self._tick(i) is None:
                break

    def _tick(self, index: int) -> Tick | None:
        if index >= len(self):
            return None
        try:
            return self.recording.tick(index)
        except (CodecError, ValueError) as exc:
            self.recording.truncate(index, f"tick does not decode: {exc}")
            return None


class Pacer:
    """Wall-clock pacing for play: how long to wait before the next tick at ``speed``."""

    def __init__(self, speed: float) -> None:
        self.speed = speed
        self._due = time.monotonic()

    def wait_s(self, delay_s: float) -> float:
        """Seconds to sleep so ticks keep the recorded rhythm without drifting."""
        self._due = max(self._due + delay_s, time.monotonic() - 1.0)
        return max(0.0, self._due - time.monotonic())

    def reset(self) -> None:
        self._due = time.monotonic()
