"""What happens after each alert update in the live monitor: delivery, bell and recording.

:class:`AlertPipeline` has the alert engine's shape (``update(state, now_s)``, ``active()``),
so the app calls it where it would call the engine; each update's events go to
:class:`~sparktop.alerts.delivery.AlertDelivery` (``--on-alert``, ``--alert-log``), ring the
bell when asked (``--bell``), and the tick — every newest sample, baselines, active alerts
and events — goes to the :class:`~sparktop.record.writer.Recorder` (``--record``).
:class:`AlertOutputs` turns those command-line options into a pipeline.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparktop.alerts.delivery import AlertDelivery, add_alert_arguments, delivery_from_args
from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.model import Alert, Event
from sparktop.cluster import ClusterState
from sparktop.errors import UserError
from sparktop.record.tick import make_header, tick_from_state
from sparktop.record.writer import Recorder
from sparktop.safe_text import printable


class AlertPipeline:
    """An :class:`AlertEngine` whose every update is delivered, rung and recorded."""

    def __init__(
        self,
        engine: AlertEngine,
        delivery: AlertDelivery | None = None,
        recorder: Recorder | None = None,
        bell: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.delivery = delivery
        self.recorder = recorder
        self.bell = bell

    def update(self, state: ClusterState, now_s: float) -> list[Event]:
        events = self.engine.update(state, now_s)
        if self.delivery is not None:
            self.delivery.deliver(events)
            if self.delivery.bell and self.bell is not None and self.delivery.should_ring(events):
                self.bell()
        if self.recorder is not None:
            self.recorder.write(tick_from_state(state, now_s, self.engine.active(), tuple(events)))
        return events

    def active(self) -> tuple[Alert, ...]:
        return self.engine.active()

    def close(self) -> None:
        """Finish the recording and the alert log (commands still running are left alone)."""
        if self.recorder is not None:
            self.recorder.close()
        if self.delivery is not None:
            self.delivery.close_log()


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--on-alert``, ``--alert-log``, ``--bell`` and ``--record`` for the live monitor."""
    add_alert_arguments(parser)
    parser.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        help="record every tick (samples, derived values, alerts) as JSON lines; "
        "FILE.zst or FILE.gz compresses. Replay with 'sparktop replay FILE'",
    )


@dataclass(slots=True)
class AlertOutputs:
    """Validated output options; :meth:`wrap` builds the pipeline once the app exists."""

    delivery: AlertDelivery
    record: Path | None = None
    inventory: Any = None
    pipeline: AlertPipeline | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, inventory: Any = None) -> AlertOutputs:
        """Check the options before the screen opens (UserError for a bad command or path);
        ``inventory`` goes into the recording's header, without secrets."""
        record = getattr(args, "record", None)
        if record is not None:
            try:
                record.expanduser().open("wb").close()
            except OSError as exc:
                raise UserError(f"--record: cannot create {record}: {exc.strerror}") from None
        return cls(delivery_from_args(args), record, inventory)

    @property
    def recording(self) -> bool:
        return self.record is not None

    def wrap(self, app: Any, engine: AlertEngine) -> AlertPipeline:
        """The pipeline around the app's alert engine (header from the app's inventory and
        profile; the bell is the app's)."""
        recorder = None
        if self.record is not None:
            setup = getattr(app, "setup", None)
            header = make_header(
                self.inventory,
                getattr(setup, "profile", None),
                getattr(getattr(setup, "config", None), "interval_s", None),
            )
            recorder = Recorder(self.record, header)
        self.pipeline = AlertPipeline(engine, self.delivery, recorder, getattr(app, "bell", None))
        return self.pipeline

    def close(self) -> None:
        """Finish the recording and say where it went (stderr), after the screen closed."""
        if self.pipeline is None:
            self.delivery.close_log()
            return
        self.pipeline.close()
        rec = self.pipeline.recorder
        if rec is not None:
            lost = f", {rec.dropped} dropped" if rec.dropped else ""
            problem = f" ({rec.error})" if rec.error else ""
            print(
                printable(f"recorded {rec.written} ticks to {rec.path}{lost}{problem}"),
                file=sys.stderr,
            )
