"""Alerts end to end on the simulator: sparktop's own sources poll loopback SSH and HTTP
servers, each fault raises the right alert naming the right node or engine within
``hold_s`` + 2 polls of becoming visible, and clears after recovery; a recording of a
scenario replays in the monitor with the same alerts at the same offsets."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktop.alerts import Event, EventKind, Severity
from sparktop.alerts.delivery import AlertDelivery, parse_command
from sparktop.alerts.pipeline import AlertPipeline
from sparktop.model import is_num
from sparktop.record import Recorder, Recording, make_header
from sparktop.record.replay import ReplaySource
from sparktop.sim.scenarios import SCENARIOS, Act
from tests.alerts_sim_harness import HOLD_S, Harness
from tests.stepped_harness import SteppedHarness, stepped_sim

HOLD_POLLS = int(HOLD_S)
ENGINE = "dsv41"
WARM_POLLS = 8


@dataclass(frozen=True)
class Case:
    """A fault, how to see it in the raw samples, and the alerts it must raise."""

    act: Act
    recover: Act | None
    visible: Callable[[Harness, str], bool]
    alerts: tuple[tuple[str, str], ...]  # (rule, "node" | "gpu" | "engine" subject)
    target: str  # attribute of sim.targets


def _slowed(h: Harness, node: str) -> bool:
    gpu = h.gpu(node)
    return gpu is not None and bool(gpu.slowdowns)


def _stuck(h: Harness, node: str) -> bool:
    gpu = h.gpu(node)
    return (
        gpu is not None
        and is_num(gpu.sm_clock_mhz)
        and is_num(gpu.power_w)
        and gpu.sm_clock_mhz < 1500
        and gpu.power_w < 25
    )


def _pool_full(h: Harness, engine: str) -> bool:
    sample = h.engine(engine)
    return sample is not None and sample.ok and is_num(sample.kv_usage) and sample.kv_usage >= 0.9


def _down(h: Harness, node: str) -> bool:
    sample = h.state.nodes.get(node)
    return sample is not None and not sample.ok


def _steady_slow(h: Harness, node: str) -> bool:
    gpu = h.gpu(node)
    return (
        gpu is not None
        and is_num(gpu.sm_clock_mhz)
        and is_num(gpu.power_w)
        and gpu.sm_clock_mhz > 2000
        and gpu.power_w < 25
    )


def _pressed(h: Harness, node: str) -> bool:
    sample = h.state.nodes.get(node)
    available = sample.memory.available_mib if sample is not None else None
    return is_num(available) and available < 8 * 1024


def _link_lost(h: Harness, node: str) -> bool:
    sample = h.state.nodes.get(node)
    return sample is not None and any(not p.up for p in sample.fabric.ports)


def _restarted(h: Harness, engine: str) -> bool:
    sample = h.engine(engine)
    return sample is not None and sample.restarted


CASES = {
    "thermal": Case(
        Act.THERMAL,
        Act.RECOVER,
        _slowed,
        (("gpu.throttle", "gpu"), ("tp.straggler", "engine")),
        "thermal",
    ),
    "hidden-low-power": Case(
        Act.LOW_POWER,
        Act.RECOVER,
        _stuck,
        (("gpu.hidden_low_power", "gpu"), ("tp.straggler", "engine")),
        "low_power",
    ),
    "pool-exhaustion": Case(
        Act.FLOOD, Act.END_FLOOD, _pool_full, (("kv.usage", "engine"),), "engine"
    ),
    "node-down": Case(Act.NODE_DOWN, Act.NODE_UP, _down, (("node.down", "node"),), "down"),
    "server-restart": Case(
        Act.RESTART, None, _restarted, (("engine.restarted", "engine"),), "engine"
    ),
    "steady-slow": Case(
        Act.STEADY_SLOW,
        Act.RECOVER,
        _steady_slow,
        (("gpu.low_power_vs_peers", "gpu"), ("tp.straggler", "engine")),
        "slow",
    ),
    "memory-pressure": Case(
        Act.MEMORY_PRESSURE, Act.RECOVER, _pressed, (("node.memory_pressure", "node"),), "pressure"
    ),
    "link-down": Case(
        Act.LINK_DOWN,
        Act.RECOVER,
        _link_lost,
        (("fabric.link_down", "port"), ("fabric.asymmetry", "node")),
        "link",
    ),
}


def _subject(kind: str, target: str) -> str:
    kinds = {"gpu": f"{target}/gpu0", "node": target, "engine": ENGINE}
    return kinds.get(kind, f"{target}/rocep1s0f0/1")


@pytest.mark.parametrize("name", list(CASES))
async def test_each_scenario_raises_the_right_alert_and_clears(name: str) -> None:
    case = CASES[name]
    async with stepped_sim() as sim:
        target = getattr(sim.targets, case.target)
        h = SteppedHarness.start(sim)
        try:
            await h.run(WARM_POLLS)
            # Every rule, the expected row's included, is quiet on the healthy warm-up: the
            # start-up burst is judged against the profile over the burst's own window.
            assert list(h.alerts.active()) == [], h.describe()
            await sim.apply(case.act)
            seen = await h.until(lambda h: case.visible(h, target), 40, f"{name} visible")
            for rule, kind in case.alerts:
                if h.first(rule, EventKind.FIRED) is None:
                    await h.until(
                        lambda h, r=rule: h.first(r, EventKind.FIRED) is not None,  # type: ignore[misc]
                        HOLD_POLLS + 3,
                        f"{rule} fired",
                    )
                found = h.first(rule, EventKind.FIRED)
                assert found is not None
                poll, event = found
                assert poll - seen <= HOLD_POLLS + 2, (rule, poll, seen, h.describe())
                assert event.subject == _subject(kind, target)
                if rule == "tp.straggler":
                    assert event.alert.node == target and event.alert.engine == ENGINE
                if rule == "node.down":
                    assert event.severity is Severity.CRITICAL
            if case.recover is not None:
                await sim.apply(case.recover)
            recovered = h.polls
            rules = {rule for rule, _ in case.alerts}
            await h.until(lambda h: not (h.active_rules() & rules), 40, f"{name} cleared")
            for rule in rules:
                cleared = h.first(rule, EventKind.CLEARED)
                assert cleared is not None
                assert cleared[0] > (recovered if case.recover else seen + HOLD_POLLS - 1)
        finally:
            await h.aclose()


TOUR_ALERTS = (
    ("gpu.throttle", "thermal", "gpu"),
    ("gpu.hidden_low_power", "low_power", "gpu"),
    ("kv.usage", "engine", "engine"),
    ("queue.pool_bound", "engine", "engine"),
    ("node.down", "down", "node"),
    ("engine.restarted", "engine", "engine"),
    ("gpu.low_power_vs_peers", "slow", "gpu"),
    ("node.memory_pressure", "pressure", "node"),
    ("fabric.link_down", "link", "port"),
    ("engine.stalled", "engine", "engine"),
)
TOUR_ROUND_S = int(SCENARIOS["tour"].period_s or 0)


def _kv_alerts_agree_with_the_samples(h: Harness) -> None:
    """What the engine panel shows and the KV alerts say never contradict each other: no
    preemption alert while the windowed rate reads 0, no time-to-exhaustion warning at a
    KV usage under half of ``kv_usage_pct``."""
    sample = h.engine(ENGINE)
    if sample is None or not sample.ok:
        return
    limit = h.alerts.thresholds.kv_usage_pct
    for alert in h.alerts.active():
        if alert.rule == "kv.preemptions":
            rate = sample.preemptions_per_s
            assert is_num(rate) and rate > 0, (h.polls, alert.message, rate)
        if alert.rule == "kv.exhaustion" and alert.status == "firing":
            assert alert.values["kv_usage_pct"] >= limit / 2, (h.polls, alert.message)


async def test_tour_raises_every_alert_once_clears_them_and_delivers_them(tmp_path: Path) -> None:
    """One round of the demo's tour: every fault's alert, named right, cleared by the end of
    the round; --on-alert (a plain argv, no shell) and --alert-log receive every event."""
    received, log = tmp_path / "on-alert.jsonl", tmp_path / "alert-log.jsonl"
    tee = shutil.which("tee")
    assert tee is not None
    delivery = AlertDelivery(parse_command(f"{tee} -a {received}"), log)
    async with stepped_sim(scenario="tour") as sim:
        h = SteppedHarness.start(sim)
        h.pipeline = AlertPipeline(h.alerts, delivery)
        start, at = sim.cluster.now, [0.0]  # simulated seconds into the round, per poll
        try:
            # One round of simulated time (a loaded machine polls less often than once a
            # simulated second; stopping by poll count would run into the next round).
            while at[-1] < TOUR_ROUND_S and h.polls < 2 * TOUR_ROUND_S:
                await h.poll()
                at.append(sim.cluster.now - start)
                _kv_alerts_agree_with_the_samples(h)
        finally:
            await h.aclose()
            await delivery.aclose()
    targets = sim.targets
    for rule, target, kind in TOUR_ALERTS:
        fired = [e for _, e in h.events if e.alert.rule == rule and e.kind is EventKind.FIRED]
        assert fired, (rule, h.describe())
        subjects = {e.subject for e in fired}
        if rule == "gpu.throttle":  # the blip during the pool exhaustion is a throttle too
            subjects -= {_subject("gpu", targets.down)}
        assert subjects == {_subject(kind, getattr(targets, target))}
        assert rule not in h.active_rules(), (rule, h.describe())
    # Named: the thermal node holding the group back (the deficit's own alert, critical) and
    # the low-power one; never the node that blipped while the pool was full.
    stragglers = {e.alert.node for _, e in h.events if e.alert.rule == "tp.straggler"}
    # The link-down rank is named too: its fabric traffic collapsed against its peers'.
    assert stragglers == {targets.thermal, targets.low_power, targets.slow, targets.link}
    assert any(
        e.alert.rule.startswith("expected.")
        and e.severity is Severity.CRITICAL
        and f"cause: {targets.thermal}" in e.alert.message
        for _, e in h.events
    ), h.describe()
    # The load change on the healthy engine blames no node (polls placed by simulated time:
    # a loaded machine polls slower than the simulator runs). That it raises no deficit at
    # the monitor's defaults (30 s window, hold 10 s) is tests/test_expected_sim.py's.
    shift = next(t for t, act in SCENARIOS["tour"].steps if act is Act.LOAD_SHIFT)
    quiet = [
        f"{p}:{at[p]:.0f}:{e.alert.rule}:{e.alert.message}"
        for p, e in h.events
        if shift <= at[p] < TOUR_ROUND_S
        and e.kind is EventKind.FIRED
        and e.alert.rule == "tp.straggler"
    ]
    assert quiet == [], quiet
    expected = sorted((e.kind.value, e.alert.id) for _, e in h.events)
    for path in (received, log):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert sorted((d["event"], d["alert"]["id"]) for d in lines) == expected
    assert not delivery.failures and delivery.dropped == 0


async def test_a_recorded_scenario_replays_with_the_same_alerts_at_the_same_offsets(
    tmp_path: Path,
) -> None:
    from sparktop.inventory import load_inventory
    from sparktop.ui.replay import ReplayApp
    from sparktop.ui.widgets.event_log import EventLog
    from sparktop.ui.widgets.header import AlertBar

    path = tmp_path / "thermal.jsonl.zst"
    live: dict[int, list[str]] = {}
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim)
        inventory = load_inventory(sim.inventory_path)
        recorder = Recorder(path, make_header(inventory, None, 1.0), flush_s=0.0)
        h.pipeline = AlertPipeline(h.alerts, recorder=recorder)
        try:
            for poll in range(30):  # 30 s: the fault from 5 s on
                if poll == 5:
                    await sim.apply(Act.THERMAL)
                await h.poll()
                live[h.polls] = sorted(a.id for a in h.alerts.active())
        finally:
            await h.aclose()
            recorder.close()
    alerting = sorted({p for p, e in h.events if e.kind is not EventKind.CLEARED})
    assert alerting, h.describe()

    app = ReplayApp(ReplaySource(Recording(path)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("space", "home")  # pause, back to the start
        jumps = []
        for _ in alerting:
            await pilot.press("n")
            await pilot.pause()
            poll = round(app.replay.position_s) + 1  # tick n was recorded at now = n s
            jumps.append(poll)
            shown = sorted(a.id for a in app.query_one(AlertBar).alerts)  # type: ignore[attr-defined]
            assert shown == live[poll], (poll, shown, live[poll])
            pane = app.query_one(EventLog).events  # alert events, and the UI's own transitions
            logged = [(e.time_s, e.subject) for e in pane if isinstance(e, Event)]
            assert logged == [(float(p), e.subject) for p, e in h.events if p <= poll]
        assert jumps == alerting

    data = path.read_bytes()
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(data[: len(data) * 3 // 5])
    source = ReplaySource(Recording(cut))
    while source.step() is not None:
        pass
    assert 0 < len(source) < 30 and source.stop is not None
    assert "stopped at line" in source.label(1.0, paused=True)
