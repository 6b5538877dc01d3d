"""Budget "if I send it now": TTFT for one more request on the live load next to the idle
figure, queueing when the scheduler or the pool cannot take it, and the seed's lesson; the
command against the simulator over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from sparktop.cli import main
from sparktop.model import EngineSample, is_num
from sparktop.report.budget_json import to_json
from sparktop.report.budget_text import render_text
from sparktop.sim.engine import LoadSpec
from sparktop.sources.engines.source import scrape_once
from sparktop.sweep.budget.budget import compute_budget
from sparktop.sweep.estimator.estimator import estimate
from sparktop.sweep.profiles.loader import load_profile
from tests.sim_helpers import running_sim, until

TWO = "2x-spark-dsv4-flash-0731"
FOUR = "4x-spark-dsv41-flash-1017"


def test_the_seed_lesson_at_128k_on_two_sparks() -> None:
    # DESIGN.md §1: decode 75.4 → 65.2, end-to-end 69.1 → 5.9, TTFT 0.63 → 78.75 s (125×).
    b = compute_budget(131_072, 1, load_profile(TWO))
    x = b.lesson
    assert x.shortest_prompt_tokens == 256
    assert x.decode_keep_pct == pytest.approx(65.2 / 75.4 * 100)
    assert x.e2e_keep_pct == pytest.approx(5.9 / 69.1 * 100)
    assert x.ttft_growth == pytest.approx(78.75 / 0.63)
    text = render_text(b)
    assert "decode keeps              86 %" in text
    assert "end-to-end keeps          8.5 % (the profile's end-to-end aggregate)" in text
    assert "TTFT grows                125.0×" in text
    lesson = to_json(b)["lesson"]
    assert lesson["ttft_growth_x"] == {"value": 125, "reason": None}


def test_the_lesson_on_a_decode_only_profile_computes_end_to_end_per_request() -> None:
    x = compute_budget(124_759, 1, load_profile(FOUR)).lesson
    here, base = estimate(load_profile(FOUR), 124_759, 1), estimate(load_profile(FOUR), 1002, 1)

    def e2e(e: object) -> float:
        ttft, decode = e.ttft_s.value, e.decode_tps.value  # type: ignore[attr-defined]
        return 128 / (ttft + 128 / decode)

    assert x.e2e_keep_pct == pytest.approx(e2e(here) / e2e(base) * 100)
    assert "128 output tokens" in x.e2e_how


def _live(**fields: object) -> EngineSample:
    return EngineSample(engine="e", time_s=0.0, **fields)  # type: ignore[arg-type]


def test_one_more_request_runs_at_running_plus_one() -> None:
    p = load_profile(FOUR)
    live = _live(running=3.0, waiting=0.0, kv_free_tokens=5e6, mean_prompt_tokens=8000.0)
    n = compute_budget(30_000, 1, p, 128, live=live, max_num_seqs=8).send_now
    assert n.concurrency == 4 and n.queued_because == "" and n.queue_wait_s == 0
    assert n.ttft_s is not None and n.ttft_s.value == estimate(p, 30_000, 4).ttft_s.value
    assert n.idle_ttft_s.value == estimate(p, 30_000, 1).ttft_s.value
    assert n.ttft_total_s == n.ttft_s.value


def test_running_requests_count_by_their_prefill_share_and_prompt() -> None:
    p = load_profile(FOUR)
    live = _live(
        running=7.0, waiting=0.0, kv_free_tokens=5e6, mean_prompt_tokens=30_000.0,
        prefill_time_mean_s=1.0, decode_time_mean_s=3.0,
    )  # fmt: skip
    n = compute_budget(30_000, 1, p, 128, live=live, max_num_seqs=32).send_now
    assert n.concurrency == 8 and n.prefill_concurrency == 3  # 1 + 7 × 0.25 × 1
    assert n.prefill_how == (
        "7 others running with it, 25% of their time prefilling, prompts 100% of this one's"
    )
    assert n.ttft_s is not None and n.ttft_s.value == estimate(p, 30_000, 3).ttft_s.value
    short = replace(live, mean_prompt_tokens=7_500.0)
    m = compute_budget(30_000, 1, p, 128, live=short, max_num_seqs=32).send_now
    assert m.prefill_concurrency == 1  # 1 + 7 × 0.25 × 0.25 rounds to 1


def test_a_full_scheduler_queues_at_the_measured_finish_rate() -> None:
    p = load_profile(FOUR)
    live = _live(
        running=8.0, waiting=2.0, kv_free_tokens=5e6, mean_prompt_tokens=8000.0,
        requests_finished_per_s=0.5,
    )  # fmt: skip
    b = compute_budget(30_000, 1, p, 128, live=live, max_num_seqs=8)
    n = b.send_now
    assert (n.queued_because, n.concurrency) == ("max_num_seqs", 8)
    assert (n.queue_wait_s, n.wait_origin) == (6.0, "server")  # 3 must finish, 0.5/s
    assert n.ttft_s is not None and is_num(n.ttft_s.value)
    assert n.ttft_total_s == pytest.approx(n.ttft_s.value + 6.0)
    text = render_text(b)
    assert "the scheduler is full (running = max_num_seqs): ≈ 6.00 s" in text
    # 8 + 1 is not 8: the cap is said where the count is.
    assert "→ concurrency 8 with this request (at most max_num_seqs: it waits" in text


def test_a_prompt_bigger_than_the_free_pool_waits_for_tokens() -> None:
    p = load_profile(FOUR)
    live = _live(running=2.0, waiting=0.0, kv_free_tokens=10_000.0, mean_prompt_tokens=8000.0)
    n = compute_budget(30_000, 1, p, 128, live=live, max_num_seqs=8).send_now
    assert n.queued_because == "pool" and n.wait_origin == "profile"
    assert is_num(n.queue_wait_s) and n.queue_wait_s > 0


def test_without_a_live_engine_only_the_idle_figure() -> None:
    b = compute_budget(30_000, 1, load_profile(FOUR))
    doc = to_json(b)["send_now"]
    assert doc["live"] is False and doc["ttft_s"] is None
    assert doc["ttft_total_s"] == {"value": None, "reason": "no live server; pass --endpoint"}
    idle = estimate(load_profile(FOUR), 30_000, 1).ttft_s.value
    assert doc["idle_ttft_s"]["value"] == pytest.approx(idle, abs=1e-4)  # JSON keeps 4 places


async def _scrape_when(url: str, ok: object) -> EngineSample:
    return await until(lambda: scrape_once(url), ok, timeout_s=30)  # type: ignore[arg-type]


def _budget(capsys: pytest.CaptureFixture[str], url: str, prompt: int) -> dict[str, object]:
    argv = ["budget", "--prompt-tokens", str(prompt), "--output-tokens", "128"]
    code = main([*argv, "--endpoint", url, "--json"])
    out, _err = capsys.readouterr()
    assert code == 0
    return json.loads(out)  # type: ignore[no-any-return]


async def test_budget_endpoint_on_the_simulator(capsys: pytest.CaptureFixture[str]) -> None:
    # Four clients without think time on a server limited to 2 sequences: 2 run, 2 wait.
    load = LoadSpec(clients=4, prompt_tokens=(1004,), output_tokens=300, think_s=0, jitter=0)
    async with running_sim(speed=5, load=load, max_num_seqs=2) as sim:
        url = sim.http["dsv41"].url
        await _scrape_when(
            url,
            lambda s: s.ok and s.running == 2 and s.waiting == 2 and is_num(s.mean_prompt_tokens),
        )
        sim.clock.pause()
        doc = await asyncio.to_thread(_budget, capsys, url, 30_000)
    now = doc["send_now"]
    assert now["live"] is True  # type: ignore[index]
    assert now["running"] == {"value": 2, "reason": None}  # type: ignore[index]
    assert now["waiting"] == {"value": 2, "reason": None}  # type: ignore[index]
    # The server does not say max_num_seqs (no vLLM release exports it), and the default
    # profile was not named for it: unknown, and the request queues behind the two waiting.
    assert doc["kv"]["max_num_seqs"]["value"] is None  # type: ignore[index]
    assert now["queued_because"] == "waiting"  # type: ignore[index]
    assert now["queue_wait_s"]["origin"] == "profile"  # type: ignore[index]
    assert now["queue_wait_s"]["value"] > 0  # type: ignore[index]
    profile = load_profile(FOUR)
    # 2 running with short prompts, mostly decoding: the new prompt prefills nearly alone
    prefill = now["prefill_concurrency"]  # type: ignore[index]
    assert 1 <= prefill["value"] <= 3 and prefill["how"].startswith("2 others running with it")
    assert now["ttft_s"]["value"] == pytest.approx(  # type: ignore[index]
        estimate(profile, 30_000, prefill["value"]).ttft_s.value, rel=1e-3
    )
    assert now["idle_ttft_s"]["value"] == pytest.approx(  # type: ignore[index]
        estimate(profile, 30_000, 1).ttft_s.value, rel=1e-3
    )
    total = now["ttft_total_s"]["value"]  # type: ignore[index]
    assert total == pytest.approx(now["ttft_s"]["value"] + now["queue_wait_s"]["value"], rel=1e-3)  # type: ignore[index]
