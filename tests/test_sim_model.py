"""The simulator's parts without servers: the GB10 responder, the engine's scheduler and KV
pool, the cluster's pacing, scenarios and the clock."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktop.sim.clock import SimClock
from sparktop.sim.engine import EngineModel, LoadSpec, Phase, prefill_concurrency
from sparktop.sim.gb10 import Gb10Responder
from sparktop.sim.gpu import Fault, GpuModel
from sparktop.sim.model import SimCluster
from sparktop.sim.rates import ProfileRates, default_max_num_seqs
from sparktop.sim.scenarios import SCENARIOS, Act, Player
from sparktop.sources import probe
from tests.conftest import CASES

FOUR = "4x-spark-dsv41-flash-1017"


def gpu(fault: Fault = Fault.NONE, loaded: bool = True) -> GpuModel:
    g = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
    g.fault, g.loaded = fault, loaded
    for _ in range(100):
        g.step(0.1)
    return g


def test_probe_header_is_spelled_like_a_real_gb10() -> None:
    case = (CASES / "nvidia-smi" / "gb10-query-with-header.csv").read_text().splitlines()
    fields = probe.gpu_fields(probe.REASONS_FIELD, counters=False)
    out, status = Gb10Responder(gpu()).run(probe.field_check_command(fields))
    header, row = out.splitlines()
    assert status == 0
    # The case's header, with the driver_version column the probe also asks for.
    assert header == case[0].replace(", pstate, ", ", pstate, driver_version, ")
    cells = row.split(", ")
    assert cells[2] == "NVIDIA GB10" and cells[8:10] == ["[N/A]", "[N/A]"]
    assert cells[-1] == "0x0000000000000000" and cells[-2].count(".") == 2  # 580.95.05


def test_thermal_and_hidden_low_power_rows_match_the_cases() -> None:
    thermal = (CASES / "nvidia-smi" / "gb10-thermal-slowdown.csv").read_text().splitlines()[1]
    stuck = (CASES / "nvidia-smi" / "gb10-hidden-low-power.csv").read_text().splitlines()[1]
    fields = probe.gpu_fields(probe.REASONS_FIELD, counters=False)
    for fault, case in ((Fault.THERMAL, thermal), (Fault.LOW_POWER, stuck)):
        out, _ = Gb10Responder(gpu(fault)).run(probe.field_check_command(fields))
        ours, theirs = out.splitlines()[1].split(", "), case.split(", ")
        assert ours[-1] == theirs[-1]  # the reason mask, bit for bit
        assert float(ours[3]) == pytest.approx(float(theirs[3]), abs=15)  # SM clock
        assert float(ours[6]) == pytest.approx(float(theirs[6]), abs=1.5)  # power
        assert float(ours[5]) == pytest.approx(float(theirs[5]), abs=2)  # temperature


def test_probe_sections_and_exit_statuses() -> None:
    out, status = Gb10Responder(gpu()).run(
        probe.probe_command(probe.FIELD_SETS[0], host_files=True)
    )
    assert status == 0
    marks = [ln for ln in out.splitlines() if ln.startswith(probe.MARK)]
    assert marks == [
        "@@sparktop:gpu", "@@sparktop:rc 0", "@@sparktop:meminfo", "@@sparktop:apps",
        "@@sparktop:rc 0", "@@sparktop:host", "@@sparktop:rc 0",
    ]  # fmt: skip
    assert "MemTotal:       127600748 kB" in out
    assert "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\nGPU-1, 4242, python3, " in out
    assert "clocks_event_reasons_counters.sw_thermal_slowdown [us]" in out


def test_old_driver_refuses_new_fields_like_nvidia_smi() -> None:
    old = Gb10Responder(gpu(), old_driver=True)
    out, status = old.run(probe.field_check_command(probe.FIELD_SETS[0]))
    assert status == 2
    assert out == 'Field "clocks_event_reasons.active" is not a valid field to query.\n\n'
    out, status = old.run(probe.field_check_command(probe.FIELD_SETS[2]))
    assert status == 0 and out.splitlines()[0].endswith(", clocks_throttle_reasons.active")
    out, status = old.run(probe.probe_command(probe.FIELD_SETS[0]))
    assert "@@sparktop:rc 2" in out and status == 0


def test_unknown_commands_answer_like_bash() -> None:
    responder = Gb10Responder(gpu())
    assert responder.run("uptime") == ("bash: uptime: command not found\n", 127)
    assert responder.run("nvidia-smi --query-gpu=bogus --format=csv")[1] == 2
    assert responder.run("cat /etc/shadow")[1] == 1


def test_idle_gpu_reports_the_idle_bit_and_low_utilisation() -> None:
    idle = gpu(loaded=False)
    assert idle.mask == 0x1 and idle.util_pct < 5 and idle.pstate == "P8"
    assert idle.power_w == pytest.approx(11.2, abs=1)


def small_engine(clients: int, prompt: int, pool: int = 100_000) -> EngineModel:
    rates = ProfileRates.load(FOUR, max_num_seqs=4, kv_pool_tokens=pool)
    load = LoadSpec(clients=clients, prompt_tokens=(prompt,), output_tokens=512, think_s=0.5)
    return EngineModel("e", "m", rates, random.Random(3), load)


def test_scheduler_respects_max_num_seqs_and_the_pool_and_preempts() -> None:
    engine = small_engine(clients=10, prompt=30_000)
    now, peak_waiting = 0.0, 0
    for _ in range(6000):
        now += 0.1
        engine.step(now, 0.1)
        assert len(engine.running) <= 4
        assert engine.used_blocks == sum(r.blocks for r in engine.running)
        assert 0 <= engine.used_blocks <= engine.limits.num_gpu_blocks
        assert all(r.phase in (Phase.PREFILL, Phase.DECODE) for r in engine.running)
        peak_waiting = max(peak_waiting, len(engine.waiting))
    assert peak_waiting > 0
    assert engine.stats.preemptions > 0
    assert engine.stats.success["length"] > 0
    assert engine.stats.prompt_len.count == engine.stats.success["length"]


def test_restart_drops_requests_and_zeroes_counters() -> None:
    engine = small_engine(clients=3, prompt=2_000, pool=1_000_000)
    for i in range(1, 300):
        engine.step(i * 0.1, 0.1)
    assert engine.stats.generation_tokens > 0
    engine.restart(30.0, downtime_s=3.0)
    assert engine.stats.generation_tokens == 0 and not engine.running and engine.used_blocks == 0
    assert not engine.is_up(31.0) and engine.is_up(33.0)


def test_restart_brings_every_background_client_back() -> None:
    engine = small_engine(clients=3, prompt=2_000, pool=1_000_000)
    for i in range(1, 300):
        engine.step(i * 0.1, 0.1)
    assert engine.running or engine.waiting  # requests in flight when the server goes
    engine.restart(30.0, downtime_s=3.0)
    now = 30.0
    while now < 80.0:
        now += 0.1
        engine.step(now, 0.1)
    assert engine.stats.success["length"] >= 3 * 3  # all three clients, several rounds each
    assert {r.client for r in engine.running} | {r.client for r in engine.waiting} | {
        i for i, due in enumerate(engine._next_client_s) if due is not None
    } == {0, 1, 2}


def test_pool_exhaustion_sessions_finish_on_their_own_and_the_pool_drains() -> None:
    cluster = SimCluster(ProfileRates.load(FOUR))
    cluster.advance_to(5.0)
    flood = cluster.flood("dsv41")
    engine = cluster.engines["dsv41"]
    cluster.advance_to(15.0)
    assert engine.kv_usage >= 0.9 and engine.waiting
    cluster.advance_to(900.0)
    assert all(r.phase is Phase.DONE and r.finish_reason == "length" for r in flood)
    assert engine.kv_usage < 0.05
    assert engine.stats.preemptions > 0


def test_long_prompt_next_to_short_ones_prefills_at_the_concurrency_1_rate() -> None:
    assert prefill_concurrency(501_869, [1_004, 3_800, 7_513, 14_955, 3_800, 1_004]) == 1
    assert prefill_concurrency(14_955, [14_955] * 7) == 8  # the sweep's own case
    assert prefill_concurrency(1_004, [7_513] * 5) == 6
    engine = small_engine(clients=0, prompt=1_000, pool=2_000_000)
    req = engine.new_request(0.0, 124_759, 128, tag="long-context")
    for i in range(1, 400):
        engine.step(i * 0.1, 0.1)
    # The 4-Spark sweep's 128K row at concurrency 1: TTFT 33.27 s.
    assert req.first_token_s == pytest.approx(33.27, abs=0.3)


def test_slowest_rank_sets_the_decode_pace() -> None:
    rates = ProfileRates.load(FOUR)
    fast = SimCluster(rates, seed=7)
    slow = SimCluster(rates, seed=7)
    slow.set_fault("spark-2", Fault.THERMAL)
    fast.advance_to(120.0)
    slow.advance_to(120.0)
    pace = slow.engines["dsv41"].pace
    assert pace == pytest.approx(1833 / 2522, abs=0.01)
    ratio = (
        slow.engines["dsv41"].stats.generation_tokens
        / fast.engines["dsv41"].stats.generation_tokens
    )
    assert ratio < 0.9


def test_same_seed_same_run() -> None:
    rates = ProfileRates.load(FOUR)
    a, b = SimCluster(rates, seed=11), SimCluster(rates, seed=11)
    for t in (10.0, 33.3, 60.0):
        a.advance_to(t)
    b.advance_to(60.0)
    assert a.engines["dsv41"].stats == b.engines["dsv41"].stats
    assert a.gpus["spark-3"].clock_mhz == b.gpus["spark-3"].clock_mhz


def test_max_num_seqs_is_raised_only_when_the_pool_could_never_fill() -> None:
    assert default_max_num_seqs(8, 11_434_628, 1_048_576) == 32
    assert default_max_num_seqs(6, 2_493_464, 1_048_576) == 6
    assert ProfileRates.load(FOUR).limits.max_num_seqs == 32


def test_tour_plays_every_fault_and_loops() -> None:
    tour = SCENARIOS["tour"]
    assert tour.period_s is not None and tour.period_s <= 430
    player = Player(tour, start_s=100.0)
    first = player.due(100.0 + tour.period_s - 0.1)
    # spec-collapse waits 45 s for an acceptance baseline of its own: a scenario by itself.
    assert set(first) == set(Act) - {Act.SPEC_COLLAPSE}
    assert player.due(100.0 + tour.period_s + 8.0) == [Act.RECOVER, Act.THERMAL]


def test_tour_faults_last_long_enough_for_a_5_s_hold_to_fire_and_clear() -> None:
    """Each fault is on screen >= 15 s (an alert holding 5 s fires inside it, with polls and
    the thermal ramp to spare) and >= 10 s pass before the next one (it clears first)."""
    tour = SCENARIOS["tour"]
    assert tour.period_s is not None
    ends = {Act.RECOVER, Act.END_FLOOD, Act.NODE_UP}
    # Not faults to alert on: the blip inside the pool exhaustion, the healthy load change.
    quiet = {Act.BLIP, Act.BLIP_END, Act.LOAD_SHIFT, Act.LOAD_BACK}
    steps = [*tour.steps, (tour.period_s, Act.RECOVER)]
    faults = [(at, act) for at, act in steps if act not in ends | quiet]
    assert [act for _, act in faults] == [
        Act.THERMAL, Act.LOW_POWER, Act.FLOOD, Act.NODE_DOWN, Act.RESTART, Act.LONG_CONTEXT,
        Act.STEADY_SLOW, Act.MEMORY_PRESSURE, Act.LINK_DOWN, Act.STALL,
    ]  # fmt: skip
    starts = [at for at, _ in faults]
    for (at, act), next_start in zip(faults, [*starts[1:], tour.period_s + 8.0], strict=True):
        end = next((t for t, a in steps if t > at and a in ends), None)
        if act in (Act.RESTART, Act.LONG_CONTEXT):
            assert next_start - at >= 8.0, act  # instant faults: room for the alert to clear
            continue
        assert end is not None and end - at >= 15.0, act
        if act in (Act.STEADY_SLOW, Act.MEMORY_PRESSURE, Act.LINK_DOWN):
            # Read by the slow tier every 10 s: 25 s on screen, 15 s to clear.
            assert end - at >= 25.0 and next_start - end >= 15.0, act
        assert next_start - end >= 10.0, act
    at = dict((act, t) for t, act in tour.steps)
    assert at[Act.FLOOD] < at[Act.BLIP] < at[Act.BLIP_END] < at[Act.END_FLOOD]
    # The load change waits for the long-context request (~40 s) and lasts over a window.
    assert (
        at[Act.LOAD_SHIFT] - at[Act.LONG_CONTEXT] >= 40
        and at[Act.LOAD_BACK] - at[Act.LOAD_SHIFT] >= 30
    )
    assert tour.long_prompt_tokens == 124_759


def test_single_scenarios_send_the_512k_prompt() -> None:
    assert SCENARIOS["long-context"].long_prompt_tokens == 501_869


def test_single_scenario_fires_once_and_holds() -> None:
    player = Player(SCENARIOS["thermal"], start_s=0.0)
    assert player.due(4.9) == []
    assert player.due(5.0) == [Act.THERMAL]
    assert player.due(1_000.0) == []


def test_clock_speed_and_pause() -> None:
    wall = [0.0]
    clock = SimClock(20.0, wall=lambda: wall[0])
    wall[0] = 1.0
    assert clock.now() == pytest.approx(20.0)
    clock.pause()
    wall[0] = 5.0
    assert clock.now() == pytest.approx(20.0)
    clock.resume()
    clock.speed = 1.0
    wall[0] = 7.0
    assert clock.now() == pytest.approx(22.0)
    with pytest.raises(ValueError):
        SimClock(0)


def test_inventory_names_a_profile_file_by_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sparktop sim --profile ./x.yaml` must write a path the inventory can resolve from its
    own folder (relative profile paths resolve against the inventory's directory)."""
    from sparktop.sim.runner import _profile_ref

    (tmp_path / "x.yaml").write_text("sparktop_profile: 1\n")
    monkeypatch.chdir(tmp_path)
    assert _profile_ref("./x.yaml") == str(tmp_path / "x.yaml")
    assert _profile_ref("4x-spark-dsv41-flash-1017") == "4x-spark-dsv41-flash-1017"


def test_ttft_and_prompt_tokens_are_recorded_at_the_first_token_as_vllm_does() -> None:
    """vLLM V1 observes TTFT and counts the prompt's tokens when the first token comes out,
    not when the request finishes: the expected TTFT is keyed on those requests (issue 28)."""
    engine = small_engine(0, 1000)
    req = engine.new_request(0.0, 4000, 500)
    t = 0.0
    while req.first_token_s is None:
        t += 0.1
        engine.step(t, 0.1)
    assert req.phase is Phase.DECODE  # running, far from its finish
    assert engine.stats.ttft.count == 1 and engine.stats.prompt_tokens == 4000
    assert engine.stats.prompt_len.count == 0  # request_prompt_tokens: at the finish
    # Stalled: no token, no prefill, the request stays running.
    engine.stalled = True
    before = engine.stats.generation_tokens
    for _ in range(50):
        t += 0.1
        engine.step(t, 0.1)
    assert engine.stats.generation_tokens == before and req in engine.running
