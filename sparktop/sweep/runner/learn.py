"""A profile learnt from a recording: this cluster's own normal, cell by cell.

``sparktop profiles --from-recording run.jsonl.zst`` reads every tick (:mod:`sparktop.record`)
and keeps an engine's reading when it is *steady*: the engine answers, requests are running
and none wait, no restart, the running count has not changed for :data:`STEADY_TICKS` ticks,
and the window has finished requests (a mean prompt length) and an exact TTFT p50. Each
steady reading falls into a cell: prompt bucket (the window's mean prompt length, to the
nearest power of two) × running requests. Per cell: the medians of prompt tokens, TTFT
(p50 of the window), per-stream decode (1 / mean ITL) and the generation rate (an end-to-end
aggregate over the window), the number of readings and the TTFT and decode quartiles. Cells
with fewer than ``min_observations`` readings are left out. Consecutive readings share most
of their window, so a count says how long the cell was seen, not how many independent
samples it has.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sparktop.errors import UserError
from sparktop.model import EngineSample, Quantile, is_num
from sparktop.record.reader import read_ticks
from sparktop.safe_text import printable
from sparktop.sweep.profiles.profile_file import parse_profile
from sparktop.sweep.runner.sweep_cells import quartiles

STEADY_TICKS = 3
"""Ticks the running count must hold before a reading counts (ramps are not steady)."""
MIN_OBSERVATIONS = 5

COLUMNS = (
    ("context", "prompt bucket (nearest power of two of the window's mean prompt length)"),
    ("prompt_tokens", "median of the windows' mean prompt tokens"),
    ("concurrency", "running requests during the window (steady, none waiting)"),
    ("ttft_s", "median of the windows' TTFT p50, s"),
    ("prefill_tps", "prompt tokens / TTFT, tok/s"),
    ("decode_tps", "median per-stream decode, 1 / mean inter-token latency, tok/s"),
    ("aggregate_tps", "median generation rate of the engine over the window (end-to-end), tok/s"),
    ("observations", "steady readings in the cell (overlapping windows)"),
    ("ttft_p25_s", "25th percentile of those TTFTs, s"),
    ("ttft_p75_s", "75th percentile of those TTFTs, s"),
    ("decode_p25_tps", "25th percentile of per-stream decode, tok/s"),
    ("decode_p75_tps", "75th percentile of per-stream decode, tok/s"),
)


@dataclass(slots=True)
class _Cell:
    prompts: list[float] = field(default_factory=list)
    ttfts: list[float] = field(default_factory=list)
    decodes: list[float] = field(default_factory=list)
    aggregates: list[float] = field(default_factory=list)


def bucket(prompt_tokens: float) -> int:
    """The power of two nearest ``prompt_tokens`` (on a log scale), at least 1."""
    return int(2 ** round(math.log2(max(1.0, prompt_tokens))))


def label(tokens: int) -> str:
    if tokens >= 1 << 20:
        return f"{tokens >> 20}M"
    return f"{tokens >> 10}K" if tokens >= 1024 else str(tokens)


def _reading(e: EngineSample) -> tuple[float, float, float, float] | None:
    """(prompt, TTFT s, decode tok/s, aggregate tok/s) of a steady-looking sample, or None."""
    if not e.ok or e.restarted or not is_num(e.running) or e.running < 1:
        return None
    if not is_num(e.waiting) or e.waiting > 0 or not is_num(e.mean_prompt_tokens):
        return None
    ttft = e.ttft_p50
    if not isinstance(ttft, Quantile) or ttft.bound or not ttft.value_s > 0:
        return None
    if not is_num(e.itl_mean_s) or not e.itl_mean_s > 0 or not is_num(e.decode_tps):
        return None
    if not e.decode_tps > 0:
        return None
    return e.mean_prompt_tokens, ttft.value_s, 1.0 / e.itl_mean_s, e.decode_tps


def learn_cells(samples: Iterable[EngineSample]) -> dict[tuple[int, int], _Cell]:
    """Steady readings grouped by (prompt bucket, running), in the order given (per engine)."""
    cells: dict[tuple[int, int], _Cell] = {}
    last: dict[str, tuple[float, int]] = {}
    for e in samples:
        running = round(e.running) if is_num(e.running) else -1
        previous, held = last.get(e.engine, (-1, 0))
        held = held + 1 if running == previous else 1
        last[e.engine] = (running, held)
        reading = _reading(e)
        if reading is None or held < STEADY_TICKS:
            continue
        prompt, ttft, decode, aggregate = reading
        cell = cells.setdefault((bucket(prompt), running), _Cell())
        cell.prompts.append(prompt)
        cell.ttfts.append(ttft)
        cell.decodes.append(decode)
        cell.aggregates.append(aggregate)
    return cells


LIMIT_FLAGS = {
    "kv_pool_tokens": "--kv-pool",
    "max_model_len": "--max-model-len",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-batched",
}
"""The profile's limits and the ``profiles`` option that states each."""


def recorded_limits(
    samples: Iterable[EngineSample], given: dict[str, int | None]
) -> tuple[dict[str, int], str]:
    """The limits the learnt profile states, and one note saying where each came from.

    A value given on the command line wins; else the newest recorded sample's, when the
    server (``/metrics``, ``/v1/models``, ``cache_config_info``) or the inventory stated it.
    A limit the scrape took from a profile is left out (a learnt profile would only repeat
    another's guess). With none known the block is omitted and the note says why."""
    found: dict[str, tuple[int, str]] = {
        k: (v, f"given as {LIMIT_FLAGS[k]}") for k, v in given.items() if v is not None
    }
    for sample in reversed(list(samples)):
        for key in LIMIT_FLAGS:
            value = getattr(sample, key)
            origin = (
                sample.kv_pool_source
                if key == "kv_pool_tokens"
                else sample.limit_sources.get(key, "")
            )
            if key in found or not is_num(value) or value < 1:
                continue
            if origin in ("profile", "unknown", ""):
                continue
            found[key] = (int(value), f"from the recording ({printable(origin)})")
    limits = {k: found[k][0] for k in LIMIT_FLAGS if k in found}
    if not limits:
        return {}, (
            "No limits: the recording states none (no max_num_seqs, max_num_batched_tokens, "
            "max_model_len or KV pool from the server or the inventory); give them with "
            + ", ".join(LIMIT_FLAGS.values())
            + "."
        )
    said = "; ".join(f"{k} {found[k][0]:,} {found[k][1]}" for k in limits)
    missing = [k for k in LIMIT_FLAGS if k not in limits]
    tail = f"; not known: {', '.join(missing)}" if missing else ""
    return limits, f"Limits: {said}{tail}."


def learn_profile(
    path: str | Path,
    name: str,
    *,
    limits: dict[str, int | None],
    min_observations: int = MIN_OBSERVATIONS,
) -> str:
    """Profile YAML (format 1) learnt from the recording at ``path``; validated by loading.

    Raises UserError when the recording cannot be read or has no cell with enough steady
    readings."""
    recording, ticks = read_ticks(Path(path))
    samples = [e for t in ticks for e in t.engines]
    cells = learn_cells(samples)
    kept = {k: c for k, c in cells.items() if len(c.ttfts) >= min_observations}
    if not kept:
        raise UserError(
            f"{path}: no cell with {min_observations} or more steady readings in "
            f"{len(ticks)} ticks (steady: requests running, none waiting, the running count "
            f"held {STEADY_TICKS} ticks, finished requests in the window)"
        )
    rows = []
    for (size, conc), c in sorted(kept.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        prompt = statistics.median(c.prompts)
        ttft = statistics.median(c.ttfts)
        t25, t75 = quartiles(sorted(c.ttfts))
        d25, d75 = quartiles(sorted(c.decodes))
        rows.append(
            [
                label(size),
                round(prompt),
                conc,
                round(ttft, 4),
                round(prompt / ttft, 1),
                round(statistics.median(c.decodes), 2),
                round(statistics.median(c.aggregates), 2),
                len(c.ttfts),
                round(t25, 4),
                round(t75, 4),
                round(d25, 2),
                round(d75, 2),
            ]
        )
    left_out = len(cells) - len(kept)
    engines = sorted({printable(e.engine) for e in samples})
    models = sorted({printable(e.model) for e in samples if e.model})
    created = recording.header.get("created_s")
    when = (
        dt.datetime.fromtimestamp(created, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        if isinstance(created, int | float) and not isinstance(created, bool)
        else "at an unknown time"
    )
    stated, limits_note = recorded_limits(samples, limits)
    doc: dict[str, object] = {
        "sparktop_profile": 1,
        "name": name,
        "source": f"observed on this cluster, not a sweep: recording {Path(path).name}",
        "model": ", ".join(models),
        "engine": ", ".join(engines),
        **({"limits": stated} if stated else {}),
        "aggregate_kind": "end-to-end",
        "notes": [
            "Observed on this cluster, not a sweep: steady stretches of live traffic "
            f"({len(ticks)} ticks, recording started {when}).",
            f"A reading counts when requests run, none wait and the running count held "
            f"{STEADY_TICKS} ticks; cells with fewer than {min_observations} readings are "
            f"left out ({left_out} left out).",
            "Readings of consecutive ticks share most of their window: the count says how "
            "long a cell was seen, not how many independent samples it has.",
            limits_note,
        ],
        "columns": [{"name": n, "meaning": m} for n, m in COLUMNS],
        "rows": rows,
    }
    text = "# sparktop profile learnt from a recording, format 1.\n" + yaml.safe_dump(
        doc, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
    )
    parse_profile(text, f"<learnt {name}>", "learnt")
    return text
