"""What happens after each alert update in the live monitor: delivery, bell and recording.

:class:`AlertPipeline` has the alert engine's shape (``update(state, now_s)``, ``active()``),
so the app calls it where it would call the engine; each update's events go to
:class:`~sparktop.alerts.delivery.AlertDelivery` (``--on-alert``, ``--alert-log``), ring the
bell when asked (``--bell``), and the tick — every newest sample, baselines, active alerts
and events — goes to the :class:`~sparktop.record.writer.Recorder` (``--record``). When one
of these outputs fails (disk full, a hook that exits non-zero or is killed) the failure is an
alert or event of its own (:mod:`sparktop.alerts.outputs`), shown on the next update.
:class:`AlertOutputs` turns those command-line options into a pipeline for a plan.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from sparktop.alerts.context import RuleContext
from sparktop.alerts.delivery import AlertDelivery, delivery_from_args
from sparktop.alerts.model import Alert, Event, Severity
from sparktop.alerts.options import add_output_arguments as add_output_arguments
from sparktop.alerts.outputs import ALERT_LOG_RULE, HOOK_RULE, RECORD_RULE, OutputProblems
from sparktop.cluster import ClusterState
from sparktop.errors import UserError
from sparktop.outfile import create_file
from sparktop.safe_text import printable

if TYPE_CHECKING:
    from sparktop.alerts.engine import AlertEngine
    from sparktop.record.writer import Recorder

HOOK_EVENTS_PER_UPDATE = 5
"""Hook failures shown one by one per update; more are summed up in one event."""


class AlertPipeline:
    """An :class:`AlertEngine` whose every update is delivered, rung and recorded; the
    outputs' own failures are added to its alerts and events. ``bell`` is the terminal's
    (the app sets it to its own once it exists)."""

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
        self.problems = OutputProblems()
        self._hook_failures: list[str] = []
        self._unrecorded: list[Event] = []
        if delivery is not None:
            chained = delivery.on_failure

            def hook_failed(message: str) -> None:
                self._hook_failures.append(message)
                if chained is not None:
                    chained(message)

            delivery.on_failure = hook_failed

    @property
    def recording_failed(self) -> bool:
        """True once the recording has stopped on an error (the header says so)."""
        return self.recorder is not None and self.recorder.error is not None

    def update(self, state: ClusterState, now_s: float) -> list[Event]:
        events = self.engine.update(state, now_s)
        if self.delivery is not None:
            self.delivery.deliver(events)
            if self.delivery.bell and self.bell is not None and self.delivery.should_ring(events):
                self.bell()
        if self.recorder is not None:
            from sparktop.record.tick import tick_from_state

            recorded = (*events, *self._unrecorded)
            self.recorder.write(tick_from_state(state, now_s, self.active(), recorded))
        # Checked after this tick's write, so a failure (and what it lost) shows at once; its
        # events go into the next tick of the recording.
        self._check_outputs(now_s)
        self._unrecorded = self.problems.take_events()
        return [*events, *self._unrecorded]

    def active(self) -> tuple[Alert, ...]:
        return (*self.engine.active(), *self.problems.active())

    @property
    def last_context(self) -> RuleContext | None:
        """The engine's :attr:`~sparktop.alerts.engine.AlertEngine.last_context`."""
        return self.engine.last_context

    def _check_outputs(self, now_s: float) -> None:
        rec = self.recorder
        if rec is not None and rec.error is not None:
            message = (
                f"recording to {rec.path} stopped: {rec.error} ({rec.written:,} ticks written, "
                f"{rec.lost:,} not recorded since)"
            )
            self.problems.hold(RECORD_RULE, "recording", message, now_s, Severity.CRITICAL)
        delivery = self.delivery
        if delivery is not None and delivery.log_path is not None:
            if delivery.log_error is not None:
                message = (
                    f"alert log {delivery.log_path}: {delivery.log_error} "
                    f"({delivery.log_lost:,} events not written)"
                )
                self.problems.hold(ALERT_LOG_RULE, "alert log", message, now_s, Severity.CRITICAL)
            else:
                self.problems.resolve(ALERT_LOG_RULE, now_s)
        failures, self._hook_failures = self._hook_failures, []
        shown = failures if len(failures) <= HOOK_EVENTS_PER_UPDATE else failures[-1:]
        if len(failures) > len(shown):
            shown = [f"{len(failures)} runs failed; the last: {failures[-1]}"]
        for message in shown:
            text = message.removeprefix("--on-alert: ")
            self.problems.once(HOOK_RULE, "--on-alert", text, now_s, Severity.WARNING)

    def close(self) -> None:
        """Finish the recording and the alert log (commands still running are left alone)."""
        if self.recorder is not None:
            self.recorder.close()
        if self.delivery is not None:
            self.delivery.close_log()


@dataclass(slots=True)
class AlertOutputs:
    """Validated output options; :meth:`wrap` puts a plan's alert engine in a pipeline."""

    delivery: AlertDelivery
    record: Path | None = None
    pipeline: AlertPipeline | None = None
    record_file: IO[bytes] | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AlertOutputs:
        """Check the options before the screen opens (UserError for a bad command or path,
        an existing recording without ``--force``, a symbolic link). The recording is
        created here, once."""
        delivery = delivery_from_args(args)
        record = getattr(args, "record", None)
        record_file = None
        if record is not None:
            try:
                record_file = create_file(record, "--record", force=bool(args.force))
            except UserError:
                delivery.close_log()
                raise
        return cls(delivery, record, record_file=record_file)

    def wrap(
        self, engine: AlertEngine, header: dict[str, Any] | Callable[[], dict[str, Any]]
    ) -> AlertPipeline:
        """``engine`` (the plan's), delivered and, with ``--record``, recorded under
        ``header`` (the plan's: inventory without secrets, profile, interval; or what makes
        it, called only with ``--record``: the recorder's modules and pydantic codecs, ~1 MB,
        load only then)."""
        recorder = None
        if self.record is not None:
            from sparktop.record.writer import Recorder

            raw, self.record_file = self.record_file, None
            made = header() if callable(header) else header
            recorder = Recorder(self.record, made, raw=raw)
        self.pipeline = AlertPipeline(engine, self.delivery, recorder)
        return self.pipeline

    def close(self) -> None:
        """Finish the recording and the alert log, and say on stderr (after the screen
        closed) where the recording went and what any output lost."""
        if self.record_file is not None:  # the screen never opened
            with contextlib.suppress(OSError):
                self.record_file.close()
            self.record_file = None
        if self.pipeline is None:
            self.delivery.close_log()
            self._report_delivery()
            return
        self.pipeline.close()
        rec = self.pipeline.recorder
        if rec is not None:
            lost = f", {rec.dropped:,} dropped" if rec.dropped else ""
            if rec.error:
                lost += f"; stopped: {rec.error} ({rec.lost:,} ticks not recorded)"
            _say(f"recorded {rec.written:,} ticks to {rec.path}{lost}")
        self._report_delivery()

    def _report_delivery(self) -> None:
        d = self.delivery
        if d.log_path is not None and (d.log_lost or d.log_error):
            _say(f"alert log {d.log_path}: {d.log_lost:,} events not written ({d.log_error})")
        if d.command_failures:
            _say(f"--on-alert: {d.command_failures:,} runs failed; the last: {d.failures[-1]}")


def _say(line: str) -> None:
    print(printable(line), file=sys.stderr)
