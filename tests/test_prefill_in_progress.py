"""The ``+ ~N tok/s in progress`` figure and ``kv_fill_tps`` stay honest when the prefix cache
and preemptions move the KV (a pool-exhaustion demo once showed ~80× the profile's prefill
rate and a negative fill)."""

from __future__ import annotations

from sparktop.model import NA, EngineSample, is_num
from tests.sim_helpers import engine_sample, engine_source, running_sim, until


def _sample(**values: float) -> EngineSample:
    base = {"kv_fill_tps": 0.0, "prefill_tps": 0.0, "decode_tps": 0.0, "kv_freed_tps": 0.0}
    return EngineSample(engine="e", time_s=0.0, **{**base, **values})  # type: ignore[arg-type]


def test_prefix_cache_hits_are_not_prefill_work() -> None:
    # Sessions return at once: their cached prompts fill the KV with no prefill work.
    hits = 20_000_000.0
    computed = 40_000.0
    sample = _sample(kv_fill_tps=hits + computed, kv_hit_tps=hits, decode_tps=100.0)
    assert sample.prefill_in_progress_tps == computed - 100.0
    assert not is_num(_sample(kv_fill_tps=hits, kv_hit_tps=hits).prefill_in_progress_tps)


def test_no_figure_while_preemptions_free_the_kv_unseen() -> None:
    sample = _sample(kv_fill_tps=0.0, kv_freed_tps=373_000.0, preemptions_per_s=0.3)
    value = sample.prefill_in_progress_tps
    assert isinstance(value, NA)
    assert "preemption" in value.reason


async def test_pool_exhaustion_shows_no_negative_fill_nor_invented_prefill() -> None:
    seen: list[EngineSample] = []
    async with running_sim(speed=10, scenario="pool-exhaustion") as sim:
        engine = engine_source(sim)
        try:

            async def probe() -> EngineSample:
                seen.append(await engine_sample(engine))
                return seen[-1]

            await until(probe, lambda e: is_num(e.preemptions_per_s) and e.preemptions_per_s > 0)
        finally:
            await engine.aclose()
    assert all(not is_num(e.kv_fill_tps) or e.kv_fill_tps >= 0 for e in seen)
    flooded = [e for e in seen if is_num(e.kv_hit_tps) and e.kv_hit_tps > 0]
    assert flooded, "the returning sessions hit the prefix cache"
    for e in flooded:
        rate = e.prefill_in_progress_tps
        assert not is_num(rate) or rate < e.kv_fill_tps - e.kv_hit_tps + e.kv_freed_tps  # type: ignore[operator]
    assert not is_num(seen[-1].prefill_in_progress_tps)
