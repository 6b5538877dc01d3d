"""The monitor fed from a recording: the live app with playback keys and a timeline line.

:class:`ReplayApp` is :class:`~sparktop.ui.app.SparktopApp` with no sources and no alert
engine: samples come from :class:`~sparktop.record.replay.ReplaySource` steps, the alert bar
and events pane show the alerts recorded at the time, and the clock is the recording's.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widgets import Static

from sparktop import gcpolicy
from sparktop.cluster import ClusterState
from sparktop.plan import Plan
from sparktop.record.replay import Pacer, ReplaySource, Step
from sparktop.safe_text import held_warnings
from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.event_log import EventLog

RENDER_EVERY_S = 0.25
"""At high speed, render at most this often (ticks in between are still applied)."""


class ReplayApp(SparktopApp):
    """The monitor replaying a recording at ``speed``; see ``sparktop replay --help``."""

    # Priority, so the Nodes table's own left/right/home do not take them; off while a budget
    # field has the focus (``check_action``), so typing there still works.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_pause", "Play/pause", priority=True, id="replay.play"),
        Binding("left", "seek(-10)", "-10 s", priority=True, id="replay.back"),
        Binding("right", "seek(10)", "+10 s", priority=True, id="replay.forward"),
        Binding("shift+left", "seek(-60)", "-1 min", priority=True, id="replay.back_minute"),
        Binding("shift+right", "seek(60)", "+1 min", priority=True, id="replay.forward_minute"),
        Binding("n", "next_alert", "Next alert", id="replay.next_alert"),
        Binding("home,g", "restart", "Start", show=False, priority=True, id="replay.start"),
    ]
    PLAYBACK_ACTIONS = frozenset({"toggle_pause", "seek", "restart"})

    def __init__(
        self, source: ReplaySource, *, speed: float = 1.0, start_s: float = 0.0, **kwargs: Any
    ) -> None:
        super().__init__(
            Plan.from_header(source.recording.header),
            clock=lambda: source.time_s,
            autostart=False,
            **kwargs,
        )
        # The recording holds the alert engine's events; the UI's own would repeat them.
        self.own_events = False
        self.replay = source
        self.speed = speed
        self.start_s = start_s
        self.playing = True
        self._pacer = Pacer(speed)
        self._timer: Timer | None = None
        self._rendered_at = 0.0

    def _no_engine_text(self) -> str:
        from sparktop.ui.notices import REPLAY_NO_ENGINE_TEXT

        return REPLAY_NO_ENGINE_TEXT

    def on_mount(self) -> None:
        # Textual runs SparktopApp.on_mount after this handler (handlers run along the MRO),
        # so start playing once that is done.
        self.call_after_refresh(self._start)

    def _start(self) -> None:
        self.mount(Static("", id="timeline"), after="#header")
        self.apply(self.replay.seek(self.start_s) if self.start_s > 0 else self.replay.step())
        self._schedule()

    # -- feeding the app -------------------------------------------------------------------

    def apply(self, step: Step | None) -> None:
        """Apply a step: samples through the app's own path, recorded alerts and events."""
        if step is None:
            return
        if step.reset:
            self.state = ClusterState(self.state.history.capacity)
            self.known_gpus.clear()
            self.known_nodes.clear()
        from sparktop.record.replay import new_samples

        for tick in step.ticks:
            for sample in tuple(new_samples(self.state, tick)):
                self._record(sample)
        log = self.query_one(EventLog)
        if step.reset:
            log.events.clear()
            for event in self.replay.events_until():
                log.add(event)
        else:
            for tick in step.ticks:
                for event in tick.events:
                    log.add(event)
        last = step.last
        self.set_active_alerts(last.alerts if last is not None else ())
        self._render(force=step.reset)

    def _render(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or not self.playing or now - self._rendered_at >= RENDER_EVERY_S:
            self._rendered_at = now
            self.tick()

    def tick(self) -> None:
        super().tick()
        timeline = self.query("#timeline")
        if timeline:
            timeline.first(Static).update(self.replay.label(self.speed, not self.playing))

    # -- playback --------------------------------------------------------------------------

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if not self.playing:
            return
        delay = self.replay.delay_s(self.speed)
        if delay is None:
            self.playing = False
            self.poller.pause()
            self._render(force=True)
            return
        # Textual timers need a positive delay; a late tick goes out almost at once.
        self._timer = self.set_timer(max(0.005, self._pacer.wait_s(delay)), self._advance)

    def _advance(self) -> None:
        self._timer = None
        if not self.query(EventLog):  # shutting down: the screen is gone
            return
        self.apply(self.replay.step())
        self._schedule()

    async def on_unmount(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.playing = False

    def action_toggle_pause(self) -> None:
        self.playing = not self.playing
        if self.playing:
            self.poller.resume()
            self.paused_at = None
            if self.replay.at_end:
                self.apply(self.replay.seek_index(0))
        else:
            self.poller.pause()
        self._pacer.reset()
        self._schedule()
        self._render(force=True)

    def action_seek(self, delta_s: float) -> None:
        self.apply(self.replay.seek_by(float(delta_s)))
        self._pacer.reset()
        self._schedule()

    def action_next_alert(self) -> None:
        step = self.replay.next_alert()
        if step is None:
            self.notify("no further alert in this recording", timeout=3)
            return
        self.apply(step)
        self._pacer.reset()
        self._schedule()

    def action_restart(self) -> None:
        self.apply(self.replay.seek_index(0))
        self._pacer.reset()
        self._schedule()

    async def action_poll_now(self) -> None:
        """Nothing to poll in a replay."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "interval":
            return False  # a recording's pace is its own: no poll interval to change
        if action in self.PLAYBACK_ACTIONS and self.typing():
            return False  # space, arrows and home edit the budget field instead
        return super().check_action(action, parameters)


def run_replay_tui(
    source: ReplaySource, *, speed: float = 1.0, start_s: float = 0.0, theme: str | None = None
) -> int:
    """Run the replay until the operator quits; returns the exit code."""
    app = ReplayApp(source, speed=speed, start_s=start_s, theme=theme)
    gcpolicy.tune()  # a long-running process: see sparktop.gcpolicy
    with held_warnings():  # never written over the screen
        return int(app.run() or 0)
