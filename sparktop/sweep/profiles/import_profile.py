"""Rows imported from another benchmark's results, and the profile YAML written from them.

Every importer (:mod:`sparktop.sweep.profiles.import_formats`) turns its tool's numbers into
:class:`ImportedRow` values with the profile's definitions: TTFT in s, prefill = prompt ÷
TTFT per request, decode per request, the tool's own aggregate (``end-to-end`` or
``decode-only``, said per tool). :func:`profile_yaml` writes them as one profile and checks
that it loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import yaml

from sparktop.errors import UserError
from sparktop.sweep.profiles.import_checks import implausible
from sparktop.sweep.profiles.import_fields import ImportedRow
from sparktop.sweep.profiles.profile_file import parse_profile

COLUMNS = (
    ("prompt_tokens", "mean prompt tokens per request"),
    ("concurrency", "requests in flight (see the notes for measured, approximate ones)"),
    ("ttft_s", "mean time to first token, s"),
    ("prefill_tps", "prompt tokens / mean TTFT per request, tok/s"),
    ("decode_tps", "per-request decode rate, tok/s (see source)"),
    ("aggregate_tps", "output tokens per second of the whole run, as aggregate_kind says"),
    ("wall_s", "duration of the run, s"),
    ("observations", "successful requests the row rests on"),
)


TOOL_NOTES = {
    "vllm bench": (
        "vllm bench serve: decode = 1 / mean TPOT, TPOT = (latency - TTFT) / (output - 1); "
        "aggregate = output tokens / run duration with --max-concurrency requests kept in "
        "flight (steady state; sparktop sweep sends a cell's requests together and waits for "
        "all). Compared with sparktop sweep on a real vLLM: docs/importers.md."
    ),
    "GuideLLM": (
        "GuideLLM: decode = 1 / mean inter-token latency, (latency - TTFT) / (output - 1); "
        "aggregate = output tokens / the measured window, streams kept busy (steady state). "
        "Compared with sparktop sweep on a real vLLM: docs/importers.md."
    ),
    "llama-benchy": (
        "llama-benchy: sends chat completions, so the server prefills the chat template's "
        "tokens on top of prompt_size (the prompt_tokens here); the aggregate is decode-only. "
        "Compared with sparktop sweep on a real vLLM: docs/importers.md."
    ),
    "AIPerf": (
        "AIPerf: decode = 1 / mean inter-token latency, which leaves the first chunk's tokens "
        "out; aggregate = output tokens / (first request to last response), concurrency kept "
        "(steady state); its client runs several processes, which on a small machine share "
        "the CPU with the server. Compared with sparktop sweep on a real vLLM: "
        "docs/importers.md."
    ),
}
"""How each tool's figures are defined, beside sparktop sweep's, in the profile's notes."""


class ImportedProfile(NamedTuple):
    """The profile's YAML text and the implausible values flagged in its notes."""

    text: str
    flags: list[str]


def profile_yaml(
    rows: Sequence[ImportedRow],
    name: str,
    *,
    limits: dict[str, int | None],
    notes: Sequence[str] = (),
) -> ImportedProfile:
    """Profile YAML (format 1) from ``rows``, validated by loading it back, and its flags.

    Implausible values (:mod:`sparktop.sweep.profiles.import_checks`) are kept and flagged in the
    notes, one per cell and reason. Raises UserError when the rows mix tools whose aggregates
    mean different things, or two exact rows share a cell (approximate duplicates are dropped
    with a note)."""
    if not rows:
        raise UserError("no benchmark results found in the files given")
    kinds = {r.aggregate_kind for r in rows}
    if len(kinds) > 1:
        seen = ", ".join(sorted({f"{r.tool} ({r.aggregate_kind})" for r in rows}))
        raise UserError(
            f"the files mix aggregates that mean different things ({seen}); import one "
            "tool's results at a time"
        )
    kept: dict[tuple[int, int], ImportedRow] = {}
    extra = list(notes)
    for r in sorted(rows, key=lambda r: bool(r.approximate)):  # exact rows first
        key = (r.prompt_tokens, r.concurrency)
        first = kept.get(key)
        if first is None:
            kept[key] = r
        elif r.approximate:
            extra.append(
                f"{r.where}: dropped, its measured concurrency {r.concurrency} at {key[0]} "
                f"tokens is already covered by {first.where}"
            )
        else:
            raise UserError(
                f"{r.where}: a second result for {key[0]} prompt tokens at concurrency "
                f"{key[1]} (first: {first.where})"
            )
    chosen = sorted(kept.values(), key=lambda r: (r.concurrency, r.prompt_tokens))
    extra += [f"{r.where}: {r.approximate}" for r in chosen if r.approximate]
    flags = implausible(chosen)
    extra += flags
    outputs = sorted({r.output_tokens for r in chosen})
    models = sorted({r.model for r in chosen if r.model})
    tools = sorted({r.tool for r in chosen})
    sources = sorted({r.where.split(":")[0] for r in chosen})
    doc = {
        "sparktop_profile": 1,
        "name": name,
        "source": f"{', '.join(tools)} results: {', '.join(sources)}",
        "model": ", ".join(models),
        "engine": f"as measured by {', '.join(tools)}",
        "limits": limits,
        "output_tokens": outputs[0] if len(outputs) == 1 else None,
        "aggregate_kind": kinds.pop(),
        "notes": [
            "Imported by 'sparktop profiles --import'; measured by others, not by sparktop.",
            *(TOOL_NOTES[t] for t in tools if t in TOOL_NOTES),
            *extra,
        ],
        "columns": [{"name": n, "meaning": m} for n, m in COLUMNS],
        "rows": [
            [
                r.prompt_tokens,
                r.concurrency,
                round(r.ttft_s, 4),
                round(r.prefill_tps, 1),
                round(r.decode_tps, 2),
                round(r.aggregate_tps, 2),
                round(r.wall_s, 2),
                r.observations,
            ]
            for r in chosen
        ],
    }
    text = "# sparktop sweep profile, format 1 (see sparktop/sweep/README.md).\n" + yaml.safe_dump(
        doc, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
    )
    parse_profile(text, f"<imported {name}>", "imported")  # the output must load
    return ImportedProfile(text, flags)
