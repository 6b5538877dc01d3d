"""The expected row is judged on the window's load, not on the running gauge at one scrape.

vLLM sets ``vllm:num_requests_running`` from the stats of the step that just ended: when a
batch finishes, the gauge reads 0 until the next batch's first step (its prefill) has run,
so an engine serving requests back to back reads 0 at many scrapes. On the real vLLM of
``tests/test_real_vllm_long.py`` a steady 1–4 × 512-token load read 0 at 24 of 137 scrapes
(load 7–28; docs/testing.md). The live figures and the expected row are the window's: a
gauge at 0 at this scrape is no reason to skip them, and skipping them broke the hold
clock of a real deficit every few seconds, so it never fired.

A :class:`~sparktop.testing.vllm_page.FakeVllm` page read by the monitor's own deriver and
alert engine, on the default profile's row (4K prompts × 2 running: 81.8 tok/s per stream).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.expected_rules import deficit
from sparktop.cluster import ClusterState
from sparktop.model import EngineSample
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.exposition.page import parse_page
from sparktop.sweep.expected.matched import MatchedExpected
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from sparktop.testing.vllm_page import FakeVllm
from sparktop.testing.vllm_page import Load as PageLoad

ENGINE = "dsv41"
HALF_SPEED = PageLoad(
    prefill_tps=7600,
    decode_tps=80,
    requests_per_s=1,
    ttft_range_s=(2.0, 3.0),
    itl_range_s=(0.024, 0.026),  # 1 / mean ITL = 40 tok/s per stream: half the profile's
    prompt_tokens=3800,
)


def _scrapes(gauges: Iterator[float], seconds: int, load: PageLoad) -> Iterator[EngineSample]:
    """One scrape a second of a fake vLLM under ``load``, its running gauge from ``gauges``."""
    fake = FakeVllm()
    deriver = MetricsDeriver(ENGINE, window_s=30)
    fake.load["0"] = load
    for t in range(seconds):
        fake.set_gauges(running=next(gauges), waiting=0, kv_usage=0.3)
        fake.advance(1)
        page = parse_page(fake.page().decode(), WANTED)
        yield deriver.derive(page, now_s=float(t), wall_s=float(t))


def _between_requests() -> Iterator[float]:
    """2 running, but 0 at every third scrape: the gauge between two batches."""
    t = 0
    while True:
        yield 0.0 if t % 3 == 2 else 2.0
        t += 1


def _judge(samples: Iterator[EngineSample]) -> tuple[AlertEngine, list[tuple[float, bool]]]:
    """The alert engine on the default profile, updated at every scrape; with, per scrape
    from 10 s on (the window then holds more than ``MIN_LOADED_S`` of running requests), its
    running gauge and whether the expected row was compared."""
    row = MatchedExpected(load_profile(DEFAULT_PROFILE))
    alerts = AlertEngine(profile=row.profile, matched=row)
    state = ClusterState()
    ticks: list[tuple[float, bool]] = []
    for sample in samples:
        state.apply(sample)
        alerts.update(state, sample.time_s)
        ctx = alerts.last_context
        assert ctx is not None
        if sample.window_s is not None and sample.window_s >= 10:
            ticks.append((float(sample.running), deficit(ctx, sample) is not None))  # type: ignore[arg-type]
    return alerts, ticks


def test_a_busy_engine_whose_gauge_reads_0_between_batches_is_compared_every_scrape() -> None:
    alerts, ticks = _judge(_scrapes(_between_requests(), 40, HALF_SPEED))
    assert any(running == 0 for running, _ in ticks)  # the gauge did read 0
    assert all(compared for _, compared in ticks), ticks
    active = {a.rule: a for a in alerts.active()}
    decode = active["expected.decode"]
    assert decode.message.startswith("decode 51 % below expected (1/mean ITL 40.0 vs profile")
    # Seen once the window held 5 s of running requests (2 of every 3 s: at 7.5 s), fired
    # once its hold had passed: the gauge's zeros never broke the hold.
    assert decode.started_s <= 8
    assert decode.fired_s - decode.started_s == alerts.thresholds.hold_s


def test_a_window_without_running_requests_is_not_compared() -> None:
    """The other side: a window whose gauge read 0 throughout (an idle engine, its counters
    still) is not compared, and the row says why."""
    idle = PageLoad()
    alerts, ticks = _judge(_scrapes(iter(lambda: 0.0, None), 20, idle))
    assert ticks and not any(compared for _, compared in ticks)
    assert alerts.active() == ()


THROTTLED = {"clock_event_mask": 0x20, "sm_clock_mhz": 1800.0}
"""SW thermal slowdown, the clock 28 % below its baseline."""
LOW_POWER = {"power_w": 15.0}
"""Steady clock, no reason bit, 15 W against its peer's 88 W: the GB10 slow state."""


def _straggling(
    gauges: Iterator[float], seconds: int, load: PageLoad, slow: dict[str, float] = THROTTLED
) -> list[tuple[float, bool]]:
    """A two-node TP group whose second node is slow (``slow``: its readings) throughout,
    its engine's running gauge from ``gauges``: per scrape, the gauge
    and whether ``tp.straggler`` held (pending or active); the alert engine has no profile,
    so no deficit is asked for."""
    from sparktop.alerts.model import Pending
    from tests.alert_samples import node, warm

    group = ("spark-1", "spark-2")
    alerts = AlertEngine(tp_groups={ENGINE: group})
    state = ClusterState()
    t0 = warm(state, group, -40.0, 40)  # baselines learnt before the engine's first scrape
    assert t0 == 0.0
    held: list[tuple[float, bool]] = []
    for sample in _scrapes(gauges, seconds, load):
        t = sample.time_s
        state.apply(node("spark-1", t))
        state.apply(node("spark-2", t, **slow))
        state.apply(sample)
        alerts.update(state, t)
        judged: list[Pending | object] = [*alerts.pending(), *alerts.active()]
        on = any(getattr(a, "rule", "") == "tp.straggler" for a in judged)
        held.append((float(sample.running), on))  # type: ignore[arg-type]
    return held


@pytest.mark.parametrize("slow", [THROTTLED, LOW_POWER], ids=["throttled", "low-power"])
def test_a_straggler_of_an_engine_whose_gauge_reads_0_between_batches_holds(
    slow: dict[str, float],
) -> None:
    """``tp.straggler`` (and the peer comparison that finds a rank's low power) asked the
    running gauge at each scrape, so the zeros between batches restarted its hold every
    third second and it never fired; the window's load decides (at least 5 s of running
    requests in it), as for the expected row."""
    held = _straggling(_between_requests(), 40, HALF_SPEED, slow)
    assert any(running == 0 for running, _ in held)
    assert all(on for _, on in held), held  # from the first scrape, never dropped at a 0


def test_no_straggler_for_an_engine_idle_over_its_window() -> None:
    """The other side: a window whose gauge read 0 throughout names no straggler, however
    slow a node of its group."""
    held = _straggling(iter(lambda: 0.0, None), 20, PageLoad())
    held += _straggling(iter(lambda: 0.0, None), 20, PageLoad(), LOW_POWER)
    assert held and not any(on for _, on in held)
