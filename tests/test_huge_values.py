"""±1e300 readings (a hostile or broken exporter) print bounded in the tables, the snapshot
and the JSON (issue 30): they printed as 300-digit cells, 2,105-character lines."""

from __future__ import annotations

import io
import json

from rich.console import Console

from sparktop.model import (
    EngineSample,
    EngineState,
    GpuSample,
    NodeMemory,
    NodeSample,
    Quantile,
    fmt_num,
)
from sparktop.report.snapshot_table import render_table
from sparktop.snapshot import Snapshot, snapshot_json

HUGE = 1e300


def _snapshot() -> Snapshot:
    gpu = GpuSample(
        index=0, uuid="GPU-1", name="NVIDIA GB10", sm_clock_mhz=HUGE, max_sm_clock_mhz=-HUGE,
        temperature_c=-HUGE, power_w=HUGE, utilization_pct=HUGE, memory_used_mib=HUGE,
        memory_total_mib=HUGE, process_memory_mib=HUGE,
    )  # fmt: skip
    memory = NodeMemory(total_mib=HUGE, used_mib=HUGE, gpu_held_mib=-HUGE, unified=True)
    node = NodeSample(node="spark-1", time_s=0.0, gpus=(gpu,), memory=memory)
    engine = EngineSample(
        engine="e", time_s=0.0, state=EngineState.OK, running=HUGE, waiting=-HUGE,
        kv_usage=HUGE, kv_pool_tokens=HUGE, kv_free_tokens=-HUGE, kv_used_tokens=HUGE,
        preemptions_per_s=HUGE, prefill_tps=HUGE, decode_tps=-HUGE, max_num_seqs=HUGE,
        ttft_p50=Quantile(HUGE), ttft_p95=Quantile(HUGE, ">"), itl_p50=Quantile(-HUGE),
        mean_prompt_tokens=HUGE, prefix_hit_rate=HUGE,
    )  # fmt: skip
    return Snapshot("c", 0.0, (node,), (engine,))


def test_fmt_num_keeps_a_huge_value_short() -> None:
    assert fmt_num(HUGE) == "1e+300"
    assert fmt_num(-HUGE, ",.1f", "W") == "-1e+300 W"
    assert fmt_num(1_234_567.0) == "1,234,567"  # ordinary figures unchanged


def test_snapshot_table_lines_stay_bounded() -> None:
    out = io.StringIO()
    render_table(_snapshot(), Console(file=out, width=3000, color_system=None))
    lines = out.getvalue().splitlines()
    longest = max(len(line.rstrip()) for line in lines)
    assert longest < 400, f"{longest} characters"
    assert "1e+300" in out.getvalue()


def test_snapshot_json_numbers_stay_short() -> None:
    text = json.dumps(snapshot_json(_snapshot()))
    assert max(len(token) for token in text.replace(",", " ").split()) < 80
