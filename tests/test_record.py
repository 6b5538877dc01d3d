"""Recording: the sample codec, the writer (compressed, bounded, crash-safe), the reader."""

from __future__ import annotations

import dataclasses
import gzip
import inspect
import io
import json
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from sparktop import model
from sparktop.alerts import AlertEngine, Thresholds
from sparktop.cluster import ClusterState
from sparktop.errors import UserError
from sparktop.model import (
    NA,
    EngineSample,
    EngineState,
    GpuSample,
    NodeMemory,
    NodeSample,
    NodeState,
    Quantile,
    RankStats,
    SlowdownCounters,
)
from sparktop.record import Recorder, Recording, make_header, read_ticks, tick_from_state
from sparktop.record import writer as writer_module
from sparktop.record.codec import CodecError, decode, encode
from sparktop.record.tick import Tick, redact, tick_to_json
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import Profile
from tests.alert_samples import engine, node

FULL_GPU = GpuSample(
    index=1,
    uuid="GPU-5f1c0000-0000-0000-0000-00000000a1b3",
    name="NVIDIA GB10",
    sm_clock_mhz=1833.0,
    max_sm_clock_mhz=3003.0,
    temperature_c=91.0,
    power_w=38.02,
    utilization_pct=99.0,
    memory_used_mib=NA("[N/A]"),
    memory_total_mib=NA("[N/A]"),
    pstate="P0",
    clock_event_mask=0x20,
    counters=SlowdownCounters(9e6, NA("[Not Supported]"), 0.0, 12.5),
    process_memory_mib=101_234.0,
)
FULL_NODE = NodeSample(
    node="spark-3",
    time_s=1_767_000_000.25,
    state=NodeState.OK,
    message="",
    since_s=None,
    gpus=(FULL_GPU, GpuSample(index=0, uuid="", name="x")),
    memory=NodeMemory(124_000.0, 110_500.0, 101_234.0, True),
    latency_s=0.12,
    raw="@@sparktop:gpu\n…",
    driver_version="580.95.05",
    cpu_pct=12.5,
)
FULL_ENGINE = EngineSample(
    engine="dsv41",
    time_s=1_767_000_000.5,
    state=EngineState.STALE,
    message="gauges unchanged",
    since_s=1_766_999_990.0,
    kind="vllm",
    model="deepseek-ai/DeepSeek-V4-Flash-0731",
    running=6.0,
    waiting=2.0,
    kv_usage=0.97,
    kv_pool_tokens=2_493_464.0,
    kv_pool_source="cache_config_info",
    kv_used_tokens=2_418_660.0,
    kv_free_tokens=74_804.0,
    preemptions_per_s=0.25,
    prefill_tps=342.0,
    decode_tps=208.2,
    ttft_p50=Quantile(6.06),
    ttft_p95=Quantile(30.0, ">"),
    itl_p50=Quantile(0.01, "<"),
    itl_mean_s=0.0123,
    mean_prompt_tokens=2048.0,
    prefix_hit_rate=NA("no queries in the window"),
    spec_acceptance_rate=0.71,
    spec_mean_accept_len=3.2,
    max_model_len=1_048_576.0,
    max_num_seqs=6.0,
    max_num_batched_tokens=8192.0,
    restarted=True,
    ranks=(RankStats("0", 3.0, 1.0, 0.97, 1_246_732.0, 0.1, 171.0, 104.1),),
    latency_s=0.03,
    extra=MappingProxyType({"vllm:custom": 1.5}),
    window_s=30.0,
    since_start=("ttft_p50",),
    limit_sources=MappingProxyType({"max_num_seqs": "inventory"}),
)


def roundtrip(value: Any) -> Any:
    return decode(type(value), json.loads(json.dumps(encode(value))))


def test_every_sample_type_in_the_model_round_trips() -> None:
    samples = [
        FULL_GPU,
        FULL_NODE,
        FULL_ENGINE,
        FULL_GPU.counters,
        FULL_NODE.memory,
        FULL_ENGINE.ranks[0],
        Quantile(1.2, "<"),
        NA("[N/A]"),
        NodeSample(node="spark-9", time_s=1.0, state=NodeState.UNREACHABLE, since_s=0.5),
        EngineSample(engine="e", time_s=1.0),
        GpuSample(index=0, uuid="u", name="n"),
    ]
    for sample in samples:
        assert roundtrip(sample) == sample, type(sample).__name__
    covered = {type(s) for s in samples}
    declared = {
        obj
        for _, obj in inspect.getmembers(model, inspect.isclass)
        if dataclasses.is_dataclass(obj) and obj.__module__ == model.__name__
    }
    assert declared <= covered, f"add a round-trip case for {declared - covered}"


def test_defaults_are_left_out_and_na_keeps_its_reason() -> None:
    data = encode(GpuSample(index=0, uuid="u", name="n", power_w=NA("[Not Supported]")))
    assert data == {"index": 0, "uuid": "u", "name": "n", "power_w": {"na": "[Not Supported]"}}


def test_a_repeated_failure_keeps_when_it_was_checked_and_old_records_still_decode() -> None:
    repeated = NodeSample(
        "spark-9", 20.0, NodeState.UNREACHABLE, "connection refused", since_s=5.0,
        checked_s=8.0, retry_s=29.0,
    )  # fmt: skip
    assert roundtrip(repeated) == repeated
    # A recording made before the fields existed: no checked_s/retry_s, read as "tried".
    old = decode(NodeSample, {"node": "spark-9", "time_s": 20.0, "state": "unreachable"})
    assert old.checked_s is None and old.retry_s is None


def test_profile_round_trips() -> None:
    profile = load_profile("4x-spark-dsv41-flash-1017")
    assert roundtrip(profile) == profile
    assert decode(Profile, encode(profile)).baseline_sm_clock_mhz == (2509, 2522, 2509, 2541)


@pytest.mark.parametrize(
    "data",
    [
        {"node": "a", "time_s": 1.0, "bogus": 1},  # unknown field
        {"node": "a", "time_s": "soon"},  # wrong type
        {"node": "a"},  # missing required field
        {"node": "a", "time_s": 1.0, "state": "on fire"},  # not an enum value
        {"node": "a", "time_s": 1.0, "gpus": {"index": 0}},  # not a list
        [1, 2],
    ],
)
def test_bad_records_raise_codec_errors(data: Any) -> None:
    with pytest.raises(CodecError):
        decode(NodeSample, data)


# -- writer and reader -------------------------------------------------------------------------


def ticks(count: int, start: float = 1_767_000_000.0) -> list[Tick]:
    """A thermal episode on spark-2 between 20 s and 45 s, hold 5 s."""
    state, alerts, out = ClusterState(), AlertEngine(Thresholds(hold_s=5)), []
    for i in range(count):
        t = start + i
        hot: dict[str, Any] = (
            {"sm_clock_mhz": 1833.0, "clock_event_mask": 0x20} if 20 <= i < 45 else {}
        )
        state.apply(node("spark-1", t))
        state.apply(node("spark-2", t, **hot))
        state.apply(engine(t=t, kv_usage=0.3 + i / 1000))
        events = alerts.update(state, t)
        out.append(tick_from_state(state, t, alerts.active(), tuple(events)))
    return out


def record(path: Path, items: list[Tick], flush_s: float = 1.0, **header: Any) -> Recorder:
    recorder = Recorder(path, make_header(**header), flush_s=flush_s, max_queue=len(items) + 1)
    for tick in items:
        assert recorder.write(tick)
    recorder.close()
    return recorder


@pytest.mark.parametrize("name", ["run.jsonl.zst", "run.jsonl.gz", "run.jsonl"])
def test_recording_round_trips(tmp_path: Path, name: str) -> None:
    items = ticks(60)
    path = tmp_path / name
    record(path, items, profile=load_profile("2x-spark-dsv4-flash-0731"), interval_s=1.0)
    rec, back = read_ticks(path)
    assert rec.stop is None and back == items
    assert rec.header["format"] == "sparktop-recording" and rec.header["interval_s"] == 1.0
    assert rec.header["profile"]["name"] == "2x-spark-dsv4-flash-0731"
    assert [rec.has_alert_events(i) for i in range(60)].count(True) == 1  # the throttle fired
    if name.endswith(".gz"):
        assert gzip.decompress(path.read_bytes()).count(b"\n") == 61
    elif name.endswith(".zst"):
        assert path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"


@pytest.mark.parametrize("name", ["cut.jsonl.zst", "cut.jsonl.gz", "cut.jsonl"])
def test_truncated_recording_reads_up_to_the_cut(tmp_path: Path, name: str) -> None:
    items = ticks(60)
    whole = tmp_path / f"whole-{name}"
    record(whole, items, flush_s=0.0)  # as if one tick a second: each flushed on its own
    data = whole.read_bytes()
    cut = tmp_path / name
    cut.write_bytes(data[: len(data) * 2 // 3])
    rec, back = read_ticks(cut)
    assert 0 < len(back) < 60 and back == items[: len(back)]
    assert rec.stop is not None and rec.stop.line == len(back) + 2
    assert "truncated" in rec.stop.reason or "incomplete" in rec.stop.reason


async def test_a_crash_loses_nothing_already_flushed(tmp_path: Path) -> None:
    """Read the file while the recorder is still open: as a killed process would leave it."""
    path = tmp_path / "live.jsonl.zst"
    items = ticks(30)
    recorder = Recorder(path, make_header(), max_queue=64)
    for tick in items:
        recorder.write(tick)
    assert recorder.sync()
    rec, back = read_ticks(path)
    assert back == items
    assert rec.stop is not None and "ends mid-stream" in rec.stop.reason
    recorder.close()
    assert read_ticks(path)[0].stop is None


def test_corruption_in_the_middle_stops_there(tmp_path: Path) -> None:
    items = ticks(40)
    path = tmp_path / "bad.jsonl"
    record(path, items)
    lines = path.read_bytes().split(b"\n")
    lines[21] = lines[21][:50] + b"\x00garbage" + lines[21][60:]
    path.write_bytes(b"\n".join(lines))
    rec, back = read_ticks(path)
    assert back == items[:20]
    assert rec.stop is not None and rec.stop.line == 22 and "not valid JSON" in rec.stop.reason
    # The byte where the broken line starts, not the end of the buffer it was read in.
    line_byte = sum(len(line) + 1 for line in lines[:21])
    assert rec.stop.line_byte == line_byte
    assert f"stopped at line 22 (file byte {line_byte:,}): not valid JSON" in str(rec.stop)


def test_corrupt_compressed_data_stops_with_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl.gz"
    items = ticks(120)
    record(path, items, flush_s=0.0)
    lines = gzip.decompress(path.read_bytes()).split(b"\n")
    data = bytearray(path.read_bytes())
    middle = len(data) * 3 // 4
    for i in range(middle, middle + 64):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    rec, back = read_ticks(path)
    assert 0 < len(back) < 120 and back == items[: len(back)]
    assert rec.stop is not None
    assert "gz" in rec.stop.reason or "JSON" in rec.stop.reason or "tick" in rec.stop.reason
    assert rec.stop.line_byte == sum(len(line) + 1 for line in lines[: rec.stop.line - 1])
    assert f"(byte {rec.stop.line_byte:,} of the decompressed text)" in str(rec.stop)


def test_valid_json_that_is_not_a_tick_stops_the_replay(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    record(path, ticks(5))
    with path.open("a") as fh:
        fh.write(json.dumps({"t": 5.0, "nodes": [{"node": 3}]}) + "\n")
    rec, back = read_ticks(path)
    assert len(back) == 5 and rec.stop is not None and "does not decode" in rec.stop.reason


def test_not_a_recording_is_a_user_error(tmp_path: Path) -> None:
    for name, content in (("empty.jsonl", b""), ("other.jsonl", b'{"hello": 1}\n')):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(UserError, match="not a sparktop recording"):
            Recording(path)
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"format": "sparktop-recording", "format_version": 99}) + "\n")
    with pytest.raises(UserError, match="newer than this sparktop"):
        Recording(newer)


def test_writes_never_block_and_a_full_queue_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real = tick_to_json

    def slow(tick: Tick) -> dict[str, Any]:
        release.wait()
        return real(tick)

    monkeypatch.setattr(writer_module, "tick_to_json", slow)
    recorder = Recorder(tmp_path / "slow.jsonl", make_header(), max_queue=3)
    results = [recorder.write(t) for t in ticks(10)]
    assert results.count(False) == recorder.dropped >= 6
    release.set()
    recorder.close()
    assert recorder.written == results.count(True)


def test_unwritable_path_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--record: cannot create"):
        Recorder(tmp_path / "no-such-dir" / "x.jsonl", make_header())


def test_header_has_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparktop.inventory import parse_inventory

    monkeypatch.setenv("VLLM_API_KEY", "hunter2")
    inventory = parse_inventory(
        "cluster: c\nnodes:\n  - {name: spark-1, host: 10.0.0.1}\n"
        "engines:\n  - {name: e, url: 'http://10.0.0.1:8015', nodes: [spark-1],"
        " api_key_env: VLLM_API_KEY}\n",
        "cluster.yaml",
    )
    header = make_header(inventory)
    assert "hunter2" not in json.dumps(header)
    assert header["inventory"]["engines"][0]["url"] == "http://10.0.0.1:8015"
    assert redact({"url": "http://ops:hunter2@10.0.0.1:8015/x", "n": [1]}) == {
        "url": "http://10.0.0.1:8015/x",
        "n": [1],
    }
    assert redact({"password": "x", "ssh": {"passphrase": "y"}, "api_token": None}) == {
        "password": "<redacted>",
        "ssh": {"passphrase": "<redacted>"},
        "api_token": None,
    }


def test_ten_minutes_of_eight_nodes_stays_under_five_megabytes(tmp_path: Path) -> None:
    import random

    rng = random.Random(7)
    state, path = ClusterState(), tmp_path / "ten-minutes.jsonl.zst"
    recorder = Recorder(path, make_header(), max_queue=700)
    start = 1_767_000_000.0
    for i in range(600):
        t = start + i
        for n in range(8):
            state.apply(
                node(
                    f"spark-{n + 1}",
                    t + rng.random() * 0.2,
                    sm_clock_mhz=float(rng.choice((2509, 2522, 2541, 2496))),
                    temperature_c=float(rng.randint(53, 58)),
                    power_w=round(rng.uniform(80, 95), 2),
                    utilization_pct=float(rng.randint(90, 100)),
                    counters=SlowdownCounters(1e6 * n + i, 0.0, 0.0, 0.0),
                )
            )
        state.apply(engine(t=t, kv_usage=rng.uniform(0.1, 0.9), decode_tps=rng.uniform(100, 400)))
        recorder.write(tick_from_state(state, t))
    recorder.close()
    assert recorder.dropped == 0 and recorder.written == 600
    assert path.stat().st_size < 5_000_000


def test_tick_json_is_plain() -> None:
    data = tick_to_json(ticks(25)[-1])
    buf = io.StringIO()
    json.dump(data, buf, allow_nan=False)
    assert set(data) == {"t", "nodes", "engines", "alerts", "events", "derived"}
    assert data["derived"]["baseline_mhz"]["spark-1/GPU-test-0"] == 2515.0


def test_redaction_keeps_token_counts() -> None:
    """Limits named ``…_tokens`` are not secrets: replay needs them (an ``api_token`` is)."""
    doc = {"engines": [{"max_num_batched_tokens": 8192, "kv_pool_tokens": 11434628}]}
    assert redact(doc) == doc
    assert redact({"api_token": "abc", "bearer_token": "x"}) == {
        "api_token": "<redacted>",
        "bearer_token": "<redacted>",
    }
