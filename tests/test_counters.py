"""CounterTracker's running sums give what summing the window afresh gives, in every case:
counters that rise, stop, reset, vanish and return, polls that skip, the window sliding."""

from __future__ import annotations

import random
from itertools import pairwise

from sparktop.alerts.counters import COUNTER_LABELS, CounterTracker
from sparktop.cluster import ClusterState
from sparktop.model import NA, SlowdownCounters
from tests.alert_samples import node

WINDOW_S = 60.0


def fresh_sum(points: list[tuple[float, dict[str, float]]]) -> dict[str, float]:
    """The definition: over consecutive readings in the window, what each still-growing
    counter (it rose between the two newest) added, in seconds."""
    if len(points) < 2:
        return {}
    newest, before_newest = points[-1][1], points[-2][1]
    growing = {n for n, v in newest.items() if v > before_newest.get(n, v)}
    grown: dict[str, float] = {}
    for (_, before), (_, now) in pairwise(points):
        for name, value in now.items():
            if name in growing and name in before and value > before[name]:
                grown[name] = grown.get(name, 0.0) + (value - before[name]) / 1e6
    return grown


def test_running_sums_match_summing_the_window_afresh() -> None:
    rng = random.Random(20261129)
    tracker, state = CounterTracker(WINDOW_S), ClusterState()
    kept: list[tuple[float, dict[str, float]]] = []
    values = dict.fromkeys(COUNTER_LABELS, 0.0)
    t = 0.0
    seen_growth = 0
    for _ in range(600):
        t += rng.choice((1.0, 1.0, 1.0, 2.0, 7.0))  # polls that skip too
        readings: dict[str, float] = {}
        for name in COUNTER_LABELS:
            roll = rng.random()
            if roll < 0.05:
                values[name] = 0.0  # driver reload: the counter starts again
            elif roll < 0.5:
                values[name] += rng.randrange(1, 3_000_000)
            if rng.random() > 0.03:  # now and then a counter is not reported
                readings[name] = values[name]
        counters = SlowdownCounters(
            **{n: readings.get(n, NA("not reported")) for n in COUNTER_LABELS}
        )
        state.apply(node("spark-1", t, counters=counters))
        tracker.observe(state)
        kept.append((t, readings))
        kept = [p for p in kept if p[0] >= t - WINDOW_S]
        got = tracker.growth_s("spark-1", "GPU-test-0")
        expected = fresh_sum(kept)
        assert got.keys() == expected.keys()
        for name, seconds in expected.items():
            assert abs(got[name] - seconds) < 1e-6
        seen_growth += bool(expected)
    assert seen_growth > 100  # the sequence did exercise growth, not only empty windows
