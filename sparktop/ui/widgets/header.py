"""HeaderBar (cluster, profile, poll interval, sample age, flags) and AlertBar (active alerts)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rich.cells import get_character_cell_size
from textual.content import Content

from sparktop.ui import format as fmt
from sparktop.ui.events import AlertLike
from sparktop.ui.widgets.text_block import TextBlock


class HeaderBar(TextBlock):
    """One line: cluster name, profile, poll interval, age of the newest sample, flags."""

    DEFAULT_CSS = """
    HeaderBar {
        height: 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        background: $spark-header-background;
        color: $spark-header-foreground;
        padding: 0 1;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self._shown: tuple[object, ...] | None = None
        self._args: tuple[str, str, float, float | None, bool, bool, bool] | None = None

    def show(
        self,
        cluster: str,
        profile: str,
        interval_s: float,
        newest_age_s: float | None,
        *,
        paused: bool,
        recording: bool,
        recording_failed: bool = False,
    ) -> None:
        """Update the line if anything visible changed (untrusted names are never markup).
        ``recording_failed``: the recording stopped on an error (``✗ REC``; the alert bar
        says why). Where the line is longer than the bar the profile's name is cut, or left
        out, so the sample age stays whole (an 80-column line read ``newest …``)."""
        age = fmt.age(newest_age_s)
        room = self.content_size.width
        key = (cluster, profile, interval_s, age, paused, recording, recording_failed, room)
        self._args = (cluster, profile, interval_s, newest_age_s, paused, recording,
                      recording_failed)  # fmt: skip
        if key == self._shown:
            return
        self._shown = key
        parts: list[str | tuple[str, str]] = [("sparktop", "bold")]
        # The states first: a long cluster or profile name is what an 80-column line cuts.
        if paused:
            parts += ["  ", ("⏸ PAUSED", "$spark-warn bold")]
        if recording and recording_failed:
            parts += ["  ", ("✗ REC stopped", "$spark-crit bold reverse")]
        elif recording:
            parts += ["  ", ("● REC", "$spark-crit bold")]
        if cluster != "sparktop":  # an inventory without ``cluster:``: the name once
            parts += ["  ", (cluster, "bold")]
        tail: list[str | tuple[str, str]] = [
            f"  every {interval_s:g} s",
            "  newest ",
            (age, _age_style(newest_age_s, interval_s)),
        ]
        line = Content.assemble(*parts, "  profile ", (profile, "$spark-accent"), *tail)
        over = line.cell_length - room if room else 0
        if over > 0 or not profile:
            # The profile's name is cut (with …) or, with little room left, left out.
            keep = len(profile) - over - 1
            shown: list[str | tuple[str, str]] = []
            if keep >= 8:
                shown = ["  profile ", (profile[:keep] + "…", "$spark-accent")]
            line = Content.assemble(*parts, *shown, *tail)
        self.set_content(line, layout=False)

    def on_resize(self) -> None:
        if self._args is not None:
            cluster, profile, interval_s, age_s, paused, recording, failed = self._args
            self.show(cluster, profile, interval_s, age_s, paused=paused, recording=recording,
                      recording_failed=failed)  # fmt: skip


def cut_at_word(line: Content, room: int) -> Content:
    """``line`` cut to ``room`` cells after a word, with ``…`` (``text-overflow: ellipsis``
    cut mid-word: ``SW thermal slowd…``); a word ending in the right half of the room only,
    else where it falls. ``room`` 0 (not laid out yet): ``line`` as it is."""
    if not room or line.cell_length <= room:
        return line
    plain, used, end = line.plain, 0, 0
    for index, character in enumerate(plain):
        used += get_character_cell_size(character)
        if used > room - 1:
            end = index
            break
    if plain[end] != " ":
        space = plain.rfind(" ", 0, end)
        end = space if space >= room // 2 else end
    while end > 0 and plain[end - 1] in " │:,▲✓":
        end -= 1
    return Content.assemble(line[:end], "…")


def _recovering(alert: object) -> bool:
    """Whether the alert's condition is gone and it only waits out ``hold_s`` to clear."""
    return getattr(alert, "status", "firing") == "recovering"


def _age_style(age_s: float | None, interval_s: float) -> str:
    if age_s is None or age_s > max(3 * interval_s, interval_s + 2):
        return "$spark-warn"
    return ""


SEVERITY_RANK = {"critical": 2, "warning": 1, "info": 0}


class AlertBar(TextBlock):
    """One line under the header with the active alerts: a count when there are several,
    then the most severe first (newest first within a severity), each with its age, so the
    line's end may be cut but never a critical alert behind a warning.

    The alert engine calls :meth:`show_alerts` (through ``SparktopApp.set_active_alerts``)
    with objects that have ``severity``, ``subject``, ``message`` and ``since_s``.
    """

    DEFAULT_CSS = """
    AlertBar {
        height: 1;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        color: $spark-dim;
    }
    AlertBar.-active {
        background: $error 25%;
        color: $foreground;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("no active alerts", **kwargs)
        self._shown: tuple[object, ...] | None = None
        self._now: float | None = None
        self.alerts: tuple[AlertLike, ...] = ()

    def show_alerts(self, alerts: Sequence[AlertLike], now: float | None = None) -> None:
        now = time.time() if now is None else now
        # None before and none now (most ticks): the line is as it was (a resize shows it
        # again through :meth:`on_resize`, which asks with the alerts it holds).
        shown = self._shown
        if not alerts and not self.alerts and shown and shown[-1] == self.content_size.width:
            self._now = now
            return
        # Firing alerts first (most severe, newest), then those already recovering: their
        # message is the worst reading, so they must not read as if it were still happening.
        self.alerts = tuple(
            sorted(
                alerts,
                key=lambda a: (
                    _recovering(a),
                    -SEVERITY_RANK.get(str(a.severity), 0),
                    -a.since_s,
                ),
            )
        )
        parts: list[str | tuple[str, str]] = []
        if len(self.alerts) > 1:
            critical = sum(str(a.severity) == "critical" for a in self.alerts)
            counts = f" ({critical} critical)" if 0 < critical < len(self.alerts) else ""
            parts.append((f"{len(self.alerts)} alerts{counts}:", "bold"))
        for alert in self.alerts:
            style = "$spark-crit bold" if str(alert.severity) == "critical" else "$spark-warn"
            if parts:
                parts.append("  │  " if len(parts) > 1 else " ")
            if _recovering(alert):
                parts += [(f"✓ {alert.subject} recovering, was:", "$spark-dim"), " "]
            else:
                parts += [(f"▲ {alert.subject}", style), " "]
            parts += [
                alert.message,
                (f" {fmt.age(now - alert.since_s)}", "$spark-dim"),
            ]
        if not parts:
            parts = ["no active alerts"]
        room = self.content_size.width
        key = (*(p if isinstance(p, str) else p[0] for p in parts), room)
        self._now = now
        self.set_class(bool(self.alerts), "-active")
        if key != self._shown:
            self._shown = key
            self.set_content(cut_at_word(Content.assemble(*parts), room), layout=False)

    def on_resize(self) -> None:
        self.show_alerts(self.alerts, self._now)
