#!/usr/bin/env python3
"""Generate the built-in sweep profiles from ``shared/profiles/*.sweep.csv`` and their README.

The CSVs are the seeds' tables transcribed and checked cell by cell; the metadata below is
copied from ``shared/profiles/README.md`` and DESIGN.md §6. Cell texts are written verbatim so
every value round-trips exactly (``tests/test_profiles.py`` checks each cell against the CSV).

    python tools/gen_profiles.py            # (re)write sparktop/sweep/profiles/*.yaml
    python tools/gen_profiles.py --check    # exit 1 if a committed file is out of date
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED_PROFILES = REPO.parent / "shared" / "profiles"
OUT = REPO / "sparktop" / "sweep" / "profiles"

# CSV header -> (profile column name, meaning)
COLUMNS_2X = {
    "prompt_tokens": ("prompt_tokens", "prompt tokens per request"),
    "concurrency": ("concurrency", "simultaneous requests"),
    "ttft_s": ("ttft_s", "time to first token per request, s"),
    "prefill_tps": ("prefill_tps", "prefill rate per request, tok/s (about prompt / TTFT)"),
    "decode_tps": ("decode_tps", "decode rate per stream, tok/s"),
    "aggregate_tps": (
        "aggregate_tps",
        "end-to-end output throughput of the whole batch, tok/s (prefill time included)",
    ),
}
COLUMNS_4X = {
    "context": ("context", "nominal context label of the sweep step"),
    "context_tokens": ("context_tokens", "nominal context length, tokens"),
    "concurrency": ("concurrency", "simultaneous requests"),
    "prompt_tokens": ("prompt_tokens", "prompt tokens actually sent per request"),
    "ttft_s": ("ttft_s", "time to first token, s"),
    "prefill_tps_per_request": ("prefill_tps", "prefill rate, mean over requests, tok/s"),
    "decode_tps_per_request": ("decode_tps", "decode rate, mean over requests, tok/s"),
    "aggregate_prefill_tps": (
        "aggregate_prefill_tps",
        "sum of prompt tokens / max(TTFT), tok/s",
    ),
    "aggregate_decode_tps": (
        "aggregate_tps",
        "decode-only aggregate: sum of completion tokens / (max total time - max TTFT), tok/s",
    ),
    "wall_s": ("wall_s", "wall-clock time of the whole step, s"),
}

PROFILES: dict[str, dict[str, object]] = {
    "2x-spark-dsv4-flash-0731": {
        "columns": COLUMNS_2X,
        "cluster": "2 x DGX Spark, TP=2 (--distributed-executor-backend mp --nnodes 2)",
        "model": "deepseek-ai/DeepSeek-V4-Flash-0731 (304B MoE), KV dtype nvfp4_ds_mla, "
        "block size 256, MTP speculative decoding (5 tokens)",
        "engine": "vLLM, image ghcr.io/anemll/dspark-vllm-gx10:0.1.1, chunked prefill, "
        "gpu_memory_utilization 0.85",
        "nodes": 2,
        "limits": {
            "kv_pool_tokens": (2493464, "boot log: GPU KV cache size (18.08 GiB)"),
            "max_model_len": (1048576, None),
            "max_num_seqs": (6, None),
            "max_num_batched_tokens": (8192, None),
        },
        "output_tokens": None,
        "sm_clock_mhz": [],
        "temperature_c": [],
        "aggregate_kind": "end-to-end",
        "source": "seed 000_801184ffa6916669.txt: the public sweep of "
        "MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark (docs/DEEPSEEK_V4_FLASH_0731.md), "
        "transcribed in shared/profiles/2x-spark-dsv4-flash-0731.sweep.csv. Measured by others "
        "on their cluster, not by sparktop.",
        "notes": [
            "Output tokens per request were not published; the single-stream end-to-end "
            "aggregates fit about 512 (aggregate = out / (TTFT + out / decode); inferred by "
            "sparktop, not published).",
            "The 2,048 x 6 row crosses max_num_batched_tokens (12,288 > 8,192): TTFT steps "
            "from 1.38 s to 6.06 s.",
            "Maximum concurrency for 1,048,576 tokens per request: 2.38x (boot log).",
        ],
        "acceptance": [
            {
                "prompt_tokens": 899994,
                "concurrency": 1,
                "ttft_s": 1028.85,
                "prefill_tps": 874.8,
                "note": "single-stream acceptance run; decode and aggregate not published",
            }
        ],
    },
    "4x-spark-dsv41-flash-1017": {
        "columns": COLUMNS_4X,
        "cluster": "4 x DGX Spark, TP=4, switchless ring (4 DAC cables, SIRCL transport, no NCCL)",
        "model": "DeepSeek V4.1 Flash 1017 (checkpoint 1bae0e108899, 48 shards, 475.3 GiB), "
        "quantisation deepseek_v41_fp8, DSpark speculative decoding (5 tokens)",
        "engine": "vLLM Kraken build, chunked prefill, static memory fraction 0.83",
        "nodes": 4,
        "limits": {
            "kv_pool_tokens": (11434628, "14.23 GiB available KV memory; 10.90 x 1M requests"),
            "max_model_len": (1048576, None),
            "max_num_seqs": (8, None),
            "max_num_batched_tokens": (8192, None),
        },
        "output_tokens": 128,
        "sm_clock_mhz": [2509, 2522, 2509, 2541],
        "temperature_c": [53, 56],
        "aggregate_kind": "decode-only",
        "source": "seed 003_e79035d918857a43.txt: the 4-Spark DeepSeek V4.1 Flash 1017 sweep, "
        "transcribed in shared/profiles/4x-spark-dsv41-flash-1017.sweep.csv. Measured by "
        "others on their cluster, not by sparktop.",
        "notes": [
            "Unique nonce + counter in every prompt (no prefix-cache hits); temperature 0.6.",
            "Cells up to 64K are the median of 3 runs, 128K and above single runs; the first "
            "request of a round carries about 2.2 s of cold start (steady state 0.98 s at 1K).",
            "Baseline: SM clocks 2509/2522/2509/2541 MHz (max 3003) at 53-56 C, no slowdown.",
            "Short-prompt fit from the seed: TTFT = 0.8 s + prompt_tokens / 4,700 tok/s.",
            "At concurrency 1 the aggregate equals the per-request figure.",
        ],
        "acceptance": [],
    },
}


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text, ensure_ascii=False)


def render(name: str, csv_text: str) -> str:
    meta = PROFILES[name]
    columns: dict[str, tuple[str, str]] = meta["columns"]  # type: ignore[assignment]
    reader = csv.reader(csv_text.splitlines())
    header = next(reader)
    if set(header) != set(columns):
        raise SystemExit(f"{name}: CSV header {header} does not match the expected columns")
    out = [
        "# sparktop sweep profile, format 1 (see sparktop/sweep/README.md).",
        f"# Generated by tools/gen_profiles.py from shared/profiles/{name}.sweep.csv and",
        "# shared/profiles/README.md; edit those and regenerate rather than editing this file.",
        "sparktop_profile: 1",
        f"name: {name}",
        f"cluster: {_q(str(meta['cluster']))}",
        f"model: {_q(str(meta['model']))}",
        f"engine: {_q(str(meta['engine']))}",
        f"nodes: {meta['nodes']}",
        "limits:",
    ]
    limits: dict[str, tuple[int, str | None]] = meta["limits"]  # type: ignore[assignment]
    for key, (value, comment) in limits.items():
        out.append(f"  {key}: {value}" + (f"  # {comment}" if comment else ""))
    output = meta["output_tokens"]
    out.append(
        f"output_tokens: {output}  # per request in the sweep"
        if output is not None
        else "output_tokens: null  # not published"
    )
    out += [
        "baseline:  # during the sweep",
        f"  sm_clock_mhz: {json.dumps(meta['sm_clock_mhz'])}  # one per node",
        f"  temperature_c: {json.dumps(meta['temperature_c'])}  # as published (low, high)",
        f"aggregate_kind: {meta['aggregate_kind']}",
        f"source: {_q(str(meta['source']))}",
        "notes:",
        *(f"  - {_q(n)}" for n in meta["notes"]),  # type: ignore[attr-defined]
        "columns:  # order of the values in each row",
        *(f"  - {{name: {columns[h][0]}, meaning: {_q(columns[h][1])}}}" for h in header),
        "rows:",
    ]
    for cells in reader:
        if not cells:
            continue
        values = [
            _q(c) if columns[h][0] == "context" else c for h, c in zip(header, cells, strict=True)
        ]
        out.append(f"  - [{', '.join(values)}]")
    accept: list[dict[str, object]] = meta["acceptance"]  # type: ignore[assignment]
    if accept:
        out.append("acceptance:  # measurements outside the grid")
        for point in accept:
            fields = ", ".join(
                f"{k}: {_q(v) if isinstance(v, str) else v}" for k, v in point.items()
            )
            out.append(f"  - {{{fields}}}")
    else:
        out.append("acceptance: []")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args()
    stale = []
    for name in PROFILES:
        text = render(name, (SHARED_PROFILES / f"{name}.sweep.csv").read_text(encoding="utf-8"))
        target = OUT / f"{name}.yaml"
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(str(target))
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(REPO)}")
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
