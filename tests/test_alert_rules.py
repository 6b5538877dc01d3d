"""Alert rules on sample sequences: throttling, hidden low power, pool, deficits, availability
(KV exhaustion and preemptions: ``test_alert_kv.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from sparktop.alerts.context import Expected, RuleContext
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.engine import profile_expected
from sparktop.alerts.model import Severity
from sparktop.alerts.rules import Finding, evaluate
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import EngineSample, EngineState, NodeSample, NodeState, Quantile
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.exposition.page import PromPage, parse_page
from sparktop.sources.nvsmi import parse_gpu_csv
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
from tests.alert_samples import cluster, counters, engine, engine_down, failed, node, warm
from tests.conftest import CASES


def run(
    state: ClusterState,
    *,
    tracker: CounterTracker | None = None,
    **context: object,
) -> dict[str, Finding]:
    tracker = tracker or CounterTracker(60.0)
    tracker.observe(state)
    ctx = RuleContext(state=state, thresholds=Thresholds(), counters=tracker, **context)  # type: ignore[arg-type]
    return {f.key: f for f in evaluate(ctx)}


# -- throttling --------------------------------------------------------------------------------


def test_healthy_loaded_cluster_raises_nothing() -> None:
    state = ClusterState()
    warm(state, ("spark-1", "spark-2"), 0.0, 20)
    state.apply(engine(t=20.0))
    assert run(state) == {}


def test_active_thermal_reason_is_a_throttle_on_that_gpu() -> None:
    state = cluster(
        node("spark-3", 0.0, sm_clock_mhz=1833.0, temperature_c=91.0, clock_event_mask=0x20)
    )
    found = run(state)
    throttle = found["gpu.throttle:spark-3/gpu0"]
    assert throttle.node == "spark-3" and throttle.severity is Severity.WARNING
    assert "1,833 MHz" in throttle.message and "sw_thermal_slowdown active" in throttle.message
    assert throttle.values["sm_clock_mhz"] == 1833.0
    assert "gpu.temperature:spark-3/gpu0" in found  # 91 °C > 85 °C


def test_benign_reasons_are_not_throttling() -> None:
    # idle 0x1, applications clocks 0x2, sync boost 0x10, display 0x100
    state = cluster(node("spark-1", 0.0, clock_event_mask=0x1 | 0x2 | 0x10 | 0x100))
    assert run(state) == {}


def test_every_slowdown_reason_counts() -> None:
    for mask, label in (
        (0x4, "sw_power_cap"),
        (0x8, "hw_slowdown"),
        (0x40, "hw_thermal_slowdown"),
        (0x80, "hw_power_brake_slowdown"),
    ):
        found = run(cluster(node("spark-1", 0.0, clock_event_mask=mask)))
        assert label in found["gpu.throttle:spark-1/gpu0"].message


def test_growing_slowdown_counter_is_a_throttle_even_without_the_bit() -> None:
    state, tracker = ClusterState(), CounterTracker(60.0)
    for i, total in enumerate((100.0, 103.0, 106.0, 109.0)):
        state.apply(node("spark-2", float(i * 15), counters=counters(total)))
        tracker.observe(state)
    found = run(state, tracker=tracker)
    assert (
        "sw_thermal_slowdown +9 s in the last minute" in found["gpu.throttle:spark-2/gpu0"].message
    )


def test_counter_reset_is_not_negative_growth() -> None:
    state, tracker = ClusterState(), CounterTracker(60.0)
    for i, total in enumerate((5000.0, 5000.0, 0.0, 0.0)):  # driver reload zeroes the counters
        state.apply(node("spark-2", float(i), counters=counters(total)))
        tracker.observe(state)
    assert tracker.growth_s("spark-2", "GPU-test-0") == {}
    assert run(state, tracker=tracker) == {}


def test_clock_drop_against_the_gpus_own_baseline() -> None:
    state = ClusterState()
    t = warm(state, ("spark-1",), 0.0, 30)  # baseline ≈ 2515 MHz
    state.apply(node("spark-1", t, sm_clock_mhz=2300.0))  # −8.5 %: within 10 %
    assert run(state) == {}
    state.apply(node("spark-1", t + 1, sm_clock_mhz=2100.0))  # −16.5 %
    found = run(state)["gpu.throttle:spark-1/gpu0"]
    assert "17 % below its 2,515 MHz baseline" in found.message
    assert found.values["baseline_mhz"] == 2515.0


def test_low_clock_at_idle_is_not_a_drop_and_max_clock_is_not_the_reference() -> None:
    state = ClusterState()
    t = warm(state, ("spark-1",), 0.0, 30)
    state.apply(node("spark-1", t, sm_clock_mhz=900.0, utilization_pct=3.0, power_w=12.0))
    assert run(state) == {}
    # 2,515 of 3,003 MHz max is normal GB10 load, not a 16 % drop.
    assert run(cluster(node("spark-2", 0.0))) == {}


def test_profile_baseline_is_the_fallback_before_a_gpu_has_its_own() -> None:
    state = cluster(node("spark-1", 0.0, sm_clock_mhz=2000.0))
    assert run(state) == {}
    found = run(state, profile_baseline_mhz=2509.0)
    assert "20 % below its 2,509 MHz baseline" in found["gpu.throttle:spark-1/gpu0"].message


def test_temperature_over_threshold_only() -> None:
    assert run(cluster(node("spark-1", 0.0, temperature_c=85.0))) == {}
    found = run(cluster(node("spark-1", 0.0, temperature_c=86.0)))
    assert list(found) == ["gpu.temperature:spark-1/gpu0"]


# -- hidden low power --------------------------------------------------------------------------


def test_hidden_low_power_pattern_without_baseline_uses_max_clock() -> None:
    state = cluster(
        node(
            "spark-4",
            0.0,
            sm_clock_mhz=513.0,
            utilization_pct=100.0,
            power_w=14.9,
            temperature_c=47.0,
        )
    )
    found = run(state)
    assert list(found) == ["gpu.hidden_low_power:spark-4/gpu0"]  # not also a throttle
    message = found["gpu.hidden_low_power:spark-4/gpu0"].message
    assert "possible hidden low-power state" in message and "513 MHz" in message
    assert "14.9 W" in message and "3,003 MHz max" in message


def test_hidden_low_power_needs_all_three_signs_and_no_bit() -> None:
    low: dict[str, Any] = {"sm_clock_mhz": 513.0, "utilization_pct": 100.0, "power_w": 14.9}
    for change in ({"utilization_pct": 40.0}, {"power_w": 60.0}, {"sm_clock_mhz": 2400.0}):
        found = run(cluster(node("spark-4", 0.0, **{**low, **change})))
        assert "gpu.hidden_low_power:spark-4/gpu0" not in found
    with_bit = run(cluster(node("spark-4", 0.0, **low, clock_event_mask=0x20)))
    assert "gpu.hidden_low_power:spark-4/gpu0" not in with_bit
    assert "gpu.throttle:spark-4/gpu0" in with_bit


# -- availability ------------------------------------------------------------------------------


def test_unreachable_node_is_critical_and_driver_states_are_warnings() -> None:
    found = run(cluster(failed("spark-2", 5.0, NodeState.UNREACHABLE)))
    down = found["node.down:spark-2"]
    assert down.severity is Severity.CRITICAL and "unreachable since" in down.message
    assert "connection refused" in down.message
    found = run(cluster(failed("spark-2", 5.0, NodeState.DRIVER_MISMATCH)))
    # The node answers (its driver does not): up, with a warning of its own, not node.down.
    assert "node.down:spark-2" not in found
    assert found["node.gpu_unavailable:spark-2"].severity is Severity.WARNING


def test_engine_unreachable_disabled_stale_and_restarted() -> None:
    found = run(
        cluster(
            engine_down("a", 1.0),
            engine_down("b", 1.0, EngineState.METRICS_DISABLED),
            engine_down("c", 1.0, EngineState.STALE),
            engine("d", 1.0, restarted=True),
        )
    )
    assert "unreachable" in found["engine.down:a"].message
    assert "metrics disabled" in found["engine.down:b"].message
    assert "stale" in found["engine.stale:c"].message and "engine.down:c" not in found
    assert found["engine.restarted:d"].instant


# -- pool exhaustion ---------------------------------------------------------------------------


def test_kv_usage_warning_then_critical_with_waiting() -> None:
    found = run(cluster(engine(kv_usage=0.93, kv_used_tokens=2_318_921.0)))
    assert found["kv.usage:dsv41"].severity is Severity.WARNING
    assert "93.0 % full (2,318,921 of 2,493,464 tokens)" in found["kv.usage:dsv41"].message
    assert "queue.pool_bound:dsv41" not in found
    found = run(cluster(engine(kv_usage=0.99, waiting=3.0)))
    assert found["kv.usage:dsv41"].severity is Severity.CRITICAL
    assert "pool-bound: 3 waiting" in found["queue.pool_bound:dsv41"].message


def test_waiting_at_max_num_seqs_is_scheduler_bound_not_pool_bound() -> None:
    found = run(cluster(engine(running=6.0, waiting=2.0, kv_usage=0.41)))
    assert "queue.pool_bound:dsv41" not in found
    assert "scheduler-bound: 2 waiting with running 6 = max_num_seqs 6" in (
        found["queue.scheduler_bound:dsv41"].message
    )


def test_scheduler_limit_from_inventory_when_metrics_lack_it() -> None:
    from sparktop.model import NA

    sample = engine(running=8.0, waiting=1.0, max_num_seqs=NA("not exported"))
    assert run(cluster(sample)) == {}
    found = run(cluster(sample), max_num_seqs={"dsv41": 8.0})
    assert "queue.scheduler_bound:dsv41" in found


# -- expected deficit and the tensor-parallel straggler ----------------------------------------


def expected_row(sample: EngineSample) -> Expected:
    return Expected(prompt_tokens=2048.0, concurrency=2, ttft_s=1.11, decode_tps=57.0)


def test_expected_deficits_ttft_and_decode() -> None:
    # 2-Spark profile row 2,048 × 2: TTFT 1.11 s, decode 57.0 tok/s per stream.
    live = engine(ttft_p50=Quantile(1.60), itl_mean_s=1 / 35.3)
    found = run(cluster(live), expected=expected_row)
    assert (
        "TTFT 44 % above expected (p50 1.60 s vs profile TTFT 1.11 s"
        in found["expected.ttft:dsv41"].message
    )
    assert (
        "decode 38 % below expected (1/mean ITL 35.3 vs profile 57.0 tok/s"
        in found["expected.decode:dsv41"].message
    )
    ok = engine(ttft_p50=Quantile(1.2), itl_mean_s=1 / 50.0)
    assert run(cluster(ok), expected=expected_row) == {}


def test_a_deficit_against_another_models_profile_says_so() -> None:
    note = "the profile measured DeepSeek V4 Flash 0731; this engine serves Qwen/Qwen3-32B"

    def other_model(sample: EngineSample) -> Expected:
        return dataclasses.replace(expected_row(sample), model_note=note)

    live = engine(ttft_p50=Quantile(1.60), itl_mean_s=1 / 35.3)
    found = run(cluster(live), expected=other_model)
    assert f"; {note})" in found["expected.ttft:dsv41"].message
    assert f"; {note})" in found["expected.decode:dsv41"].message
    # The note after the band, which would otherwise read as part of the served name.
    banded = Expected(2048.0, 2, 1.11, 57.0, 1.0, 1.3, 50.0, 65.0, model_note=note)
    found = run(cluster(live), expected=lambda sample: banded)
    assert f"band ≥ 50.0 tok/s; {note})" in found["expected.decode:dsv41"].message


def test_a_live_value_inside_the_band_is_no_deficit_whatever_the_percentage() -> None:
    # 44 % above / 38 % below the row, but the estimator's band there is wider.
    def wide(sample: EngineSample) -> Expected:
        return Expected(2048.0, 2, 1.11, 57.0, 0.7, 1.8, 30.0, 90.0)

    live = engine(ttft_p50=Quantile(1.60), itl_mean_s=1 / 35.3)
    assert run(cluster(live), expected=wide) == {}

    def narrow(sample: EngineSample) -> Expected:
        return Expected(2048.0, 2, 1.11, 57.0, 1.0, 1.3, 50.0, 65.0)

    found = run(cluster(live), expected=narrow)
    assert "band ≤ 1.30 s)" in found["expected.ttft:dsv41"].message
    assert "band ≥ 50.0 tok/s)" in found["expected.decode:dsv41"].message
    # Outside the band but under the threshold: still no deficit.
    near = engine(ttft_p50=Quantile(1.35), itl_mean_s=1 / 48.0)
    assert run(cluster(near), expected=narrow) == {}


def test_ttft_known_only_as_an_upper_bound_is_no_deficit() -> None:
    live = engine(ttft_p50=Quantile(2.5, "<"), itl_p50=Quantile(0.01, "<"))
    assert run(cluster(live), expected=expected_row) == {}


def test_idle_engine_has_no_deficit() -> None:
    """Idle is the window's load, which the profile's row is asked for (no row: nothing to
    compare), not the running gauge at one scrape (tests/test_expected_between_requests.py).
    Without a window yet, the load is this scrape's."""
    row = profile_expected(load_profile(DEFAULT_PROFILE))
    assert run(cluster(engine(running=0.0, itl_mean_s=1.0)), expected=row) == {}
    assert "expected.decode:dsv41" in run(cluster(engine(itl_mean_s=1.0)), expected=row)


def test_straggler_names_the_node_and_ties_it_to_the_decode_deficit() -> None:
    state, tracker = ClusterState(), CounterTracker(60.0)
    t = warm(state, ("spark-1", "spark-2", "spark-3"), 0.0, 30)
    for i, total in enumerate((100.0, 103.0, 106.0, 109.0)):
        state.apply(
            node(
                "spark-3",
                t + i * 15,
                sm_clock_mhz=1833.0,
                clock_event_mask=0x20,
                counters=counters(total),
            )
        )
        tracker.observe(state)
    state.apply(engine(t=t + 45, itl_mean_s=1 / 35.3))
    found = run(
        state,
        tracker=tracker,
        expected=expected_row,
        tp_groups={"dsv41": ("spark-1", "spark-2", "spark-3")},
    )
    # One alert per figure: the decode deficit's own alert escalates to critical and names
    # the node; the straggler is the node's alert, a warning without the deficit's numbers.
    straggler = found["tp.straggler:dsv41@spark-3"]
    assert straggler.node == "spark-3" and straggler.severity is Severity.WARNING
    assert straggler.message == (
        "held back by spark-3 at 1,833 MHz: sw_thermal_slowdown +9 s in the last minute, "
        "27 % below its 2,515 MHz baseline; slow throughout the window (10 s): the cause of "
        "the engine's decode deficit (expected.decode)"
    )
    assert "%" not in straggler.message.split("; ", 1)[1].split(":")[0]
    decode = found["expected.decode:dsv41"]
    assert decode.severity is Severity.CRITICAL
    assert "decode 38 % below expected" in decode.message
    assert "cause: spark-3 slow throughout the window" in decode.message
    assert "sw_thermal_slowdown" in decode.message
    # Against another model's profile the critical says so too, as the warnings do.
    note = "the profile measured DeepSeek V4 Flash 0731; this engine serves Qwen/Qwen3-32B"

    def other_model(sample: EngineSample) -> Expected:
        return dataclasses.replace(expected_row(sample), model_note=note)

    found = run(
        state,
        tracker=tracker,
        expected=other_model,
        tp_groups={"dsv41": ("spark-1", "spark-2", "spark-3")},
    )
    critical = found["expected.decode:dsv41"]
    assert critical.severity is Severity.CRITICAL and note in critical.message


GROUP = ("spark-1", "spark-2", "spark-3")


def _blip_then_back(state: ClusterState, tracker: CounterTracker, t: float) -> float:
    """spark-3 throttles for 3 s (its counter grows 3 s), then its clock is back."""
    for i in range(3):
        state.apply(node("spark-3", t + i, sm_clock_mhz=1833.0, clock_event_mask=0x20,
                         counters=counters(100.0 + i)))  # fmt: skip
        tracker.observe(state)
    for i in range(3, 6):
        for name in GROUP:
            state.apply(node(name, t + i, counters=counters(103.0)))
        tracker.observe(state)
    return t + 6


def test_a_full_pool_explains_the_deficit_and_a_node_whose_clock_is_back_is_not_blamed() -> None:
    state, tracker = ClusterState(), CounterTracker(60.0)
    t = warm(state, GROUP, 0.0, 30)
    t = _blip_then_back(state, tracker, t)
    state.apply(engine(t=t, itl_mean_s=1 / 35.3, kv_usage=0.969, preemptions_per_s=1.5,
                       window_start_s=t - 30))  # fmt: skip
    found = run(state, tracker=tracker, expected=expected_row, tp_groups={"dsv41": GROUP})
    decode = found["expected.decode:dsv41"]
    assert decode.severity is Severity.WARNING
    assert "cause: pool pressure: KV 96.9 %, 1.50 preemptions/s" in decode.message
    assert not any(k.startswith("tp.straggler") for k in found), found
    assert "spark-3" not in decode.message


def test_a_node_slow_for_a_moment_of_the_window_explains_nothing() -> None:
    """Slow now, but only for the last 3 s of a 30 s window: the deficit is unexplained (a
    warning that says so); the node is only 'holding the group back', never critical."""
    state, tracker = ClusterState(), CounterTracker(60.0)
    t = warm(state, GROUP, 0.0, 30)
    for i in range(3):
        state.apply(node("spark-3", t + i, sm_clock_mhz=1833.0, clock_event_mask=0x20))
    state.apply(engine(t=t + 2, itl_mean_s=1 / 35.3, window_start_s=t - 28))
    found = run(state, tracker=tracker, expected=expected_row, tp_groups={"dsv41": GROUP})
    decode = found["expected.decode:dsv41"]
    assert decode.severity is Severity.WARNING and "no cause found yet" in decode.message
    # ... but not "no slow node": the node another alert names is said, with its overlap.
    assert "spark-3 is slow (" in decode.message
    assert "only for 2 s of the 30 s window (named once it covers half)" in decode.message
    straggler = found["tp.straggler:dsv41@spark-3"]
    assert straggler.severity is Severity.WARNING and "held back by spark-3" in straggler.message


def _slow_then_back(state: ClusterState, t: float, slow_s: int, back_s: int) -> float:
    """spark-3 at 511 MHz (no reason bit, 14.8 W: the hidden low-power pattern) for
    ``slow_s`` polls, then every node at its clock for ``back_s`` polls."""
    for i in range(slow_s):
        for name in GROUP:
            low = name == "spark-3"
            state.apply(node(name, t + i, sm_clock_mhz=511.0 if low else 2500.0,
                             utilization_pct=100.0, power_w=14.8 if low else 40.0))  # fmt: skip
    for i in range(slow_s, slow_s + back_s):
        for name in GROUP:
            state.apply(node(name, t + i))
    return t + slow_s + back_s


def test_a_node_slow_for_most_of_the_window_explains_it_after_its_clock_is_back() -> None:
    """Low power for 20 s of a 30 s window, clock back for the last 6 s: the window's
    deficit is that node's (said, with how long it has been back); never the straggler."""
    state = ClusterState()
    t = warm(state, GROUP, 0.0, 30)
    t = _slow_then_back(state, t, 20, 6)
    state.apply(engine(t=t, itl_mean_s=1 / 35.3, window_start_s=t - 30))
    found = run(state, expected=expected_row, tp_groups={"dsv41": GROUP})
    decode = found["expected.decode:dsv41"]
    assert decode.severity is Severity.WARNING
    assert "cause: spark-3 was slow for 67% of the window (20 s, down to 511 MHz)" in (
        decode.message
    ), decode.message
    assert "its clock back for 6 s" in decode.message
    assert not any(k.startswith("tp.straggler") for k in found), found


def test_a_node_slow_for_a_moment_of_the_window_and_back_is_said_but_not_blamed() -> None:
    state = ClusterState()
    t = warm(state, GROUP, 0.0, 30)
    t = _slow_then_back(state, t, 4, 10)
    state.apply(engine(t=t, itl_mean_s=1 / 35.3, window_start_s=t - 30))
    found = run(state, expected=expected_row, tp_groups={"dsv41": GROUP})
    decode = found["expected.decode:dsv41"]
    assert "no cause found:" in decode.message and "cause: spark-3" not in decode.message
    assert "no node slow for half the window (spark-3 was slow for 4 s of it, back for 10 s)" in (
        decode.message
    ), decode.message


def test_an_unexplained_deficit_is_a_warning_that_says_it_found_no_cause() -> None:
    state = cluster(*(node(n, 0.0) for n in GROUP), engine(itl_mean_s=1 / 35.3))
    found = run(state, expected=expected_row, tp_groups={"dsv41": GROUP})
    decode = found["expected.decode:dsv41"]
    assert decode.severity is Severity.WARNING
    assert decode.message.endswith(
        "no cause found: no queueing, pool pressure, speculative acceptance drop or slow node "
        "in the window"
    )
    assert not any(f.severity is Severity.CRITICAL for f in found.values())


def test_queue_time_explains_a_ttft_deficit_no_scrape_caught_waiting() -> None:
    """Requests waited between scrapes (waiting 0 at each, mean queue time 45 % of the TTFT
    p50): the deficit is queueing, not 'no queueing'."""
    live = engine(ttft_p50=Quantile(1.60), waiting=0.0, running=2.0, queue_time_mean_s=0.72)
    message = run(cluster(live), expected=expected_row)["expected.ttft:dsv41"].message
    assert "cause: queueing: requests waited for capacity between the window's scrapes" in (
        message
    ), message
    assert "no queueing" not in message


def test_queueing_explains_a_ttft_deficit_before_the_pool() -> None:
    live = engine(ttft_p50=Quantile(1.60), waiting=3.0, running=2.0, kv_usage=0.95)
    found = run(cluster(live), expected=expected_row)
    assert "cause: queueing: up to 3 waiting for capacity" in found["expected.ttft:dsv41"].message


def test_straggler_without_profile_is_a_warning_naming_the_slowest_member() -> None:
    state = ClusterState()
    t = warm(state, ("spark-1", "spark-2"), 0.0, 30)
    state.apply(node("spark-2", t, sm_clock_mhz=513.0, utilization_pct=100.0, power_w=14.9))
    state.apply(engine(t=t))
    found = run(state, tp_groups={"dsv41": ("spark-1", "spark-2")})
    straggler = found["tp.straggler:dsv41@spark-2"]
    assert straggler.severity is Severity.WARNING and straggler.node == "spark-2"
    assert "held back by spark-2 at 513 MHz" in straggler.message
    assert "hidden low-power" in straggler.message


def test_throttled_node_outside_the_group_is_not_a_straggler() -> None:
    state = cluster(node("spark-9", 0.0, clock_event_mask=0x20), engine())
    found = run(state, tp_groups={"dsv41": ("spark-1", "spark-2")})
    assert (
        not any(k.startswith("tp.straggler") for k in found)
        and "gpu.throttle:spark-9/gpu0" in found
    )


def test_thresholds_from_inventory_section() -> None:
    from sparktop.inventory.models import AlertThresholds

    t = Thresholds.from_config(AlertThresholds(kv_usage_pct=80, hold_s=3))
    assert t.kv_usage_pct == 80.0 and t.hold_s == 3.0 and t.temperature_c == 85.0
    assert Thresholds.from_config(None) == Thresholds()


# -- case files (../shared/cases) --------------------------------------------------------------


def _case_node(filename: str, name: str) -> ClusterState:
    gpus = parse_gpu_csv((CASES / "nvidia-smi" / filename).read_text())
    return cluster(NodeSample(node=name, time_s=0.0, gpus=gpus))


def test_case_gb10_thermal_slowdown_csv_is_a_throttle_alert_on_that_node() -> None:
    found = run(_case_node("gb10-thermal-slowdown.csv", "spark-3"))
    throttle = found["gpu.throttle:spark-3/gpu0"]
    assert throttle.node == "spark-3" and throttle.gpu == "GPU-5f1c0000-0000-0000-0000-00000000a1b3"
    assert "1,833 MHz" in throttle.message and "sw_thermal_slowdown active" in throttle.message
    assert "91 °C" in found["gpu.temperature:spark-3/gpu0"].message
    assert "gpu.hidden_low_power:spark-3/gpu0" not in found


def test_case_gb10_hidden_low_power_csv_is_flagged() -> None:
    found = run(_case_node("gb10-hidden-low-power.csv", "spark-4"))
    assert list(found) == ["gpu.hidden_low_power:spark-4/gpu0"]
    message = found["gpu.hidden_low_power:spark-4/gpu0"].message
    assert "possible hidden low-power state: 513 MHz" in message and "14.9 W" in message


def _deriver() -> MetricsDeriver:
    return MetricsDeriver("dsv4", window_s=30.0, stale_after_s=20.0)


def _page(filename: str) -> PromPage:
    return parse_page((CASES / "metrics" / filename).read_text())


def test_case_counter_reset_prom_raises_a_restart_alert_and_no_negative_rate() -> None:
    deriver = _deriver()
    first = deriver.derive(_page("counter-reset-1.prom"), now_s=0.0, wall_s=1000.0)
    second = deriver.derive(_page("counter-reset-2.prom"), now_s=1.0, wall_s=1001.0)
    assert not first.restarted and second.restarted
    found = run(cluster(first, second))
    assert found["engine.restarted:dsv4"].instant
    rates = (second.decode_tps, second.prefill_tps)
    assert not any(isinstance(r, float) and r < 0 for r in rates)


def test_case_stale_gauges_raise_a_stale_alert() -> None:
    # nan-gauge.prom: running = 3 and no counter moves between scrapes → frozen gauges
    # (stale from 20 s). With requests running, no token and the page answering for stall_s
    # (20 s) that is the stalled engine (critical), which says it instead of engine.stale.
    deriver = _deriver()
    samples = [
        deriver.derive(_page("nan-gauge.prom"), now_s=float(i), wall_s=1000.0 + i)
        for i in range(0, 31, 5)
    ]
    # degraded (its waiting gauge is NaN) until the frozen gauges make it stale
    assert samples[0].state is EngineState.DEGRADED and samples[-1].state is EngineState.STALE
    found = run(cluster(*samples))  # 30 s frozen
    stalled = found["engine.stalled:dsv4"]
    assert stalled.severity is Severity.CRITICAL and "3" in stalled.message
    assert "engine.stale:dsv4" not in found  # one verdict, not both
    assert "kv.usage:dsv4" not in found  # no verdicts from frozen gauges


def test_lifetime_figures_of_a_first_scrape_are_no_deficit() -> None:
    lifetime = ("ttft_p50", "itl_mean_s")
    live = engine(ttft_p50=Quantile(9.0), itl_mean_s=0.1, since_start=lifetime)
    assert run(cluster(live), expected=expected_row) == {}
    preempted = engine(preemptions_per_s=2.0, since_start=("preemptions_per_s",))
    assert run(cluster(preempted)) == {}


def test_a_counter_that_stopped_growing_is_no_longer_evidence() -> None:
    state, tracker = ClusterState(), CounterTracker(60.0)
    for i, total in enumerate((100.0, 109.0, 109.0)):  # grew, then stopped
        state.apply(node("spark-2", float(i * 5), counters=counters(total)))
        tracker.observe(state)
    assert tracker.growth_s("spark-2", "GPU-test-0") == {}
    assert run(state, tracker=tracker) == {}


def test_profile_baseline_of_other_hardware_is_ignored() -> None:
    # An H100-like GPU (max 1,980 MHz) watched with the GB10 profile (2,509 MHz loaded).
    other = node("h100", 0.0, sm_clock_mhz=1755.0, max_sm_clock_mhz=1980.0)
    assert run(cluster(other), profile_baseline_mhz=2509.0) == {}


def test_a_long_stuck_state_does_not_become_the_baseline() -> None:
    state = ClusterState()
    t = warm(state, ("spark-3",), 0.0, 10)
    stuck = {"sm_clock_mhz": 513.0, "utilization_pct": 100.0, "power_w": 14.9}
    learnt = state.baseline_mhz("spark-3", "GPU-test-0")
    for i in range(200):  # under half the max clock: never learnt as the baseline
        state.apply(node("spark-3", t + i, **stuck))
    assert state.baseline_mhz("spark-3", "GPU-test-0") == learnt
    found = run(state)
    assert f"{learnt:,.0f} MHz baseline" in found["gpu.hidden_low_power:spark-3/gpu0"].message
    state.apply(node("spark-3", t + 300, sm_clock_mhz=1833.0, clock_event_mask=0x20))
    for i in range(200):
        state.apply(node("spark-3", t + 301 + i, sm_clock_mhz=1833.0))
    found = run(state, profile_baseline_mhz=2509.0)
    assert "27 % below its 2,509 MHz baseline" in found["gpu.throttle:spark-3/gpu0"].message


def test_decode_comes_from_mean_itl_not_the_coarse_p50() -> None:
    # 82 tok/s expected; every rate from 40 to 100 tok/s puts ITL p50 at ~17.5 ms (57 tok/s).
    def row(sample: EngineSample) -> Expected:
        return Expected(prompt_tokens=7525.0, concurrency=2, ttft_s=5.0, decode_tps=82.0)

    healthy = engine(itl_p50=Quantile(0.0175), itl_mean_s=1 / 80.0)
    assert run(cluster(healthy), expected=row) == {}
    unknown = engine(itl_p50=Quantile(0.0175))
    assert run(cluster(unknown), expected=row) == {}
    beyond = engine(itl_p50=Quantile(20.0, ">"))  # slower than the last edge: certainly slow
    assert "expected.decode:dsv41" in run(cluster(beyond), expected=row)


def test_failure_messages_do_not_repeat_the_sources_own_since() -> None:
    from sparktop.model import NodeSample

    ssh = NodeSample(
        node="spark-4",
        time_s=10.0,
        state=NodeState.UNREACHABLE,
        message="unreachable since 16:56:58: connection refused",
        since_s=9.0,
    )
    found = run(cluster(ssh))
    assert found["node.down:spark-4"].message == "unreachable since 16:56:58: connection refused"


def test_the_profiles_expected_row_carries_the_estimators_band() -> None:
    from sparktop.alerts.engine import profile_expected
    from sparktop.sweep.profiles.loader import load_profile

    expected = profile_expected(load_profile("4x-spark-dsv41-flash-1017"))
    assert expected is not None
    row = expected(engine(running=3.0, mean_prompt_tokens=20_000.0))
    assert row is not None and row.ttft_s is not None and row.decode_tps is not None
    assert row.ttft_low_s is not None and row.ttft_high_s is not None
    assert row.ttft_low_s < row.ttft_s < row.ttft_high_s
    assert row.decode_low_tps is not None and row.decode_high_tps is not None
    assert row.decode_low_tps < row.decode_tps < row.decode_high_tps


def test_with_a_queue_ttft_is_compared_without_it_when_the_server_exports_prefill_time() -> None:
    """Like for like: the profile's TTFT has no queue. Requests waited, and the server says
    how long prefill took (scheduled → first token): that is what is compared."""
    queued = engine(ttft_p50=Quantile(3.0), waiting=3.0, prefill_time_p50=Quantile(1.15))
    assert "expected.ttft:dsv41" not in run(cluster(queued), expected=expected_row)
    slow = engine(ttft_p50=Quantile(3.0), waiting=3.0, prefill_time_p50=Quantile(1.8))
    ttft = run(cluster(slow), expected=expected_row)["expected.ttft:dsv41"]
    assert "(p50 w/o queue 1.80 s vs profile TTFT 1.11 s" in ttft.message
    assert "cause: queueing" not in ttft.message  # the queue is not in the figure compared
    # Without prefill time the TTFT p50 is compared, said to include the queue.
    bare = engine(ttft_p50=Quantile(3.0), waiting=3.0)
    msg = run(cluster(bare), expected=expected_row)["expected.ttft:dsv41"].message
    assert "includes queueing (up to 3 waiting in the window)" in msg and "cause: queueing" in msg


def test_one_name_per_clock_event_reason_in_every_output() -> None:
    """`sw_thermal_slowdown` in snapshot, `sw-therm` in the monitor, `SW thermal slowdown` in
    the alert: nvidia-smi's field name is the one name (alerts, snapshot text and JSON, node
    details); the Nodes table's short form is listed beside that name on the help screen."""
    from sparktop.alerts import Thresholds
    from sparktop.alerts.counters import COUNTER_LABELS
    from sparktop.model import CLOCK_EVENT_BITS, SlowdownCounters
    from sparktop.report.snapshot_table import reasons_text
    from sparktop.snapshot import gpu_json
    from sparktop.ui.format import SHORT_REASONS
    from sparktop.ui.gpu_fields import counters_text
    from sparktop.ui.screens.help import node_column_help

    state = cluster(node("spark-3", 0.0, sm_clock_mhz=1833.0, clock_event_mask=0x20))
    message = run(state)["gpu.throttle:spark-3/gpu0"].message
    sample = state.nodes["spark-3"]
    (g,) = sample.gpus
    assert "sw_thermal_slowdown active" in message
    assert reasons_text(g) == "sw_thermal_slowdown"
    assert gpu_json(g)["clock_events"] == ["sw_thermal_slowdown"]
    assert counters_text(SlowdownCounters(1e6, 0.0, 0.0, 0.0)).startswith("sw_thermal_slowdown 1 s")
    assert set(COUNTER_LABELS.values()) <= set(CLOCK_EVENT_BITS.values())
    assert set(SHORT_REASONS) == set(CLOCK_EVENT_BITS.values())
    help_why = next(text for key, text, _ in node_column_help(Thresholds()) if key == "why")
    for name, short in SHORT_REASONS.items():
        assert f"`{short}` {name}" in help_why, name
