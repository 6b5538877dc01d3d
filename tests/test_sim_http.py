"""The simulated engine's HTTP API and /metrics page: vLLM's routes and shapes, a page that
prometheus_client parses, and counters, gauges and histograms consistent with each other."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktop.sim.engine import LoadSpec, Phase
from sparktop.sim.httpserver import SIM_TIME_HEADER
from sparktop.sim.scenarios import Act
from sparktop.sim.stats import ITL_BUCKETS_S, TTFT_BUCKETS_S, buckets_1_2_5
from tests.sim_helpers import running_sim, samples, sim_client, until

REQUIRED = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:cache_config_info",
)


async def test_metrics_page_parses_with_vllm_names_labels_and_buckets() -> None:
    async with sim_client(speed=20) as (_sim, client):
        await until(
            lambda: client.get("/metrics"),
            lambda r: samples(r.text)["vllm:request_success_total"] >= 3,
        )
        text = (await client.get("/metrics")).text
        om = await client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(REQUIRED) <= set(families)
    assert families["vllm:generation_tokens"].type == "counter"
    assert families["vllm:time_to_first_token_seconds"].type == "histogram"
    running = families["vllm:num_requests_running"].samples[0]
    assert running.labels == {"engine": "0", "model_name": "deepseek-ai/DeepSeek-V4.1-Flash-1017"}
    (info,) = families["vllm:cache_config_info"].samples
    assert info.labels["kv_cache_size_tokens"] == "11434628"
    assert info.labels["block_size"] == "256"
    assert info.labels["num_gpu_blocks"] == str(11434628 // 256)
    assert info.labels["engine"] == "0"

    def edges(name: str) -> list[float]:
        return [
            float(s.labels["le"])
            for s in families[name].samples
            if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"
        ]

    assert edges("vllm:time_to_first_token_seconds") == list(TTFT_BUCKETS_S)
    assert edges("vllm:inter_token_latency_seconds") == list(ITL_BUCKETS_S)
    assert edges("vllm:request_prompt_tokens") == list(buckets_1_2_5(1_048_576))
    assert edges("vllm:request_prompt_tokens")[-1] == 1_000_000
    assert om.text.rstrip().endswith("# EOF")


async def test_counters_gauges_and_histograms_agree() -> None:
    # Four long generations, no think time: after the first tokens all four decode.
    load = LoadSpec(clients=4, prompt_tokens=(1004,), output_tokens=200_000, think_s=0, jitter=0)
    async with running_sim(speed=30, load=load) as sim:
        engine = sim.cluster.engines["dsv41"]
        async with httpx.AsyncClient(base_url=sim.http["dsv41"].url) as client:

            async def page() -> tuple[float, dict[str, float]]:
                response = await client.get("/metrics")
                return float(response.headers[SIM_TIME_HEADER]), samples(response.text)

            await until(page, lambda p: p[1]["vllm:time_to_first_token_seconds_count"] == 4)
            t1, first = await page()
            await until(page, lambda p: p[0] >= t1 + 60)
            sim.clock.pause()
            t2, second = await page()
            live = engine.live_tokens()
            decoding = [r for r in engine.running if r.phase is Phase.DECODE]
    assert len(decoding) == 4 and second["vllm:num_requests_running"] == 4
    rate = (second["vllm:generation_tokens_total"] - first["vllm:generation_tokens_total"]) / (
        t2 - t1
    )
    per_stream = sim.cluster.rates.decode_tps(1004, 4)
    assert per_stream == pytest.approx(59.4, rel=0.02)  # the 1K × 4 row of the sweep
    assert rate == pytest.approx(second["vllm:num_requests_running"] * per_stream, rel=0.1)
    # KV usage counts whole 256-token blocks: each running request rounds up by < 1 block.
    held = second["vllm:kv_cache_usage_perc"] * 11_434_628
    assert live <= held + 1 and held - live < 4 * 256
    assert second["vllm:prompt_tokens_total"] == 4 * 1004
    itl_mean = (
        second["vllm:inter_token_latency_seconds_sum"]
        / (second["vllm:inter_token_latency_seconds_count"])
    )
    assert itl_mean == pytest.approx(1 / per_stream, rel=0.05)


async def test_completions_stream_tokens_and_finish() -> None:
    async with sim_client(speed=20) as (_sim, client):
        body = {"model": "x", "prompt": "Hello Spark", "max_tokens": 12, "stream": True}
        chunks = []
        async with client.stream("POST", "/v1/completions", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    chunks.append(line[6:])
        plain = await client.post("/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 5})
    assert chunks[-1] == "[DONE]"
    data = [json.loads(c) for c in chunks[:-1]]
    assert all(d["object"] == "text_completion" for d in data)
    text = "".join(d["choices"][0]["text"] for d in data)
    assert text.count(" ") + text.count(".") == 12  # one simulated word per token
    assert data[-1]["choices"][0]["finish_reason"] == "length"
    result = plain.json()
    assert result["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}


async def test_chat_stream_starts_with_the_role_and_can_report_usage() -> None:
    async with sim_client(speed=20) as (_sim, client):
        body = {
            "messages": [{"role": "user", "content": "How hot is spark-2?"}],
            "max_tokens": 6,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            lines = [ln[6:] async for ln in response.aiter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    data = [json.loads(x) for x in lines[:-1]]
    assert data[0]["choices"][0]["delta"]["role"] == "assistant"
    assert data[-1]["choices"] == [] and data[-1]["usage"]["completion_tokens"] == 6
    assert {d["object"] for d in data} == {"chat.completion.chunk"}


async def test_models_tokenize_health_version_and_errors() -> None:
    async with sim_client(speed=5) as (sim, client):
        models = (await client.get("/v1/models")).json()
        tokens = (await client.post("/tokenize", json={"prompt": "the KV pool fills"})).json()
        health = await client.get("/health")
        version = (await client.get("/version")).json()
        too_long = await client.post(
            "/v1/completions", json={"prompt": "hi", "max_tokens": 1_048_577}
        )
        bad_json = await client.post("/tokenize", content=b"{nope")
        await sim.apply(Act.RESTART)
        restarting = await client.get("/metrics")
    (card,) = models["data"]
    assert card["parent"] is None and card["max_model_len"] == 1_048_576
    assert tokens["count"] == 4 and tokens["max_model_len"] == 1_048_576
    assert len(tokens["tokens"]) == 4
    assert health.status_code == 200
    assert version["version"].startswith("0.")
    assert too_long.status_code == 400
    assert too_long.json()["error"]["message"] == (
        "max_tokens=1048577 cannot be greater than max_model_len=1048576. Please request "
        "fewer output tokens. (parameter=max_tokens, value=1048577)"
    )
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == 400
    assert restarting.status_code == 503


def test_the_simulator_serves_the_model_its_profile_measured() -> None:
    """A simulator run with either seed profile serves a model name the expected row takes
    for that profile's (no "another model" note on the simulator's own inventory)."""
    from sparktop.model import is_num
    from sparktop.sim.model import SimCluster
    from sparktop.sim.rates import ProfileRates
    from sparktop.sim.runner import served_model
    from sparktop.sweep.expected.matched import model_mismatch
    from sparktop.sweep.profiles.builtin import builtin_profile_names
    from sparktop.sweep.profiles.loader import load_profile

    served = {}
    # The built-ins that state the limits a simulator needs (the 10-15 comparison profile
    # publishes only its KV pool: tests/test_compare_cli.py holds its refusal).
    for name in builtin_profile_names():
        if not is_num(load_profile(name).max_model_len):
            continue
        rates = ProfileRates.load(name, None, None)
        cluster = SimCluster(rates, nodes=2, engines=1, **served_model(rates.profile.model))
        (engine,) = cluster.engines.values()
        served[name] = engine.model_name
        assert model_mismatch(rates.profile.model, engine.model_name) == "", name
    assert served == {
        "2x-spark-dsv4-flash-0731": "deepseek-ai/DeepSeek-V4-Flash-0731",
        "4x-spark-dsv41-flash-1017": "deepseek-ai/DeepSeek-V4.1-Flash-1017",
    }


async def test_length_limits_follow_vllm_0_32() -> None:
    """vLLM 0.32 (checked against the real server, tests/test_real_vllm_contract.py):
    prompt + max_tokens over max_model_len is accepted and the output shortened
    (finish_reason "length"); only a prompt that alone exceeds the limit is refused."""
    import dataclasses

    async with sim_client(speed=20) as (sim, client):
        engine = next(iter(sim.http.values())).engine
        engine.limits = dataclasses.replace(engine.limits, max_model_len=64)
        shortened = await client.post(
            "/v1/completions", json={"prompt": list(range(1, 41)), "max_tokens": 64}
        )
        refused = await client.post(
            "/v1/completions", json={"prompt": list(range(1, 66)), "max_tokens": 1}
        )
    assert shortened.status_code == 200
    body = shortened.json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 40, "completion_tokens": 24, "total_tokens": 64}
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "input_tokens" and error["code"] == 400
    assert error["message"] == (
        "This model's maximum context length is 64 tokens. However, your prompt contains 65 "
        "input tokens, which exceeds this limit even without any output tokens. Please reduce "
        "the length of the input prompt. (parameter=input_tokens, value=65)"
    )
