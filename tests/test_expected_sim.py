"""The expected row on the simulator, end to end (issue 13): sparktop's own sources poll the
simulator's loopback SSH and HTTP servers once per simulated second (a clock the polls step,
``tests/stepped_harness.py``), at the monitor's default window (30 s)
and hold (10 s).

- a healthy engine whose running count and prompt lengths change every 30–40 s for three
  minutes raises no expected-row alert, and its decode never sits past the band's worse side
  for more than one poll after a transition;
- decode slowed to 0.6× with no node to show for it raises the deficit within ``hold_s`` + one
  window, a warning that says it found no cause;
- a full, preempting pool while one node blips for 3 s names the pool, never the node;
- a node throttled for good on a slowed engine is named, critical.
"""

from __future__ import annotations

import random
import re

import pytest

from sparktop.alerts import EventKind, Severity
from sparktop.alerts.comparisons import comparisons
from sparktop.alerts.expected_rules import deficit
from sparktop.inventory import load_inventory
from sparktop.plan import Plan
from sparktop.sim.gpu import Fault
from sparktop.sim.requests import LoadSpec
from tests.alerts_sim_harness import Harness
from tests.stepped_harness import SteppedHarness, stepped_sim

ENGINE = "dsv41"
HOLD_S = 10.0
WINDOW_S = 30.0

LOAD_STEPS = (
    (0, LoadSpec(clients=6)),
    (35, LoadSpec(clients=3, prompt_tokens=(14955,))),
    (70, LoadSpec(clients=8, prompt_tokens=(1004, 3800))),
    (105, LoadSpec(clients=4, prompt_tokens=(7513, 14955))),
    (140, LoadSpec(clients=6, prompt_tokens=(3800,))),
)


def _expected_events(h: Harness) -> list[str]:
    return [
        f"{p}:{e.kind.value}:{e.alert.rule}:{e.alert.message}"
        for p, e in h.events
        if e.alert.rule.startswith(("expected.", "tp."))
    ]


async def test_a_healthy_engine_changing_load_every_35_s_raises_no_deficit() -> None:
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim, hold_s=HOLD_S, window_s=WINDOW_S)
        model = sim.cluster.engines[ENGINE]
        below, worst, loads = 0, 0, set()
        try:
            for poll in range(180):
                for at, spec in LOAD_STEPS:
                    if poll == at:
                        model.load = spec
                        model.set_clients(spec.clients, sim.cluster.now)
                await h.poll()
                sample = h.engine(ENGINE)
                assert sample is not None
                d = deficit(h.alerts.context(h.state), sample)
                if d is None or d.decode_live_tps is None or d.decode_low_tps is None:
                    continue
                loads.add(d.load.split(",")[0])
                # The worse side of the band, poll after poll: at most one poll past it.
                below = below + 1 if d.decode_live_tps < d.decode_low_tps else 0
                worst = max(worst, below)
        finally:
            await h.aclose()
    assert _expected_events(h) == [], _expected_events(h)
    assert worst <= 1, worst
    assert len(loads) > 5  # the window followed the load through its changes


async def test_decode_slowed_to_0_6x_is_a_deficit_within_hold_and_one_window() -> None:
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim, hold_s=HOLD_S, window_s=WINDOW_S)
        try:
            await h.run(40)
            assert _expected_events(h) == [], _expected_events(h)
            sim.cluster.engines[ENGINE].slowdown = 0.6
            slowed = h.polls
            await h.until(
                lambda h: h.first("expected.decode", EventKind.FIRED) is not None,
                int(HOLD_S + WINDOW_S) + 2,
                "expected.decode fired",
            )
        finally:
            await h.aclose()
    found = h.first("expected.decode", EventKind.FIRED)
    assert found is not None
    poll, event = found
    assert poll - slowed <= HOLD_S + WINDOW_S + 1, (poll, slowed)
    assert event.severity is Severity.WARNING
    assert "no cause found" in event.alert.message
    # Which profile column, which live statistic, which window (about 30 s: whole scrapes).
    assert "1/mean ITL" in event.alert.message and "vs profile " in event.alert.message
    assert re.search(r"last 3\d s", event.alert.message), event.alert.message
    assert 28 <= event.alert.values["window_s"] <= 40


async def test_a_full_pool_with_a_3_s_thermal_blip_names_the_pool_never_the_node() -> None:
    """A small pool (400K tokens) so long sessions fill it at the profile's 8 sequences: it
    queues and preempts, and one node throttles for 3 s (seen on three polls) in the middle of
    it. Before issue 13 its slowdown counter ("+3 s in the last minute") named it a straggler
    for a minute after its clock was back."""
    async with stepped_sim(max_num_seqs=8, kv_pool_tokens=400_000) as sim:
        h = SteppedHarness.start(sim, hold_s=HOLD_S, window_s=WINDOW_S)
        blip = sim.targets.thermal
        try:
            await h.run(30)
            sim.cluster.flood(ENGINE)
            await h.run(10)
            sim.cluster.set_fault(blip, Fault.THERMAL)
            await h.until(lambda h: bool(getattr(h.gpu(blip), "slowdowns", ())), 40, "blip seen")
            await h.run(2)  # three polls that show the slowdown
            sim.cluster.clear_faults()
            # Its slowdown counter keeps "+3 s in the last minute" for 60 s: long past hold_s.
            await h.run(25)
        finally:
            await h.aclose()
    messages = _expected_events(h)
    assert not any(":tp.straggler:" in m for m in messages), messages
    assert not any(blip in m for m in messages), messages
    # The pool is what the alerts name; a deficit, if any, names the pool or the queue.
    fired_rules = {e.alert.rule for _, e in h.events if e.kind is EventKind.FIRED}
    assert fired_rules & {"kv.usage", "queue.pool_bound", "kv.preemptions"}, fired_rules
    fired = [m for m in messages if ":fired:expected." in m]
    assert all("cause: pool pressure" in m or "cause: queueing" in m for m in fired), fired


async def test_a_throttled_node_holding_a_slowed_engine_back_is_named_critical() -> None:
    """One alert per figure: the decode deficit's own alert turns critical and names the
    node; the straggler is the node's alert (a warning), never a second deficit."""
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim, hold_s=HOLD_S, window_s=WINDOW_S)
        node = sim.targets.thermal
        try:
            await h.run(30)
            sim.cluster.engines[ENGINE].slowdown = 0.8
            sim.cluster.set_fault(node, Fault.THERMAL)
            await h.until(
                lambda h: any(
                    a.rule.startswith("expected.") and a.severity is Severity.CRITICAL
                    for a in h.alerts.active()
                ),
                int(HOLD_S + WINDOW_S) + 20,
                "critical deficit naming the node",
            )
        finally:
            await h.aclose()
    (straggler,) = [a for a in h.alerts.active() if a.rule == "tp.straggler"]
    assert straggler.node == node and straggler.engine == ENGINE
    assert straggler.severity is Severity.WARNING
    assert f"{node} at " in straggler.message and "sw_thermal_slowdown" in straggler.message
    assert "% below expected" not in straggler.message  # the deficit's numbers are its own
    deficits = [a for a in h.alerts.active() if a.rule.startswith("expected.")]
    critical = [a for a in deficits if a.severity is Severity.CRITICAL]
    assert critical
    for alert in critical:
        assert f"cause: {node}" in alert.message, alert.message
        assert "of the window" in alert.message or "throughout the window" in alert.message
    # The deficit alert that fired as a warning escalated: one alert, not a second one.
    fired = [
        e for _, e in h.events if e.alert.rule == "expected.decode" and e.kind is EventKind.FIRED
    ]
    assert len(fired) == 1, fired


# -- issue 28: no false warning over drastic load changes, the stalled engine -------------------

CHANGES_S = (30, 40)
"""Load changes every 30–40 s (seeded), over running 1–8 × prompts 1K–200K."""
PROMPTS = (1000, 4000, 8000, 16_000, 30_000, 60_000, 120_000, 200_000)


# 600 polls as fast as the machine goes: 285 s at load 20 on two cores (a hang guard).
@pytest.mark.timeout(900)
async def test_ten_minutes_of_load_changes_from_1k_to_200k_prompts_raise_nothing() -> None:
    """Issue 28's trial: a healthy engine whose load changes every 30–40 s (running 1–8 ×
    prompts 1K–200K) raised 6 ``expected.ttft`` and 2 ``expected.decode`` warnings in 8.5
    minutes: coarse TTFT buckets read as points, decode keyed on the requests that finished."""
    rng = random.Random(28)
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim, hold_s=HOLD_S, window_s=WINDOW_S)
        model = sim.cluster.engines[ENGINE]
        due, loads = 0, []
        try:
            for poll in range(600):
                if poll == due:
                    spec = LoadSpec(clients=rng.randint(1, 8), prompt_tokens=(rng.choice(PROMPTS),))
                    model.load = spec
                    model.set_clients(spec.clients, sim.cluster.now)
                    loads.append((spec.clients, spec.prompt_tokens[0]))
                    due = poll + rng.randint(*CHANGES_S)
                await h.poll()
        finally:
            await h.aclose()
    raised = [
        f"{p}:{e.alert.rule}:{e.alert.message}"
        for p, e in h.events
        if e.alert.rule.startswith(("expected.", "tp.", "engine.stalled"))
    ]
    assert raised == [], (loads, raised)
    assert len(loads) >= 15 and max(p for _, p in loads) >= 120_000  # the load did change


async def test_a_steady_3_x_30k_load_never_deviates_beyond_the_band() -> None:
    """vLLM's TTFT edges 20, 40 s around a 3 × 30K load's ~22 s: the live p50 lies in
    20–40 s, which holds the band; read as the interpolated point it was "+38 %"."""
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim, hold_s=HOLD_S, window_s=WINDOW_S)
        model = sim.cluster.engines[ENGINE]
        spec = LoadSpec(clients=3, prompt_tokens=(30_000,), jitter=0.02)
        model.load = spec
        model.set_clients(spec.clients, sim.cluster.now)
        matched = Plan.from_inventory(load_inventory(sim.inventory_path)).matched
        assert matched is not None
        beyond: list[str] = []
        compared = 0
        try:
            await h.run(int(WINDOW_S) * 3)  # the old load's requests leave the window
            for _ in range(90):
                await h.poll()
                sample = h.engine(ENGINE)
                assert sample is not None
                row = matched(sample)
                if isinstance(row, str):
                    continue
                for comp in comparisons(row, sample)[:2]:
                    dev = comp.deviation()
                    if dev is None:
                        continue
                    compared += 1
                    worse = dev > 0 if comp.worse_when == "higher" else dev < 0
                    if worse and not comp.in_band():
                        beyond.append(f"{h.polls} {comp.label} {comp.live_text()} {dev:+.0f}%")
        finally:
            await h.aclose()
    assert compared > 60
    assert beyond == []
    assert _expected_events(h) == []


async def test_running_requests_frozen_for_30_s_raise_engine_stalled_a_60_s_prefill_not() -> None:
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim, hold_s=HOLD_S, window_s=WINDOW_S)
        model = sim.cluster.engines[ENGINE]
        try:
            # A 200K prompt alone: ~60 s of prefill, no token, the KV filling.
            model.set_clients(0, sim.cluster.now)
            await h.run(60)  # the background requests drain
            assert h.engine(ENGINE) is not None
            long = sim.cluster.long_context(ENGINE, 200_000)
            assert long is not None
            await h.until(lambda h: long.first_token_s is not None, 200, "the 200K first token")
            prefill_s = long.first_token_s - long.arrival_s
            assert prefill_s >= 50, prefill_s
            assert h.first("engine.stalled", EventKind.FIRED) is None, h.describe()
            # Load back, then the engine freezes with requests running, for 30 s.
            model.set_clients(6, sim.cluster.now)
            await h.run(30)
            # Frozen WITH requests running: on a loaded machine one step of the simulator can
            # finish every request, and a stall then leaves the new ones waiting, none running
            # (not this rule's case). The check and the stall run with no await between them.
            await h.until(lambda h: bool(model.running), 30, "requests running")
            sim.cluster.stall(ENGINE)
            frozen = h.polls
            found = await h.until(
                lambda h: h.first("engine.stalled", EventKind.FIRED) is not None,
                int(30 + HOLD_S),
                "engine.stalled fired",
            )
            sim.cluster.stall(ENGINE, False)
            await h.until(
                lambda h: h.first("engine.stalled", EventKind.CLEARED) is not None,
                int(HOLD_S) + 10,
                "engine.stalled cleared",
            )
        finally:
            await h.aclose()
    assert found - frozen <= 30 + HOLD_S
    _poll, event = h.first("engine.stalled", EventKind.FIRED) or (0, None)
    assert event is not None and event.severity is Severity.CRITICAL
    message = event.alert.message
    assert re.search(r"stalled: \d+ running(, \d+ waiting)? and no token for \d+ s", message)
    assert "spark-" in message and " W" in message  # the TP group's utilisation and power
