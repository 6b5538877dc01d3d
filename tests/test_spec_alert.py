"""``spec.acceptance``: speculative acceptance well below the engine's own recent baseline,
judged on samples and end to end on the simulator (MTP, 5 speculative tokens) over loopback
HTTP, with the alert engine's hold both ways."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sparktop.alerts import EventKind
from sparktop.alerts.context import RuleContext
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.spec_rules import MIN_POINTS, acceptance_baseline, spec_rule
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import is_num
from sparktop.sim.engine import SPEC_ACCEPT, spec_yield
from sparktop.sim.scenarios import SCENARIOS, Act
from tests.alert_samples import engine
from tests.alerts_sim_harness import HOLD_S, Harness
from tests.stepped_harness import SteppedHarness, stepped_sim

HOLD_POLLS = int(HOLD_S)
ENGINE = "dsv41"


def _state(rates: list[float], *, since_start: tuple[str, ...] = ()) -> ClusterState:
    state = ClusterState()
    for t, rate in enumerate(rates):
        sample = engine(t=float(t), spec_acceptance_rate=rate, spec_mean_accept_len=1 + 5 * rate)
        state.apply(replace(sample, since_start=since_start if t == len(rates) - 1 else ()))
    return state


def _findings(state: ClusterState) -> list[str]:
    ctx = RuleContext(state=state, thresholds=Thresholds(), counters=CounterTracker(60))
    return [f.message for f in spec_rule(ctx)]


def test_a_fall_well_below_the_own_baseline_is_found() -> None:
    state = _state([0.54] * 30 + [0.05])
    ctx = RuleContext(state=state, thresholds=Thresholds(), counters=CounterTracker(60))
    assert acceptance_baseline(ctx, ENGINE) == 0.54
    (message,) = _findings(state)
    assert message == (
        "speculative acceptance 5% of draft tokens, 91% below its recent 54%; "
        "1.25 tokens per step: decode slows with it"
    )


def test_no_finding_for_a_small_dip_without_a_baseline_or_over_the_lifetime() -> None:
    assert _findings(_state([0.54] * 30 + [0.40])) == []  # 26 % below: under the 40 % default
    assert _findings(_state([0.54] * (MIN_POINTS - 2) + [0.05])) == []  # no baseline yet
    lifetime = _state([0.54] * 30 + [0.05], since_start=("spec_acceptance_rate",))
    assert _findings(lifetime) == []


def test_a_long_collapse_does_not_become_the_baseline() -> None:
    # Upper quartile: 3 minutes of collapse in 10 minutes of history still read as a fall.
    assert _findings(_state([0.54] * 420 + [0.05] * 180)) != []


def _collapsed(h: Harness) -> bool:
    s = h.engine(ENGINE)
    return s is not None and is_num(s.spec_acceptance_rate) and s.spec_acceptance_rate < 0.3


def _healthy(h: Harness) -> bool:
    s = h.engine(ENGINE)
    return s is not None and is_num(s.spec_acceptance_rate) and s.spec_acceptance_rate > 0.45


async def test_acceptance_collapse_on_the_simulator_fires_after_hold_and_clears() -> None:
    assert "spec-collapse" in SCENARIOS
    async with stepped_sim() as sim:
        h = SteppedHarness.start(sim)
        try:
            await h.until(
                lambda h: (
                    len(h.state.history.get(ENGINE, "spec_acceptance_rate")) >= MIN_POINTS + 5
                ),
                60,
                "an acceptance baseline",
            )
            base = h.engine(ENGINE)
            assert base is not None and is_num(base.spec_acceptance_rate)
            baseline = spec_yield(SPEC_ACCEPT) - 1
            assert base.spec_acceptance_rate * 5 == pytest.approx(baseline, rel=0.05)
            assert "spec.acceptance" not in h.active_rules(), h.describe()
            await sim.apply(Act.SPEC_COLLAPSE)
            seen = await h.until(_collapsed, 30, "acceptance collapsed")
            fired = h.first("spec.acceptance", EventKind.FIRED)
            if fired is None:
                await h.until(
                    lambda h: h.first("spec.acceptance", EventKind.FIRED) is not None,
                    HOLD_POLLS + 3,
                    "spec.acceptance fired",
                )
                fired = h.first("spec.acceptance", EventKind.FIRED)
            assert fired is not None
            poll, event = fired
            # The finding holds from some poll at or before ``seen``; it fires hold_s later.
            assert poll - seen <= HOLD_POLLS + 2, (poll, seen, h.describe())
            assert poll >= HOLD_POLLS, h.describe()
            assert event.subject == ENGINE and "speculative acceptance" in event.alert.message
            await sim.apply(Act.RECOVER)
            recover = h.polls
            await h.until(_healthy, 40, "acceptance back")
            cleared = await h.until(
                lambda h: h.first("spec.acceptance", EventKind.CLEARED) is not None,
                HOLD_POLLS + 15,
                "spec.acceptance cleared",
            )
            # the windowed rate climbs back over the window, then the alert holds hold_s
            assert cleared - recover > HOLD_POLLS, h.describe()
            assert h.first("spec.acceptance", EventKind.FIRED, after=poll) is None
        finally:
            await h.aclose()
