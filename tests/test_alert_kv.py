"""KV-pool alerts on sample sequences: time to exhaustion needs substantial usage and a rise
sustained over ``slope_window_s`` and goes as soon as usage falls; preemptions follow the
sample's own rate window and clear when that rate is back to 0."""

from __future__ import annotations

from collections.abc import Sequence

from sparktop.alerts import AlertEngine, EventKind, Thresholds
from sparktop.alerts.context import RuleContext
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.rules import Finding, evaluate
from sparktop.cluster import ClusterState
from tests.alert_samples import engine

EXHAUSTION = "kv.exhaustion:dsv41"
PREEMPTIONS = "kv.preemptions:dsv41"


def run(state: ClusterState, thresholds: Thresholds | None = None) -> dict[str, Finding]:
    ctx = RuleContext(
        state=state, thresholds=thresholds or Thresholds(), counters=CounterTracker(60)
    )
    return {f.key: f for f in evaluate(ctx)}


def feed(
    usages: Sequence[float], state: ClusterState | None = None, t0: float = 0.0
) -> ClusterState:
    """One engine sample per second with these KV usages (fractions)."""
    state = state or ClusterState()
    for i, kv in enumerate(usages):
        state.apply(engine(t=t0 + i, kv_usage=kv))
    return state


def ramp(start: float, per_s: float, seconds: int) -> list[float]:
    return [start + per_s * i for i in range(seconds + 1)]


# -- time to exhaustion ------------------------------------------------------------------------


def test_a_sustained_rise_at_substantial_usage_gives_the_time_to_a_full_pool() -> None:
    state = feed(ramp(0.40, 0.005, 60))  # 40 % → 70 % over 60 s: +0.5 %/s, full in ~60 s
    found = run(state)[EXHAUSTION]
    assert found.message == (
        "KV pool full in ~60 s at +0.50 %/s (now 70.0 %, rising over the last 60 s)"
    )
    assert round(found.values["eta_s"]) == 60 and found.clear_after_s == 0.0


def test_a_short_ramp_at_a_few_percent_is_no_exhaustion_warning() -> None:
    # Seen in the demo: "full in ~2 min 27 s at +0.66 %/s (now 2.0 %)" from a 3 s ramp.
    state = feed([0.002] * 57 + [0.0086, 0.0152, 0.02])
    assert EXHAUSTION not in run(state)
    # A sustained 60 s rise is still no warning while usage is under half of kv_usage_pct.
    assert EXHAUSTION not in run(feed(ramp(0.10, 0.005, 60)))  # ends at 40 % < 45 %


def test_a_late_jump_after_a_flat_minute_is_not_a_sustained_rise() -> None:
    state = feed([0.50] * 50 + ramp(0.51, 0.01, 10))  # flat, then +1 %/s for 10 s
    assert EXHAUSTION not in run(state)
    step = feed([0.50] * 30 + [0.62] * 31)  # one jump, flat since
    assert EXHAUSTION not in run(step)


def test_the_rise_must_cover_the_slope_window() -> None:
    assert EXHAUSTION not in run(feed(ramp(0.50, 0.01, 30)))  # 30 s of history
    longer = Thresholds(slope_window_s=120.0)
    assert EXHAUSTION not in run(feed(ramp(0.40, 0.005, 60)), longer)


def test_a_noisy_but_sustained_rise_still_counts() -> None:
    noisy = [v + (0.01 if i % 2 else -0.01) for i, v in enumerate(ramp(0.40, 0.004, 60))]
    found = run(feed(noisy))[EXHAUSTION]
    assert 0.35 < found.values["slope_pct_per_s"] < 0.45


def test_after_the_pool_empties_no_exhaustion_warning_remains() -> None:
    # Seen in the demo: "full in ~84 s at +1.18 %/s (now 0.2 %)" after a flood drained.
    state = feed([0.002] * 10 + ramp(0.30, 0.012, 55) + [0.002] * 3)
    assert EXHAUSTION not in run(state)


def test_a_fall_clears_the_warning_at_once_with_its_worst_message() -> None:
    alerts = AlertEngine(Thresholds(hold_s=10))
    state = ClusterState()
    events = []
    for i, kv in enumerate(ramp(0.30, 0.005, 80)):  # 30 % → 70 %, warning from ~45 %
        state.apply(engine(t=float(i), kv_usage=kv))
        events += alerts.update(state, float(i))
    assert [(e.kind, e.alert.rule) for e in events] == [(EventKind.FIRED, "kv.exhaustion")]
    (up,) = alerts.active()
    assert "now 70.0 %" in up.message
    state.apply(engine(t=81.0, kv_usage=0.675))  # 2.5 points below the recent peak
    cleared = alerts.update(state, 81.0)
    assert [(e.kind, e.alert.rule) for e in cleared] == [(EventKind.CLEARED, "kv.exhaustion")]
    assert "now 70.0 %" in cleared[0].message  # the soonest ETA, not a recomputed one
    assert alerts.active() == ()


def test_a_small_dip_does_not_clear_the_warning() -> None:
    state = feed([*ramp(0.40, 0.005, 60), 0.69])  # 1 point below the peak
    assert EXHAUSTION in run(state)


# -- preemptions -------------------------------------------------------------------------------


def test_preemptions_are_counted_over_the_samples_window() -> None:
    sample = engine(preemptions_per_s=1 / 30, window_s=30.0, kv_usage=0.97)
    found = run(feed([], _one(sample)))[PREEMPTIONS]
    assert (
        found.message
        == "preempted 1 request in the last 30 s (0.03/s, KV up to 97 % in that window)"
    )
    assert found.values["preemptions_per_s"] == 1 / 30
    no_window = run(_one(engine(preemptions_per_s=0.4, kv_usage=0.97)))[PREEMPTIONS]
    assert no_window.message == "preempting 0.40 requests/s (KV 97 %)"


def test_preemption_alert_clears_when_the_windowed_rate_is_zero() -> None:
    # Seen in the demo: "preempting 0.03 requests/s (KV 0 %)" up while the panel read 0.00/s.
    alerts, state = AlertEngine(Thresholds(hold_s=10)), ClusterState()
    rates = [0.1] * 5 + [2 / 30] * 10 + [1 / 30] * 10 + [0.0]
    events = []
    for i, rate in enumerate(rates):
        kv = 0.97 if i < 12 else 0.002
        state.apply(engine(t=float(i), preemptions_per_s=rate, window_s=30.0, kv_usage=kv))
        events += [e for e in alerts.update(state, float(i)) if e.alert.rule == "kv.preemptions"]
        if rate == 0.0:  # gone with the panel's 0.00/s, no extra hold
            assert "kv.preemptions" not in {a.rule for a in alerts.active()}
    kinds = [(e.kind, e.time_s) for e in events]
    assert kinds == [(EventKind.FIRED, 10.0), (EventKind.CLEARED, 25.0)]
    assert events[1].message == (
        "cleared: preempted 3 requests in the last 30 s (0.10/s, KV up to 97 % in that window)"
    )


def test_the_preemption_alert_quotes_the_kv_of_its_own_window_not_the_kv_now() -> None:
    """The pool was 99 % full when it preempted, then drained to 4 %; the windowed rate still
    counts those preemptions, so the alert quotes the window's KV (its peak), not today's
    4 % (which read as if vLLM preempted with an empty pool)."""
    state = ClusterState()
    for t in range(20):
        kv = 0.99 if t < 8 else 0.04
        state.apply(engine(t=float(t), kv_usage=kv, preemptions_per_s=3 / 30, window_s=30.0))
    found = run(state)[PREEMPTIONS]
    assert "KV up to 99 % in that window" in found.message and "4 %" not in found.message
    assert found.values["kv_peak_pct"] == 99.0
    # Out of the window: a 99 % reading 40 s ago is not this window's.
    late = feed([0.99] + [0.04] * 40)
    late.apply(engine(t=41.0, kv_usage=0.04, preemptions_per_s=1 / 30, window_s=30.0))
    assert "KV up to 4 % in that window" in run(late)[PREEMPTIONS].message


def _one(sample: object) -> ClusterState:
    state = ClusterState()
    state.apply(sample)  # type: ignore[arg-type]
    return state
