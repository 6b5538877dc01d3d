"""The snapshot's human output at 80, 100 and 160 columns: every value shown whole, columns
left out by priority (and named), engines split into two narrower tables when one is too wide.

GPU readings are those of the nvidia-smi cases (gb10-query-with-header.csv: 2509/3003 MHz,
55 °C, 41.37 W; gb10-thermal-slowdown.csv: 1833 MHz, reason 0x20; gb10-hidden-low-power.csv:
513 MHz, ~15 W, 100 % busy, no reason bit); test_snapshot.py reads them through SSH.
"""

from __future__ import annotations

import dataclasses
import io

import pytest
from rich.cells import cell_len
from rich.console import Console

from sparktop.model import (
    EngineSample,
    EngineState,
    GpuSample,
    NodeMemory,
    NodeSample,
    NodeState,
    Quantile,
    RankStats,
)
from sparktop.report.snapshot_table import NODE_PRIORITY, fit_console, needed_width, render_table
from sparktop.snapshot import Snapshot

GB10 = "NVIDIA GB10"
MEMORY = NodeMemory(total_mib=124_610.0, used_mib=107_213.0, gpu_held_mib=103_424.0, unified=True)


def _node(name: str, sm: float, temp: float, power: float, util: float, mask: int) -> NodeSample:
    gpu = GpuSample(
        index=0,
        uuid=f"GPU-{name}",
        name=GB10,
        sm_clock_mhz=sm,
        max_sm_clock_mhz=3003.0,
        temperature_c=temp,
        power_w=power,
        utilization_pct=util,
        clock_event_mask=mask,
    )
    return NodeSample(node=name, time_s=0.0, gpus=(gpu,), memory=MEMORY)


NODES = (
    _node("spark-1", 2509.0, 55.0, 41.37, 97.0, 0x0),
    _node("spark-2", 1833.0, 92.0, 38.2, 99.0, 0x20),
    _node("spark-3", 513.0, 47.0, 15.1, 100.0, 0x0),
    NodeSample(
        node="spark-4",
        time_s=0.0,
        state=NodeState.UNREACHABLE,
        message="unreachable since 14:01:58: connection refused",
        since_s=0.0,
    ),
)
EXPECTED = {  # node → the value of each column, as the table shows it
    "spark-1": {"SM MHz": "2509/3003", "°C": "55", "W": "41", "util%": "97", "reasons": "none"},
    "spark-2": {
        "SM MHz": "1833/3003",
        "°C": "92",
        "W": "38",
        "util%": "99",
        "reasons": "sw_thermal_slowdown",
    },
    "spark-3": {"SM MHz": "513/3003", "°C": "47", "W": "15", "util%": "100", "reasons": "none"},
}
for values in EXPECTED.values():
    values |= {"GPU": "0 GB10", "memory": "U 105/122G·GPU 101G", "state": "ok"}


def _engine() -> EngineSample:
    ranks = tuple(
        RankStats(
            rank=str(i),
            running=float(r),
            waiting=float(w),
            kv_usage=kv,
            kv_pool_tokens=1_245_000.0,
            kv_free_tokens=1_245_000.0 * (1 - kv),
            preemptions_per_s=0.0,
            prefill_tps=pf,
            decode_tps=dc,
            ttft_p50=Quantile(0.55),
            ttft_p95=Quantile(0.955),
            itl_p50=Quantile(0.01, "<"),
            mean_prompt_tokens=6656.0,
            prefix_hit_rate=0.25,
        )
        for i, (r, w, kv, pf, dc) in enumerate(
            [(4, 1, 0.81, 4700.0, 65.2), (3, 0, 0.47, 874.8, 34.7)]
        )
    )
    return EngineSample(
        engine="dsv41",
        time_s=0.0,
        running=7.0,
        waiting=1.0,
        kv_usage=0.81,
        kv_pool_tokens=2_490_000.0,
        kv_pool_source="cache_config_info",
        kv_free_tokens=896_400.0,
        preemptions_per_s=0.0,
        prefill_tps=5574.8,
        decode_tps=99.9,
        ttft_p50=Quantile(0.55),
        ttft_p95=Quantile(0.955),
        itl_p50=Quantile(0.01, "<"),
        mean_prompt_tokens=6656.0,
        prefix_hit_rate=0.25,
        max_num_seqs=8.0,
        ranks=ranks,
        window_s=1.0,
        since_start=("itl_p50",),
    )


DOWN = EngineSample(
    engine="qwen-coder", time_s=0.0, state=EngineState.UNREACHABLE, message="connection refused"
)
SNAP = Snapshot("dspark-4x", 0.0, NODES, (_engine(), DOWN))
ENGINE_VALUES = (
    *("7/16", "4/8", "3/8", "81.0", "2.49M", "896.4k", "5,575", "99.9", "550 ms", "955 ms"),
    *("< 10 ms*", "6,656", "25.0", "└ rank 1", "qwen-coder"),
)


def render(width: int, snap: Snapshot = SNAP) -> str:
    out = io.StringIO()
    render_table(snap, Console(file=out, width=width, color_system=None))
    return out.getvalue()


def _shown(text: str) -> set[str]:
    header = next(line for line in text.splitlines() if line.startswith("node "))
    return {name for name in NODE_PRIORITY if f" {name} " in f" {header} "}


@pytest.mark.parametrize("width", [80, 100, 160])
def test_every_value_is_whole_and_within_the_width(width: int) -> None:
    text = render(width)
    lines = text.splitlines()
    assert "…" not in text
    assert max(cell_len(line) for line in lines) <= width
    shown = _shown(text)
    # What matters most is always there: node, state, SM clock, utilisation, power, °C.
    assert {"node", "state", "SM MHz", "util%", "W", "°C"} <= shown
    for node, values in EXPECTED.items():
        row = next(line for line in lines if line.startswith(node + " "))
        for column, value in values.items():
            if column in shown:
                assert f" {value} " in f" {row} ", (width, node, column)
    down = next(line for line in lines if line.startswith("spark-4 "))
    assert down.rstrip().endswith("unreachable")
    assert "spark-4: unreachable since 14:01:58: connection refused" in text
    for value in ENGINE_VALUES:
        assert value in text, (width, value)
    assert "dsv41: pool from cache_config_info; rates over 1.0 s" in text


def test_160_columns_show_everything_in_one_table_each() -> None:
    text = render(160)
    assert _shown(text) == set(NODE_PRIORITY)
    assert "not shown at" not in text
    header = next(line for line in text.splitlines() if line.startswith("engine "))
    wide = "engine running waiting KV % pool tok free tok preempt/s prefill tok/s decode tok/s "
    assert " ".join(header.split()) == wide + "TTFT p50 TTFT p95 ITL p50 mean prompt hit % state"
    assert "engines: speed" not in text
    down = next(line for line in text.splitlines() if line.startswith("qwen-coder "))
    assert down.split() == ["qwen-coder", "unreachable"]  # nothing read: no row of n/a
    assert "memory: U = unified, used/total GiB" in text


def test_80_columns_leave_out_the_least_important_columns_and_say_so() -> None:
    text = render(80)
    hidden = set(NODE_PRIORITY) - _shown(text)
    assert hidden and "memory" in hidden  # reasons (sw_thermal_slowdown) outrank memory
    assert "sw_thermal_slowdown" in text
    note = next(line for line in text.splitlines() if line.startswith("not shown at 80 columns"))
    assert all(name in note for name in hidden) and "use --json" in note
    # The engines: requests/KV cache and speed, each narrow enough to show whole.
    assert "engines: requests and KV cache" in text and "engines: speed" in text
    assert "prefill\n" not in text  # two-line headers are rows of the table, not broken words


def test_needed_width_is_what_shows_everything() -> None:
    width = needed_width(SNAP)
    text = render(width)
    assert "not shown" not in text and "engines: speed" not in text
    narrower = render(width - 1)
    assert "engines: requests and KV cache" in narrower and "engines: speed" in narrower


def test_columns_are_left_out_in_the_documented_order() -> None:
    """Least important first (NODE_PRIORITY read backwards); a narrower, less important
    column still shows when it fits in the room a wider one left."""
    assert NODE_PRIORITY == (
        "node", "state", "SM MHz", "util%", "W", "°C", "reasons", "memory", "GPU"
    )  # fmt: skip
    snap = Snapshot("c", 0.0, NODES[:1])
    full = needed_width(snap)
    assert set(NODE_PRIORITY) - _shown(render(full - 1, snap)) == {"GPU"}
    at_60 = _shown(render(60, snap))
    assert set(NODE_PRIORITY) - at_60 == {"memory"}  # 21 cells: no room; GPU (8) still fits
    assert _shown(render(40, snap)) == {"node", "state", "SM MHz", "util%", "W", "°C"}


def test_a_tiny_console_folds_names_instead_of_clipping_them() -> None:
    long = NodeSample(node="dgx-spark-rack7-node-0042", time_s=0.0, state=NodeState.AUTH)
    text = render(20, Snapshot("c", 0.0, (long,)))
    assert "…" not in text
    assert "dgx-spark-rack7-node-0042" in text.replace("\n", "").replace(" ", "")


def test_discrete_gpu_memory_and_names() -> None:
    gpu = GpuSample(
        index=1,
        uuid="GPU-h",
        name="NVIDIA H100 80GB HBM3",
        memory_used_mib=12_345.0,
        memory_total_mib=81_559.0,
        clock_event_mask=0x1,
    )
    text = render(160, Snapshot("c", 0.0, (NodeSample(node="h100", time_s=0.0, gpus=(gpu,)),)))
    assert "1 H100 80GB HBM3" in text and "12/80G" in text and "gpu_idle" in text
    assert "NVIDIA" not in text and "U = unified" not in text


def test_the_star_legend_is_there_only_when_a_value_has_a_star() -> None:
    hit = dataclasses.replace(_engine(), ranks=(), since_start=("prefix_hit_rate",))
    text = render(160, Snapshot("c", 0.0, (), (hit,)))
    assert "25.0*" in text and "* = since server start" in text
    spec = dataclasses.replace(_engine(), ranks=(), since_start=("spec_acceptance_rate",))
    text = render(160, Snapshot("c", 0.0, (), (spec,)))
    assert "*" not in text  # no column shows the speculative-decoding rate


def test_a_pipe_gets_every_column_and_every_note_on_whole_lines() -> None:
    """Piped output (not a terminal, 80 columns) is for grep: one engines table, and a note
    longer than any width stays one line starting with its engine's name."""
    long_reason = "KV pool unknown: " + "no cache_config_info on the page; " * 8
    engine = dataclasses.replace(_engine(), kv_pool_tokens=None, kv_pool_source=long_reason)
    snap = Snapshot("dspark-4x", 0.0, NODES, (engine, DOWN))
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None, force_terminal=False)
    fit_console(console, snap)
    render_table(snap, console)
    text = out.getvalue()
    assert "engines: speed" not in text and "not shown at" not in text
    lines = text.splitlines()
    assert any(line.startswith("dsv41: ") and len(line) > console.width for line in lines), text
    assert all(line.startswith(("dsv41", "qwen", "  ")) or "cache_config_info" not in line
               for line in lines)  # fmt: skip
