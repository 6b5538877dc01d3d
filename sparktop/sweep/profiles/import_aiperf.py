"""AIPerf's ``profile_export_aiperf.json`` as one :class:`ImportedRow`.

AIPerf (``aiperf profile``, PyPI ``aiperf``; read from 0.13.0's output and its
``json-export-schema`` reference, schema 1.4) writes one summary per run: each metric a
block ``{"unit", "avg", "p50", …, "count"}`` (``avg`` alone for derived metrics), the
run's configuration under ``input_config`` and ``is_complete``/``was_cancelled`` flags.

Read, with their units converted (``ms``, ``sec``):

- prompt tokens = ``input_sequence_length.avg``, output = ``output_sequence_length.avg``
  (client-side counts unless the run had ``--use-server-token-count``);
- TTFT = ``time_to_first_token.avg``;
- decode per request = 1 ÷ ``inter_token_latency.avg`` (its ITL is (latency − TTFT) ÷
  (output − first chunk's tokens), so this is the rate the other importers read from TPOT;
  ``output_token_throughput_per_user`` is the mean of per-request 1/ITL and skips requests
  whose ITL is 0, so it is not used);
- aggregate = ``output_token_throughput.avg``: all output tokens ÷ ``benchmark_duration``
  (first request sent to last response: end-to-end);
- concurrency = the profiling phase's ``concurrency`` in ``input_config.phases``; in a
  request-rate run (``rate`` set) that is at most a cap, so its mean concurrency is measured
  (Little's law: ``request_throughput`` × ``request_latency.avg``) and marked approximate;
- observations = ``request_count.avg``.

A run AIPerf marks incomplete or cancelled is refused: its figures cover part of a run.
"""

from __future__ import annotations

from typing import Any

from sparktop.errors import UserError
from sparktop.safe_text import printable
from sparktop.sweep.profiles.import_fields import MAX_CONCURRENCY, ImportedRow, num, what

SECONDS_PER_UNIT = {"ms": 1e-3, "sec": 1.0, "s": 1.0, "us": 1e-6, "ns": 1e-9}
METRICS_READ = (
    "time_to_first_token",
    "inter_token_latency",
    "input_sequence_length",
    "output_sequence_length",
    "output_token_throughput",
    "benchmark_duration",
    "request_count",
)


def is_aiperf(doc: Any) -> bool:
    """True for an AIPerf summary: version keys or its TTFT block beside ``input_config``."""
    if not isinstance(doc, dict):
        return False
    ttft = doc.get("time_to_first_token")
    return "aiperf_version" in doc or (isinstance(ttft, dict) and "input_config" in doc)


def _avg(doc: dict[str, Any], key: str, where: str) -> float:
    block = doc.get(key)
    value = num(block.get("avg")) if isinstance(block, dict) else None
    if value is not None:
        return value
    if not isinstance(block, dict):
        hint = " (a run without --streaming has no TTFT or inter-token latency)"
        raise UserError(f"{where}: no '{key}' in this AIPerf summary{hint}")
    hint = ""
    if key == "inter_token_latency" and block.get("avg") == 0:
        hint = ": every answer arrived in one chunk, so no decode rate can be read"
    raise UserError(
        f"{where}: '{key}.avg' is {what(block.get('avg'))}, not a finite positive number{hint}"
    )


def _seconds(doc: dict[str, Any], key: str, where: str) -> float:
    value = _avg(doc, key, where)
    unit = str(doc[key].get("unit", ""))
    scale = SECONDS_PER_UNIT.get(unit)
    if scale is None:
        raise UserError(f"{where}: '{key}' in unit {printable(unit)[:20]!r}, not a time unit")
    return value * scale


def _phase(doc: dict[str, Any]) -> dict[str, Any]:
    config = doc.get("input_config")
    phases = config.get("phases") if isinstance(config, dict) else None
    for phase in phases if isinstance(phases, list) else []:
        if isinstance(phase, dict) and phase.get("kind", "profiling") == "profiling":
            return phase
    return {}


def _model(doc: dict[str, Any]) -> str:
    config = doc.get("input_config")
    models = config.get("models") if isinstance(config, dict) else None
    items = models.get("items") if isinstance(models, dict) else None
    first = items[0] if isinstance(items, list) and items else None
    return printable(str(first.get("name") or "")) if isinstance(first, dict) else ""


def aiperf_row(doc: dict[str, Any], where: str) -> ImportedRow:
    """The run's one row; UserError naming the field when a figure is missing or bad."""
    if doc.get("is_complete") is False or doc.get("was_cancelled") is True:
        reason = printable(str(doc.get("incomplete_reason") or "cancelled"))[:120]
        raise UserError(f"{where}: AIPerf marks this run incomplete ({reason}); not imported")
    phase = _phase(doc)
    conc = phase.get("concurrency")
    approx = ""
    if (
        phase.get("rate") is not None
        or isinstance(conc, bool)
        or not isinstance(conc, int)
        or not 1 <= conc <= MAX_CONCURRENCY
    ):
        throughput = num((doc.get("request_throughput") or {}).get("avg"))
        if throughput is None:
            raise UserError(
                f"{where}: no profiling concurrency in input_config.phases and no "
                "request_throughput to measure it; rerun aiperf profile with --concurrency N"
            )
        measured = throughput * _seconds(doc, "request_latency", where)
        conc = max(1, round(measured))  # a rate's concurrency is only a cap
        approx = (
            f"request-rate run ({printable(str(phase.get('rate', '?')))[:20]} req/s): "
            f"concurrency {measured:.2f} measured (request throughput x mean latency), "
            "approximate"
        )
    prompt = _avg(doc, "input_sequence_length", where)
    output = _avg(doc, "output_sequence_length", where)
    return ImportedRow(
        where=where,
        tool="AIPerf",
        aggregate_kind="end-to-end",
        prompt_tokens=round(prompt),
        concurrency=conc,
        ttft_s=_seconds(doc, "time_to_first_token", where),
        decode_tps=1 / _seconds(doc, "inter_token_latency", where),
        aggregate_tps=_avg(doc, "output_token_throughput", where),
        wall_s=_seconds(doc, "benchmark_duration", where),
        observations=round(_avg(doc, "request_count", where)),
        output_tokens=round(output),
        model=_model(doc),
        approximate=approx,
    )
