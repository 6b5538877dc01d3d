"""The simulator's llama.cpp engine (``SimOptions(llamacpp=True)``, ``demo --llamacpp``)
held to the REAL captured llama-server page: the same families, types and HELP texts in the
same order, unlabelled, no histograms; ``/props``, ``/tokenize`` and ``/health`` in
llama-server's shapes; and sparktop reads it as it reads the real one."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sparktop.sim.llamacpp import SLOTS
from sparktop.sim.runner import LLAMACPP_ENGINE
from sparktop.testing.llamacpp_stub import real_page
from tests.sim_helpers import running_sim


def _families(text: str) -> list[tuple[str, str, str, tuple[tuple[str, ...], ...]]]:
    """(name, type, help, label names per sample) of each family, in page order."""
    return [
        (f.name, f.type, f.documentation, tuple(tuple(s.labels) for s in f.samples))
        for f in text_string_to_metric_families(text)
    ]


def _heads(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


async def test_the_simulated_page_has_the_real_pages_families_in_its_order() -> None:
    async with running_sim(nodes=2, speed=4.0, llamacpp=True) as sim:
        url = sim.http[LLAMACPP_ENGINE].url
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            page = (await client.get("/metrics")).text
            props = (await client.get("/props")).json()
            health = await client.get("/health")
            version = await client.get("/version")
            content = (await client.post("/tokenize", json={"content": "hello world"})).json()
            prompt = (await client.post("/tokenize", json={"prompt": "hello world"})).json()
    for state in ("idle", "load"):
        real = real_page(state)
        assert _heads(page) == _heads(real)  # HELP and TYPE lines, verbatim and in order
        assert [f[:3] for f in _families(page)] == [f[:3] for f in _families(real)]
    assert all(labels == ((),) for *_, labels in _families(page))  # unlabelled, one sample
    assert props["total_slots"] == SLOTS
    assert props["default_generation_settings"]["n_ctx"] > 0
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert version.status_code == 404
    assert len(content["tokens"]) == 2 and prompt == {"tokens": []}


async def test_the_simulated_inventory_names_the_kind_and_the_pool() -> None:
    async with running_sim(nodes=2, speed=4.0, llamacpp=True) as sim:
        text = sim.inventory_path.read_text()
        summary = sim.summary()
    assert "kind: llamacpp" in text and "kv_pool_tokens" in text
    assert f"engine {LLAMACPP_ENGINE}" in summary and "llama.cpp, one host" in summary


async def test_the_expected_row_of_the_simulated_llamacpp_engine_has_figures() -> None:
    async with running_sim(nodes=2, speed=5, llamacpp=True) as sim:
        with_sim = [sys.executable, "-m", "sparktop", "snapshot", "-i", str(sim.inventory_path)]
        proc = await asyncio.create_subprocess_exec(
            *with_sim, "--window", "10", "--json", stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
        async with httpx.AsyncClient(base_url=sim.http[LLAMACPP_ENGINE].url) as client:
            slots = (await client.get("/slots")).json()
    rows = {e["engine"]: e for e in json.loads(out)["engines"]}
    block = rows[LLAMACPP_ENGINE]["expected"]
    assert block["missing"] is None, block  # not "prompt lengths unknown"
    assert block["mean_prompt_tokens"] > 0
    figures = block["figures"]
    assert figures["ttft_s"]["live_missing"] == "llama.cpp exports no latency histograms"
    assert figures["ttft_s"]["expected_s"] > 0 and figures["aggregate_tps"]["expected_tps"] > 0
    busy = [s for s in slots if s["is_processing"]]
    assert all(s["n_prompt_tokens"] > 0 for s in busy)  # llama-server's field, as it states it
