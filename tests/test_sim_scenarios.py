"""The simulator end to end: sparktop's own SSH and HTTP sources poll it over loopback, and
each injected fault shows up in what the collectors report."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from sparktop.model import EngineSample, EngineState, NodeSample, NodeState, is_num
from sparktop.sim.engine import LoadSpec
from sparktop.sim.gpu import MEM_TOTAL_KB
from sparktop.sim.scenarios import LEAD_S
from tests.sim_helpers import (
    engine_sample,
    engine_source,
    node_sample,
    node_sources,
    num,
    running_sim,
    samples,
    until,
)
from tests.stepped_harness import step_to, stepped_sim


async def test_normal_run_looks_like_a_loaded_gb10_cluster() -> None:
    async with running_sim(speed=10) as sim:
        nodes = node_sources(sim)
        engine = engine_source(sim)
        try:
            results = await asyncio.gather(*(node_sample(s) for s in nodes.values()))
            eng = await until(lambda: engine_sample(engine), lambda e: e.ok and num(e.running) >= 1)
        finally:
            await asyncio.gather(*(s.aclose() for s in [*nodes.values(), engine]))
    assert [r.node for r in results] == ["spark-1", "spark-2", "spark-3", "spark-4"]
    for sample in results:
        assert sample.state is NodeState.OK, sample.message
        (gpu,) = sample.gpus
        assert gpu.name == "NVIDIA GB10"
        assert 2480 <= num(gpu.sm_clock_mhz) <= 2570
        assert gpu.max_sm_clock_mhz == 3003
        assert 50 <= num(gpu.temperature_c) <= 58
        assert num(gpu.utilization_pct) >= 90
        assert gpu.clock_event_mask == 0
        assert not is_num(gpu.memory_used_mib)  # [N/A] on GB10
        assert sample.memory.unified
        assert sample.memory.total_mib == pytest.approx(MEM_TOTAL_KB / 1024)
        assert num(gpu.process_memory_mib) > 90_000
    assert eng.kv_pool_tokens == 11_434_628
    assert eng.kv_pool_source.startswith("cache_config_info")
    assert eng.max_model_len == 1_048_576
    assert eng.waiting == 0


async def test_thermal_sags_one_node_with_the_thermal_bit() -> None:
    async with running_sim(speed=20, scenario="thermal") as sim:
        hot = sim.targets.thermal
        nodes = node_sources(sim)
        try:
            sample = await until(
                lambda: node_sample(nodes[hot]),
                lambda s: (
                    s.ok
                    and s.gpus[0].clock_event_mask == 0x20
                    and num(s.gpus[0].temperature_c) >= 90
                ),
            )
            cool = await node_sample(nodes["spark-1"])
        finally:
            await asyncio.gather(*(s.aclose() for s in nodes.values()))
    gpu = sample.gpus[0]
    assert hot == "spark-2"
    assert gpu.sm_clock_mhz == pytest.approx(1833, abs=15)
    assert gpu.slowdowns == ("sw_thermal_slowdown",)
    assert num(gpu.counters.sw_thermal_us) > 0
    assert cool.gpus[0].clock_event_mask == 0
    assert num(cool.gpus[0].sm_clock_mhz) > 2400


async def test_hidden_low_power_is_slow_busy_quiet_and_has_no_bit() -> None:
    async with running_sim(speed=20, scenario="hidden-low-power") as sim:
        nodes = node_sources(sim)
        stuck = nodes[sim.targets.low_power]
        paces: list[float] = []

        async def probe() -> NodeSample:
            # The pace as the sample was read: on a loaded machine the accelerated fault can
            # be over by the time the sources are closed.
            got = await node_sample(stuck)
            paces.append(sim.cluster.engines["dsv41"].pace)
            return got

        try:
            # The engine takes its pace from its ranks at its next step: wait for both.
            sample = await until(
                probe, lambda s: s.ok and num(s.gpus[0].sm_clock_mhz) < 600 and paces[-1] < 0.5
            )
        finally:
            await asyncio.gather(*(s.aclose() for s in nodes.values()))
    gpu = sample.gpus[0]
    assert gpu.sm_clock_mhz == pytest.approx(513, abs=5)
    assert num(gpu.utilization_pct) >= 95
    assert gpu.power_w == pytest.approx(15, abs=1)
    assert gpu.clock_event_mask == 0
    # The TP group runs at the stuck rank's pace.
    assert paces[-1] == pytest.approx(513 / 2509, abs=0.01)


async def test_pool_exhaustion_fills_kv_queues_and_preempts() -> None:
    async with running_sim(speed=10, scenario="pool-exhaustion") as sim:
        source = engine_source(sim)
        url = sim.http["dsv41"].url + "/metrics"
        try:
            full = await until(
                lambda: engine_sample(source),
                lambda e: e.ok and num(e.kv_usage) >= 0.9 and num(e.waiting) > 0,
            )
            async with httpx.AsyncClient() as client:

                async def preemptions() -> float:
                    page = samples((await client.get(url)).text)
                    return page["vllm:num_preemptions_total"]

                first = await preemptions()
                later = await until(preemptions, lambda n: n > first)
        finally:
            await source.aclose()
    assert num(full.kv_free_tokens) < 0.1 * 11_434_628
    assert later > first


async def test_node_down_is_unreachable_then_ok_again() -> None:
    # Simulated time moved by hand: at 20x a loaded machine's first SSH handshake outlasted
    # the scenario's lead (0.25 s of wall time), and the node was down before it was seen up.
    async with stepped_sim(scenario="node-down") as sim:
        nodes = node_sources(sim)
        down = nodes[sim.targets.down]
        try:
            assert (await node_sample(down)).ok
            await step_to(sim, LEAD_S)  # down for 30 s from here
            gone = await until(lambda: node_sample(down), lambda s: not s.ok)
            other = await node_sample(nodes["spark-1"])
            await step_to(sim, LEAD_S + 30.0)
            back = await until(lambda: node_sample(down), lambda s: s.ok)
        finally:
            await asyncio.gather(*(s.aclose() for s in nodes.values()))
    assert sim.targets.down == "spark-4"
    assert gone.state is NodeState.UNREACHABLE
    assert other.ok
    assert back.gpus[0].name == "NVIDIA GB10"


async def test_server_restart_resets_counters_and_is_reported() -> None:
    # By hand too: at 10x the restart came 0.5 s of wall time after the start, before a
    # loaded machine's first scrape, and its 3 s of downtime could fall between two scrapes.
    async with stepped_sim(scenario="server-restart") as sim:
        source = engine_source(sim)
        try:
            await step_to(sim, 1.0)
            before = await until(
                lambda: engine_sample(source), lambda e: e.ok and sim.cluster.now < 4.0
            )
            await step_to(sim, LEAD_S)  # the restart: down for 3 s
            down = await until(lambda: engine_sample(source), lambda e: not e.ok)
            await step_to(sim, LEAD_S + 4.0)
            after = await until(lambda: engine_sample(source), lambda e: e.ok)
        finally:
            await source.aclose()
    assert before.ok
    assert down.state in (EngineState.UNAVAILABLE, EngineState.UNREACHABLE)
    assert after.restarted
    assert sim.cluster.engines["dsv41"].restarts == 1


async def test_long_context_request_shows_in_prompt_tokens() -> None:
    quiet = LoadSpec(clients=0)
    async with running_sim(speed=100, scenario="long-context", load=quiet) as sim:
        url = sim.http["dsv41"].url + "/metrics"
        async with httpx.AsyncClient() as client:

            async def page() -> dict[str, float]:
                return samples((await client.get(url)).text)

            running = await until(page, lambda p: p["vllm:num_requests_running"] == 1)
            done = await until(page, lambda p: p["vllm:prompt_tokens_total"] > 0, timeout_s=30)
    assert running["vllm:kv_cache_usage_perc"] > 0
    assert done["vllm:prompt_tokens_total"] == 501_869
    assert done["vllm:time_to_first_token_seconds_count"] == 1
    # At concurrency 1 the 512K row says TTFT 181.4 s; the histogram's sum is that TTFT.
    assert done["vllm:time_to_first_token_seconds_sum"] == pytest.approx(181.4, rel=0.05)


async def test_a_long_prefill_in_progress_shows_before_its_prompt_is_counted() -> None:
    """vLLM counts a prompt only when its first token is out: for the ~3 minutes the 512K
    prompt prefills beside the load, ``prefill`` and TTFT show nothing of it. The KV filling
    beyond the counted prompts and decode (less what finished requests freed) does: at about
    the rate the prompt prefills (501,869 tokens in the sweep's 181.4 s TTFT, here ×10)."""
    from sparktop.ui.engine_views import engine_lines
    from sparktop.ui.views import ViewConfig

    speed = 10
    async with running_sim(speed=speed, scenario="long-context") as sim:
        engine = engine_source(sim)
        try:

            def long_in_flight() -> bool:
                model = sim.cluster.engines["dsv41"]
                return any(r.tag == "long-context" for r in model.running)

            def shown(e: EngineSample) -> bool:
                windowed = (e.window_s or 0) > 5
                return long_in_flight() and windowed and is_num(e.prefill_in_progress_tps)

            seen = await until(lambda: engine_sample(engine), shown, timeout_s=30)
        finally:
            await engine.aclose()
    rate = 501_869 / 181.4 * speed
    assert 0.5 * rate < seen.prefill_in_progress_tps < 1.5 * rate
    text = "".join(t for line in engine_lines(seen, seen.time_s, ViewConfig(), 32) for t, _ in line)
    assert f" + ~{seen.prefill_in_progress_tps:,.0f} tok/s in progress" in text


async def test_32_nodes_answer_at_once() -> None:
    async with running_sim(nodes=32, engines=8, speed=5) as sim:
        # 32 handshakes at once in this one process: on a loaded machine they outlast the
        # default 5 s (every node 'no SSH answer within 5 s' at load 17). That they all
        # answer is the test, not how fast: a hang guard of a minute.
        with sim.inventory_path.open("a") as inventory:
            inventory.write("ssh: {connect_timeout_s: 60, command_timeout_s: 60}\n")
        nodes = node_sources(sim)
        try:
            results = await asyncio.gather(*(node_sample(s) for s in nodes.values()))
        finally:
            await asyncio.gather(*(s.aclose() for s in nodes.values()))
    assert len(results) == 32
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]
    assert len({r.gpus[0].uuid for r in results}) == 32


async def test_old_driver_node_falls_back_to_throttle_reasons() -> None:
    async with running_sim(speed=10, old_driver_nodes=("spark-1",)) as sim:
        nodes = node_sources(sim)
        old = nodes["spark-1"]
        try:
            sample = await node_sample(old)
        finally:
            await asyncio.gather(*(s.aclose() for s in nodes.values()))
    assert sample.ok, sample.message
    assert sample.gpus[0].clock_event_mask == 0
    assert "clocks_throttle_reasons.active" in old.fields  # type: ignore[attr-defined]
    assert not is_num(sample.gpus[0].counters.sw_thermal_us)
