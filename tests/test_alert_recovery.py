"""An alert's text while it clears (its worst moment, never a healthy reading) and conditions
pending towards ``hold_s``."""

from __future__ import annotations

from typing import Any

from sparktop.alerts import Alert, AlertEngine, Event, EventKind, Pending, Severity, Thresholds
from sparktop.cluster import ClusterState
from tests.alert_samples import counters, engine, node, warm

TP = {"dsv41": ("spark-1", "spark-2")}
HOT: dict[str, Any] = {"clock_event_mask": 0x20, "temperature_c": 91.0}
# Seen in the demo after the thermal fault: the clock back at its 2,515 MHz baseline, the SW
# thermal counter's last tick still in the window.
BACK: dict[str, Any] = {"sm_clock_mhz": 2523.0, "temperature_c": 85.0}


def thermal_episode(alerts: AlertEngine) -> list[tuple[float, Event]]:
    """spark-2 (TP member of dsv41) throttles for 15 s with its clock sagging to 1,833 MHz at
    worst, comes back with one more counter tick, then stays healthy for 20 s."""
    state = ClusterState()
    t = warm(state, ("spark-1", "spark-2"), 0.0, 30)
    total = 100.0
    events: list[tuple[float, Event]] = []
    clocks = [1900.0] * 5 + [1833.0] * 5 + [1880.0] * 5
    readings = [{**HOT, "sm_clock_mhz": c} for c in clocks] + [BACK] + [{}] * 20
    for i, gpu in enumerate(readings):
        now = t + i
        total += 1.0 if i <= len(clocks) else 0.0  # the counter ticks until the clock is back
        state.apply(node("spark-1", now))
        state.apply(node("spark-2", now, counters=counters(total), **gpu))
        state.apply(engine(t=now))
        events += [(now, e) for e in alerts.update(state, now)]
        for alert in alerts.active():
            # No alert text ever quotes the healthy clock as a throttle or a hold-back.
            assert f"at {BACK['sm_clock_mhz']:,.0f} MHz" not in alert.message, alert
    return events


def test_a_recovering_alert_keeps_its_worst_reading() -> None:
    alerts = AlertEngine(Thresholds(hold_s=5), tp_groups=TP)
    seen: dict[str, list[Alert]] = {}
    state = ClusterState()
    t = warm(state, ("spark-2",), 0.0, 30)
    for i, clock in enumerate([1900.0, 1833.0, 1880.0] * 3):
        state.apply(node("spark-2", t + i, sm_clock_mhz=clock, **HOT))
        alerts.update(state, t + i)
    (firing,) = [a for a in alerts.active() if a.rule == "gpu.throttle"]
    assert firing.status == "firing" and "throttling at 1,880 MHz" in firing.message  # latest
    state.apply(node("spark-2", t + 9))  # healthy: the condition is gone, the alert clears
    alerts.update(state, t + 9)
    for alert in alerts.active():
        seen.setdefault(alert.rule, []).append(alert)
    throttle = seen["gpu.throttle"][0]
    assert throttle.status == "recovering" and throttle.recovering_since_s == t + 9
    assert "throttling at 1,833 MHz" in throttle.message  # the worst reading, not 2,515
    assert throttle.values["sm_clock_mhz"] == 1833.0
    assert "91 °C" in seen["gpu.temperature"][0].message


def test_thermal_episode_never_shows_the_recovered_clock_as_the_alert() -> None:
    events = thermal_episode(AlertEngine(Thresholds(hold_s=5), tp_groups=TP))
    fired = {e.alert.rule for _, e in events if e.kind is EventKind.FIRED}
    assert fired == {"gpu.throttle", "gpu.temperature", "tp.straggler"}
    cleared = {e.alert.rule: e for _, e in events if e.kind is EventKind.CLEARED}
    assert set(cleared) == fired
    # The slowest reading, and the latest of equally slow ones (the most counter evidence).
    assert cleared["gpu.throttle"].message == (
        "cleared: throttling at 1,833 MHz, 91 °C, 88.0 W: sw_thermal_slowdown +9 s in the "
        "last minute; 27 % below its 2,515 MHz baseline"
    )
    assert cleared["tp.straggler"].message.startswith("cleared: held back by spark-2 at 1,833 MHz")
    assert "91 °C, over the 85 °C limit" in cleared["gpu.temperature"].message


def test_the_last_counter_tick_says_the_clock_is_back() -> None:
    alerts = AlertEngine(Thresholds(hold_s=0), tp_groups=TP)
    state = ClusterState()
    t = warm(state, ("spark-1", "spark-2"), 0.0, 30)
    state.apply(engine(t=t))
    state.apply(node("spark-2", t, counters=counters(100.0), sm_clock_mhz=1833.0, **HOT))
    alerts.update(state, t)
    state.apply(node("spark-2", t + 1, counters=counters(101.0), **BACK))
    state.apply(engine(t=t + 1))
    alerts.update(state, t + 1)
    messages = {a.rule: a.message for a in alerts.active()}
    assert messages["gpu.throttle"].startswith(
        "throttled recently: sw_thermal_slowdown +1 s in the last minute (now 2,523 MHz, 85 °C"
    )
    # The node's own alert says it throttled; nothing holds the group back any more (a
    # counter that ticked while the clock is back at baseline blames no one).
    assert "tp.straggler" not in messages


def test_a_condition_back_during_recovery_is_firing_again_without_an_event() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=5)), ClusterState()
    t = warm(state, ("spark-2",), 0.0, 30)
    events: list[Event] = []
    for i, gpu in enumerate([HOT] * 6 + [{}] * 3 + [{**HOT, "sm_clock_mhz": 2000.0}]):
        state.apply(node("spark-2", t + i, **gpu))
        events += alerts.update(state, t + i)
        if i == 7:
            assert {a.status for a in alerts.active()} == {"recovering"}
    assert [e.kind for e in events if e.alert.rule == "gpu.throttle"] == [EventKind.FIRED]
    (throttle,) = [a for a in alerts.active() if a.rule == "gpu.throttle"]
    assert throttle.status == "firing" and "throttling at 2,000 MHz" in throttle.message


def test_recovering_alert_json_round_trip() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=5)), ClusterState()
    t = warm(state, ("spark-2",), 0.0, 30)
    for i, gpu in enumerate([HOT] * 6 + [{}]):
        state.apply(node("spark-2", t + i, **gpu))
        alerts.update(state, t + i)
    for alert in alerts.active():
        assert alert.recovering_since_s == t + 6
        assert Alert.from_json(alert.to_json()) == alert


# -- pending -----------------------------------------------------------------------------------


def test_pending_lists_conditions_building_up_until_they_fire() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=10)), ClusterState()
    t = warm(state, ("spark-2",), 0.0, 30)
    assert alerts.pending() == ()
    for i in range(4):
        state.apply(node("spark-2", t + i, sm_clock_mhz=1833.0, clock_event_mask=0x20))
        assert alerts.update(state, t + i) == []
    (pending,) = alerts.pending()
    assert isinstance(pending, Pending)
    assert (pending.rule, pending.subject, pending.severity) == (
        "gpu.throttle",
        "spark-2/gpu0",
        Severity.WARNING,
    )
    assert pending.started_s == t and pending.due_s == t + 10 and pending.since_s == t
    assert pending.remaining_s(t + 3) == 7.0 and pending.key == "gpu.throttle:spark-2/gpu0"
    assert "throttling at 1,833 MHz" in pending.message and alerts.active() == ()
    for i in range(4, 11):
        state.apply(node("spark-2", t + i, sm_clock_mhz=1833.0, clock_event_mask=0x20))
        events = alerts.update(state, t + i)
    assert [e.alert.key for e in events] == [pending.key] and alerts.pending() == ()


def test_a_pending_condition_that_breaks_leaves_without_an_event() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=10)), ClusterState()
    t = warm(state, ("spark-2",), 0.0, 30)
    state.apply(node("spark-2", t, **HOT, sm_clock_mhz=1833.0))
    alerts.update(state, t)
    assert {p.rule for p in alerts.pending()} == {"gpu.throttle", "gpu.temperature"}
    state.apply(node("spark-2", t + 1))
    assert alerts.update(state, t + 1) == [] and alerts.pending() == ()
    state.apply(engine(t=t + 2, restarted=True))  # instant: fires, never pending
    assert [e.alert.rule for e in alerts.update(state, t + 2)] == ["engine.restarted"]
    assert alerts.pending() == ()
