"""Recording and replay: ticks as JSON lines (``.zst``/``.gz``/plain), read back for replay.

Textual-free. Write with :class:`Recorder` (background thread, bounded queue, ≤ 1 s lost on
a crash), read with :class:`Recording` (tolerates truncation and corruption), replay with
:class:`ReplaySource` (timeline, seek, jump to the next alert).
"""

from sparktop.record.reader import Recording, StopInfo, read_ticks
from sparktop.record.tick import Tick, make_header, tick_from_state
from sparktop.record.writer import Recorder

__all__ = [
    "Recorder",
    "Recording",
    "StopInfo",
    "Tick",
    "make_header",
    "read_ticks",
    "tick_from_state",
]
