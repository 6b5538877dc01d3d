"""A profile learnt from a recording of the simulator: steady cells with their counts and
spread, marked as observed, sparse cells left out."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sparktop.cli import main
from sparktop.inventory import load_inventory
from sparktop.model import NA
from sparktop.record.tick import Tick, make_header
from sparktop.record.writer import Recorder
from sparktop.sim.engine import LoadSpec
from sparktop.sources.engines.source import EngineSource
from sparktop.sweep.profiles.loader import load_profile_file
from sparktop.sweep.runner.learn import bucket, learn_cells
from tests.sim_helpers import engine_sample, running_sim

TICKS = 40


async def record_sim(path: Path) -> int:
    """Record the simulator's engine at one tick per simulated second (speed 10); the load is
    two users sending 4,000-token prompts back to back, so two requests run nearly always."""
    load = LoadSpec(clients=2, prompt_tokens=(4000,), output_tokens=128, think_s=0, jitter=0)
    async with running_sim(speed=10, load=load) as sim:
        (config,) = load_inventory(sim.inventory_path).engines
        source = EngineSource(config, window_s=0.5)
        recorder = Recorder(path, make_header(interval_s=1.0), max_queue=TICKS + 1)
        try:
            for _ in range(TICKS):
                sample = await engine_sample(source)
                assert recorder.write(Tick(time_s=sample.time_s, engines=(sample,)))
                await sim.clock.sleep(1.0)
        finally:
            recorder.close()
            await source.aclose()
    return TICKS


async def test_a_recording_of_the_simulator_becomes_a_profile(tmp_path: Path) -> None:
    rec = tmp_path / "run.jsonl.zst"
    await record_sim(rec)
    out = tmp_path / "learnt.yaml"
    status = await asyncio.to_thread(
        main, ["profiles", "--from-recording", str(rec), "--name", "normal", "-o", str(out)]
    )
    assert status == 0
    profile = load_profile_file(out)
    assert profile.source.startswith("observed on this cluster, not a sweep")
    assert profile.aggregate_kind == "end-to-end"
    assert any("not a sweep" in n for n in profile.notes)
    cell = next(r for r in profile.rows if r.concurrency == 2)
    assert bucket(cell.prompt_tokens) == 4096 and cell.context == "4K"
    assert isinstance(cell.observations, int) and cell.observations >= 5
    assert cell.ttft_p25_s <= cell.ttft_s <= cell.ttft_p75_s
    assert cell.decode_p25_tps <= cell.decode_tps <= cell.decode_p75_tps
    assert cell.prefill_tps == round(cell.prompt_tokens / cell.ttft_s, 1)
    # The simulator follows the 4-Spark profile: its 4K x 2 row says TTFT 2.55 s.
    assert 1.5 < cell.ttft_s < 4.0
    # The limits come from what the recording's samples say the server stated, with where.
    text = out.read_text()
    assert "limits: {}" not in text and ": null" not in text
    assert isinstance(profile.max_model_len, int)
    note = next(n for n in profile.notes if n.startswith("Limits: "))
    assert "max_model_len" in note and "from the recording (" in note


def test_a_recording_that_states_no_limits_omits_the_block_and_says_why() -> None:
    from sparktop.sweep.runner.learn import recorded_limits
    from tests.ui.fakes import engine

    bare = engine(max_model_len=NA("not asked"), max_num_seqs=NA("not exported"),
                  max_num_batched_tokens=NA("not exported"), kv_pool_source="profile")  # fmt: skip
    limits, note = recorded_limits([bare], dict.fromkeys(LIMIT_KEYS))
    assert limits == {} and note.startswith("No limits: the recording states none")
    limits, note = recorded_limits([bare], {**dict.fromkeys(LIMIT_KEYS), "max_num_seqs": 16})
    assert limits == {"max_num_seqs": 16} and "max_num_seqs 16 given as --max-num-seqs" in note


LIMIT_KEYS = ("kv_pool_tokens", "max_model_len", "max_num_seqs", "max_num_batched_tokens")


def test_ramps_waiting_and_sparse_cells_are_left_out(tmp_path: Path) -> None:
    rec = tmp_path / "tiny.jsonl"
    recorder = Recorder(rec, make_header(), max_queue=4)
    recorder.close()
    status = main(["profiles", "--from-recording", str(rec), "--name", "x"])
    assert status == 2
    assert learn_cells([]) == {}
