"""The alert engine: hysteresis (hold to fire, hold to clear), flapping, unknown subjects."""

from __future__ import annotations

from typing import Any

from sparktop.alerts import Alert, AlertEngine, Event, EventKind, Severity, Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import NodeState
from sparktop.sweep.profiles.loader import load_profile
from tests.alert_samples import engine, failed, node, warm

HOT: dict[str, Any] = {"sm_clock_mhz": 1833.0, "clock_event_mask": 0x20}


def drive(
    alerts: AlertEngine, state: ClusterState, start: float, seconds: int, **gpu: Any
) -> list[Event]:
    """One poll per second of spark-1 with the given GPU readings, evaluating each time."""
    events: list[Event] = []
    for i in range(seconds):
        t = start + i
        state.apply(node("spark-1", t, **gpu))
        events += alerts.update(state, t)
    return events


def test_fires_only_after_hold_and_clears_only_after_hold() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=10)), ClusterState()
    assert drive(alerts, state, 0.0, 5) == []
    events = drive(alerts, state, 5.0, 10, **HOT)  # t = 5 … 14: held 9 s, not yet
    assert events == [] and alerts.active() == ()
    events = drive(alerts, state, 15.0, 1, **HOT)  # held 10 s
    assert [(e.kind, e.alert.rule) for e in events] == [(EventKind.FIRED, "gpu.throttle")]
    fired = events[0].alert
    assert fired.started_s == 5.0 and fired.fired_s == 15.0 and fired.node == "spark-1"
    assert alerts.active() == (fired,)

    assert drive(alerts, state, 16.0, 10) == []  # absent 16 … 25: 9 s, still up
    assert [a.rule for a in alerts.active()] == ["gpu.throttle"]
    events = drive(alerts, state, 26.0, 1)
    assert [e.kind for e in events] == [EventKind.CLEARED]
    assert events[0].alert.cleared_s == 26.0 and events[0].alert.id == fired.id
    assert events[0].message.startswith("cleared: ")
    assert alerts.active() == ()


def test_flapping_input_does_not_flap_the_alert() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=10)), ClusterState()
    events = drive(alerts, state, 0.0, 12, **HOT)
    assert [e.kind for e in events] == [EventKind.FIRED]
    t = 12.0
    for _ in range(10):  # 3 s throttled, 3 s fine, for a minute
        events += drive(alerts, state, t, 3)
        events += drive(alerts, state, t + 3, 3, **HOT)
        t += 6
    assert [e.kind for e in events] == [EventKind.FIRED]
    events = drive(alerts, state, t, 11)
    assert [e.kind for e in events] == [EventKind.CLEARED]


def test_flapping_below_hold_never_fires() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=10)), ClusterState()
    events: list[Event] = []
    t = 0.0
    for _ in range(10):
        events += drive(alerts, state, t, 6, **HOT)
        events += drive(alerts, state, t + 6, 1)
        t += 7
    assert events == []


def test_zero_hold_fires_and_clears_at_once() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=0)), ClusterState()
    assert [e.kind for e in drive(alerts, state, 0.0, 1, **HOT)] == [EventKind.FIRED]
    assert [e.kind for e in drive(alerts, state, 1.0, 1)] == [EventKind.CLEARED]


def test_unreachable_node_freezes_its_gpu_alerts() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=5)), ClusterState()
    events = drive(alerts, state, 0.0, 6, **HOT)
    assert [e.alert.rule for e in events] == ["gpu.throttle"]
    for t in range(6, 30):  # 24 s without readings
        state.apply(failed("spark-1", float(t), NodeState.UNREACHABLE))
        events += alerts.update(state, float(t))
    fired = [(e.kind, e.alert.rule) for e in events]
    assert (EventKind.FIRED, "node.down") in fired
    assert (EventKind.CLEARED, "gpu.throttle") not in fired
    assert {a.rule for a in alerts.active()} == {"gpu.throttle", "node.down"}
    assert alerts.active()[0].severity is Severity.CRITICAL  # most severe first
    later = drive(alerts, state, 30.0, 6)
    assert sorted((e.kind, e.alert.rule) for e in later) == [
        (EventKind.CLEARED, "gpu.throttle"),
        (EventKind.CLEARED, "node.down"),
    ]


def test_restart_fires_at_once_and_clears_after_hold() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=10)), ClusterState()
    state.apply(engine(t=0.0, restarted=True))
    events = alerts.update(state, 0.0)
    assert [(e.kind, e.alert.rule) for e in events] == [(EventKind.FIRED, "engine.restarted")]
    for t in range(1, 10):
        state.apply(engine(t=float(t)))
        assert alerts.update(state, float(t)) == []
    state.apply(engine(t=11.0))
    assert [e.kind for e in alerts.update(state, 11.0)] == [EventKind.CLEARED]


def test_escalation_is_an_event_and_ids_are_per_occurrence() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=0)), ClusterState()
    state.apply(engine(t=0.0, kv_usage=0.93))
    first = alerts.update(state, 0.0)
    assert [(e.kind, e.severity) for e in first] == [(EventKind.FIRED, Severity.WARNING)]
    state.apply(engine(t=1.0, kv_usage=0.99, waiting=2.0))
    kinds = {(e.kind, e.alert.rule, e.severity) for e in alerts.update(state, 1.0)}
    assert (EventKind.ESCALATED, "kv.usage", Severity.CRITICAL) in kinds
    state.apply(engine(t=1.5, kv_usage=0.93))  # back to warning level: stays critical
    assert [e.alert.rule for e in alerts.update(state, 1.5)] == ["queue.pool_bound"]  # cleared
    (kv,) = alerts.active()
    assert kv.severity is Severity.CRITICAL and "93.0 % full" in kv.message
    state.apply(engine(t=2.0))
    alerts.update(state, 2.0)
    state.apply(engine(t=3.0, kv_usage=0.95))
    again = alerts.update(state, 3.0)
    assert again[0].alert.key == first[0].alert.key and again[0].alert.id != first[0].alert.id


def test_alert_and_event_json_round_trip() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=0)), ClusterState()
    state.apply(node("spark-1", 0.0, **HOT))
    event = alerts.update(state, 0.0)[0]
    data = event.to_json()
    assert data["event"] == "fired" and data["alert"]["node"] == "spark-1"
    assert data["alert"]["values"]["sm_clock_mhz"] == 1833.0
    assert Event.from_json(data) == event
    assert Alert.from_json(event.alert.to_json()) == event.alert


def test_profile_gives_the_expected_row_and_baseline() -> None:
    # 2-Spark seed table, row 2,048 prompt tokens × 2: decode 57.0 tok/s per stream.
    profile = load_profile("2x-spark-dsv4-flash-0731")
    alerts, state = AlertEngine(Thresholds(hold_s=0), profile), ClusterState()
    state.apply(engine(t=0.0, running=2.0, mean_prompt_tokens=2048.0, itl_mean_s=1 / 35.3))
    events = alerts.update(state, 0.0)
    assert "decode 38 % below expected (1/mean ITL 35.3 vs profile 57.0 tok/s" in events[0].message


def test_four_spark_profile_baseline_clock_is_the_fallback() -> None:
    # 4-Spark seed: loaded clocks 2509 / 2522 / 2509 / 2541 MHz → fallback 2509.
    profile = load_profile("4x-spark-dsv41-flash-1017")
    alerts, state = AlertEngine(Thresholds(hold_s=0), profile), ClusterState()
    assert alerts.profile_baseline_mhz == 2509.0
    state.apply(node("spark-1", 0.0, sm_clock_mhz=2000.0))
    assert "below its 2,509 MHz baseline" in alerts.update(state, 0.0)[0].message


def test_tp_group_straggler_through_the_engine() -> None:
    alerts = AlertEngine(Thresholds(hold_s=0), tp_groups={"dsv41": ("spark-1", "spark-2")})
    state = ClusterState()
    warm(state, ("spark-1", "spark-2"), 0.0, 10)
    state.apply(node("spark-2", 10.0, **HOT))
    state.apply(engine(t=10.0))
    rules = {e.alert.rule: e.alert for e in alerts.update(state, 10.0)}
    assert rules["tp.straggler"].node == "spark-2" and rules["tp.straggler"].engine == "dsv41"


def test_one_shot_alerts_report_conditions_present_now_without_hold() -> None:
    import io

    from rich.console import Console

    from sparktop.alerts.oneshot import alerts_now, any_critical
    from sparktop.inventory import parse_inventory
    from sparktop.plan import Plan
    from sparktop.report.alerts import render_alerts

    samples = (node("spark-1", 0.0, **HOT), failed("spark-2", 0.0, NodeState.UNREACHABLE))
    found = alerts_now(samples, AlertEngine(Thresholds(hold_s=0)), now_s=0.0)
    assert [(a.rule, a.severity) for a in found] == [
        ("node.down", Severity.CRITICAL),
        ("gpu.throttle", Severity.WARNING),
    ]
    # node.down is about availability: snapshot reports it with exit 1, not 3.
    assert not any_critical(found)
    console = Console(file=io.StringIO(), width=200)
    render_alerts(found, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "CRITICAL spark-2  unreachable since" in text and "Alerts (2):" in text

    inventory = parse_inventory(
        "cluster: c\nprofile: 4x-spark-dsv41-flash-1017\nalerts: {temperature_c: 50}\n"
        "nodes:\n  - {name: spark-1, host: 10.0.0.1}\n"
        "engines:\n  - {name: e, url: 'http://10.0.0.1:8015', nodes: [spark-1]}\n",
        "cluster.yaml",
    )
    engine = Plan.from_inventory(inventory).alert_engine(hold_s=0.0)
    found = alerts_now([node("spark-1", 0.0, sm_clock_mhz=2000.0)], engine, 0.0)
    rules = {a.rule: a for a in found}
    assert "gpu.temperature" in rules  # 55 °C over the inventory's 50 °C
    assert "below its 2,509 MHz baseline" in rules["gpu.throttle"].message  # profile fallback
