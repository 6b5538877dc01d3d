"""The alert engine: runs the rules on every cluster update and applies hysteresis.

A condition must hold ``hold_s`` to fire and be absent ``hold_s`` to clear (a rule may clear
sooner: ``Finding.clear_after_s``, for inputs already smoothed over a window), so an input
that flaps faster than that neither fires nor flaps an active alert. While an alert is up its
severity only rises (an escalation event) and, while the condition holds, its message follows
the latest numbers; once the condition is gone the alert is *recovering* and shows its worst
moment's message and values (a reading that no longer meets the condition never becomes the
alert's text). A condition building up towards ``hold_s`` is *pending* (:meth:`pending`).
While a subject cannot be read (its node's poll or its engine's scrape fails), alerts that
depend on its readings neither fire nor clear: not seeing a throttle is not the same as it
having stopped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sparktop.alerts.context import Expected, ExpectedFn, Finding, RuleContext
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.host_track import HostTracker
from sparktop.alerts.model import Alert, Event, EventKind, Pending
from sparktop.alerts.rules import RULES, Rule, Scope, evaluate, scopes_of, unknown_scopes
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import EngineSample, is_num
from sparktop.sweep.estimator.estimator import Estimated
from sparktop.sweep.expected.matched import MatchedExpected, RowFn
from sparktop.sweep.profiles.profile import Profile


@dataclass(slots=True)
class _Track:
    finding: Finding  # the latest reading that met the condition
    first_seen_s: float
    worst: Finding  # the worst reading of this occurrence (severity, then score)
    absent_since_s: float | None = None
    alert: Alert | None = None


def _worse_or_same(a: Finding, b: Finding) -> bool:
    return (a.severity.rank, a.score) >= (b.severity.rank, b.score)


class AlertEngine:
    """Turns rule findings into :class:`Alert` records and :class:`Event` s.

    ``thresholds`` default to :class:`Thresholds`'s. ``profile`` gives the expected row (via
    the sweep estimator) and a fallback SM-clock baseline; ``matched`` is that row shared with
    the monitor's expected strip (:class:`~sparktop.sweep.expected.matched.MatchedExpected`, built
    from ``profile`` when not given); ``expected`` overrides how the expected row is computed.
    ``tp_groups`` maps engine → its tensor-parallel nodes; ``max_num_seqs`` engine → the
    limit when ``/metrics`` lacks it.
    Call :meth:`update` from the event loop after every cluster update (or every UI tick).
    """

    def __init__(
        self,
        thresholds: Thresholds | None = None,
        profile: Profile | None = None,
        tp_groups: Mapping[str, tuple[str, ...]] | None = None,
        *,
        max_num_seqs: Mapping[str, float] | None = None,
        expected: ExpectedFn | None = None,
        rules: tuple[Rule, ...] = RULES,
        matched: MatchedExpected | None = None,
    ) -> None:
        self.thresholds = thresholds or Thresholds()
        self.rules = rules
        self.scopes = scopes_of(rules)
        """Each rule id's :class:`~sparktop.alerts.context.Scope`: what becomes of its alert
        while its node or engine fails (``TypeError`` here for a rule that declares none)."""
        self.counters = CounterTracker(self.thresholds.counter_window_s)
        self.host = HostTracker()
        self.tp_groups = dict(tp_groups or {})
        self.max_num_seqs = dict(max_num_seqs or {})
        self.expected = expected if expected is not None else profile_expected(profile, matched)
        self.profile_baseline_mhz = profile_baseline(profile)
        self._tracks: dict[str, _Track] = {}
        self._seq = 0
        self.last_context: RuleContext | None = None
        """The context of the last :meth:`update`: its GPU views and peer facts, for views
        drawn from the same state before it changes (the monitor's Nodes table, same tick)."""

    def context(self, state: ClusterState) -> RuleContext:
        return RuleContext(
            state=state,
            thresholds=self.thresholds,
            counters=self.counters,
            tp_groups=self.tp_groups,
            max_num_seqs=self.max_num_seqs,
            profile_baseline_mhz=self.profile_baseline_mhz,
            expected=self.expected,
            host=self.host,
        )

    def findings(self, state: ClusterState) -> list[Finding]:
        """The conditions present now, without hysteresis (what ``snapshot`` reports)."""
        self.counters.observe(state)
        self.host.observe(state)
        found = evaluate(self.context(state), self.rules)
        self.host.end_round()
        return found

    def update(self, state: ClusterState, now_s: float) -> list[Event]:
        """Evaluate every rule on ``state`` at ``now_s`` (wall clock, s); return new events."""
        ctx = self.context(state)
        self.counters.observe(state)
        self.host.observe(state)
        present = {f.key: f for f in evaluate(ctx, self.rules)}
        self.host.end_round()
        self.last_context = ctx
        unknown_nodes, unknown_engines = unknown_scopes(ctx)
        hold = self.thresholds.hold_s
        events: list[Event] = []
        for key, finding in present.items():
            track = self._tracks.get(key)
            if track is None:
                track = self._tracks[key] = _Track(finding, now_s, finding)
            track.finding, track.absent_since_s = finding, None
            if _worse_or_same(finding, track.worst):
                track.worst = finding
            if track.alert is None:
                if finding.instant or now_s - track.first_seen_s >= hold:
                    track.alert = self._new_alert(finding, track.first_seen_s, now_s)
                    events.append(Event(now_s, EventKind.FIRED, track.alert))
            else:
                before = track.alert
                # Severity only rises while an alert is up: a value hovering at a boundary
                # must not flap it between warning and critical.
                severity = max(finding.severity, before.severity, key=lambda v: v.rank)
                track.alert = before.updated(
                    severity=severity,
                    message=finding.message,
                    values=finding.values,
                    recovering_since_s=None,
                )
                if severity.rank > before.severity.rank:
                    events.append(Event(now_s, EventKind.ESCALATED, track.alert))
        for key in [k for k in self._tracks if k not in present]:
            track = self._tracks[key]
            if track.alert is None:
                del self._tracks[key]  # pending condition broke: start over next time
                continue
            scope = self.scopes.get(track.finding.rule)
            if _engine_gone(track.finding, scope, unknown_engines):
                # Its page is gone: a value from the last good one is not current, and
                # engine.down (present while it is) is the one alert left for the engine.
                cleared = track.alert.updated(
                    cleared_s=now_s,
                    # The event says "cleared: " (Event.message), once.
                    message=f"engine down, no data ({track.alert.message})",
                )
                events.append(Event(now_s, EventKind.CLEARED, cleared))
                del self._tracks[key]
                continue
            if _frozen(track.finding, scope, unknown_nodes):
                track.absent_since_s = None
                continue
            if track.absent_since_s is None:
                track.absent_since_s = now_s
                # The last reading that met the condition may already look healthy (a
                # slowdown counter's last tick at a recovered clock): show the worst one.
                track.alert = track.alert.updated(
                    message=track.worst.message,
                    values=track.worst.values,
                    recovering_since_s=now_s,
                )
            clear_after = track.finding.clear_after_s
            if now_s - track.absent_since_s >= (hold if clear_after is None else clear_after):
                cleared = track.alert.updated(cleared_s=now_s)
                events.append(Event(now_s, EventKind.CLEARED, cleared))
                del self._tracks[key]
        return events

    def _new_alert(self, finding: Finding, started_s: float, now_s: float) -> Alert:
        self._seq += 1
        return Alert(
            id=f"{finding.key}#{self._seq}",
            rule=finding.rule,
            subject=finding.subject,
            severity=finding.severity,
            started_s=started_s,
            fired_s=now_s,
            message=finding.message,
            node=finding.node,
            gpu=finding.gpu,
            engine=finding.engine,
            values=finding.values,
        )

    def active(self) -> tuple[Alert, ...]:
        """Alerts that fired and have not cleared (firing or recovering: see
        :attr:`Alert.status`), most severe first, then oldest first."""
        alerts = [t.alert for t in self._tracks.values() if t.alert is not None]
        return tuple(sorted(alerts, key=lambda a: (-a.severity.rank, a.started_s, a.key)))

    def pending(self) -> tuple[Pending, ...]:
        """Conditions that held at the last :meth:`update` but not yet for ``hold_s``:
        each with its onset (``started_s``) and when it fires if it keeps holding
        (``due_s``); most severe first, then oldest first. A pending condition that breaks
        before ``due_s`` leaves without an event."""
        hold = self.thresholds.hold_s
        pending = [
            Pending(
                rule=t.finding.rule,
                subject=t.finding.subject,
                severity=t.finding.severity,
                message=t.finding.message,
                started_s=t.first_seen_s,
                due_s=t.first_seen_s + hold,
                node=t.finding.node,
                gpu=t.finding.gpu,
                engine=t.finding.engine,
                values=t.finding.values,
            )
            for t in self._tracks.values()
            if t.alert is None
        ]
        return tuple(sorted(pending, key=lambda p: (-p.severity.rank, p.started_s, p.key)))


_READS_ENGINE = (Scope.ENGINE, Scope.ENGINE_NODE)
_READS_NODE = (Scope.NODE, Scope.ENGINE_NODE)


def _engine_gone(finding: Finding, scope: Scope | None, engines: frozenset[str]) -> bool:
    """An alert read from the page of an engine whose scrape now fails."""
    return scope in _READS_ENGINE and finding.engine in engines


def _frozen(finding: Finding, scope: Scope | None, nodes: frozenset[str]) -> bool:
    """An alert read from a node whose poll now fails: neither fires nor clears."""
    return scope in _READS_NODE and finding.node in nodes


def profile_baseline(profile: Profile | None) -> float | None:
    """The lowest per-node loaded SM clock the profile's sweep measured (MHz), if any."""
    clocks = profile.baseline_sm_clock_mhz if profile is not None else ()
    values = [float(c) for c in clocks if is_num(c)]
    return min(values) if values else None


def profile_expected(
    profile: Profile | None, matched: MatchedExpected | None = None
) -> ExpectedFn | None:
    """An :data:`ExpectedFn` that asks the sweep estimator for the live window's load.

    The load is the window's (:func:`sparktop.sweep.expected.matched.window_load`): the
    time-weighted running counts and the prompt lengths that finished, each cell estimated and
    combined as the live statistic combines its observations. ``matched`` (default: one of its own
    for ``profile``) computes that row once per sample, for every caller that holds it.
    """
    if profile is None:
        return None
    return row_expected(matched if matched is not None else MatchedExpected(profile))


def row_expected(row: RowFn) -> ExpectedFn:
    """An :data:`ExpectedFn` of a :data:`~sparktop.sweep.expected.matched.RowFn` (a plan's
    :meth:`~sparktop.plan.Plan.row` gives each engine its own profile's): None where the
    row says why there is none."""

    def expected(sample: EngineSample) -> Expected | None:
        got = row(sample)
        if isinstance(got, str):
            return None
        load = got.load
        return Expected(
            prompt_tokens=load.mean_prompt,
            concurrency=load.mean_running,
            ttft_s=_value(got.ttft_s),
            decode_tps=_value(got.decode_tps),
            ttft_low_s=_num(got.ttft_s.low),
            ttft_high_s=_num(got.ttft_s.high),
            decode_low_tps=_num(got.decode_tps.low),
            decode_high_tps=_num(got.decode_tps.high),
            window_s=load.window_s,
            load=load.describe(),
            model_note=got.model_note,
        )

    return expected


def _value(figure: Estimated) -> float | None:
    return float(figure.value) if is_num(figure.value) else None


def _num(value: object) -> float | None:
    return float(value) if is_num(value) else None
