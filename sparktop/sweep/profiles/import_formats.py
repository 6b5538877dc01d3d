"""Which benchmark wrote a result file, and its cells as :class:`ImportedRow` values.

Recognised (each by the keys its tool writes):

- **llama-benchy** JSON report (``schemas/benchmark_report_schema.json``): a ``benchmarks``
  list of runs with ``concurrency``, ``context_size``, ``prompt_size``, ``response_size``;
  TTFT = ``e2e_ttft.mean`` (ms; else ``ttfr``), decode per request = ``tg_req_throughput``,
  aggregate = ``tg_throughput`` (all requests' generated tokens ÷ generation time:
  decode-only). Context-prefill phases are skipped; so are runs whose context was served
  from the prefix cache (their TTFT covers only ``prompt_size``);
- **GuideLLM** ``benchmarks.json``: each ``generative_benchmark``; concurrency 1 for
  ``synchronous``, ``streams`` for ``concurrent``, else (``throughput``, ``constant``,
  ``poisson``: a sweep's rate steps) the measured mean ``request_concurrency``, marked
  approximate; TTFT = ``time_to_first_token_ms``, decode = 1000 ÷ ``inter_token_latency_ms``,
  aggregate = output tokens ÷ the measured window (end-to-end);
- **vllm bench serve** ``--save-result`` (also ``--append-result`` JSON lines): concurrency =
  ``max_concurrency``; a request-rate run has none, so the mean concurrency is measured by
  Little's law (request throughput × mean end-to-end latency) and marked approximate;
  aggregate = ``output_throughput`` (end-to-end);
- **vllm bench sweep** output folders: every ``run=N.json`` below the folder (one result per
  parameter set and run); runs of one parameter set become one row (medians);
- **AIPerf** ``profile_export_aiperf.json`` (:mod:`sparktop.sweep.profiles.import_aiperf`), or an
  artifact folder: every ``profile_export_aiperf.json`` below it, one row each.

Anything else is refused in one line that says what the file looks like.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sparktop.errors import UserError
from sparktop.inputfile import read_limited
from sparktop.jsontext import JsonTooDeep, loads
from sparktop.safe_text import printable
from sparktop.sweep.profiles.import_aiperf import aiperf_row, is_aiperf
from sparktop.sweep.profiles.import_fields import MAX_CONCURRENCY, ImportedRow, describe
from sparktop.sweep.profiles.import_fields import mean as _mean
from sparktop.sweep.profiles.import_fields import need as _need
from sparktop.sweep.profiles.import_fields import num as _num
from sparktop.sweep.profiles.import_fields import what as _what
from sparktop.sweep.profiles.import_profile import ImportedProfile, profile_yaml

MAX_FILE_BYTES = 256 << 20
"""GuideLLM keeps every request in benchmarks.json; hundreds of MB is still a result file."""
MAX_SWEEP_FILES = 10_000
EXPECTED = (
    "expected a llama-benchy report, a GuideLLM benchmarks.json, a vllm bench result or an "
    "AIPerf profile_export_aiperf.json"
)
AIPERF_FILE = "profile_export_aiperf.json"


# -- llama-benchy --------------------------------------------------------------------------------


def _llama_benchy(doc: dict[str, Any], where: str) -> list[ImportedRow]:
    rows: list[ImportedRow] = []
    cached = bool(doc.get("prefix_caching_enabled"))
    for i, run in enumerate(doc["benchmarks"]):
        at = f"{where}: benchmarks[{i}]"
        if not isinstance(run, dict):
            raise UserError(f"{at}: not an object")
        if run.get("is_context_prefill_phase"):
            continue
        context = round(_num(run.get("context_size")) or 0)
        if cached and context:
            continue  # the context came from the prefix cache: TTFT is not the whole prompt's
        conc = _need(run, "concurrency", at)
        prompt = context + _need(run, "prompt_size", at)
        ttft_ms = _mean(run.get("e2e_ttft")) or _mean(run.get("ttfr"))
        total = _mean(run.get("tg_throughput"))
        if ttft_ms is None or total is None:
            raise UserError(f"{at}: no e2e_ttft/ttfr or tg_throughput mean")
        per_request = _mean(run.get("tg_req_throughput")) or total / conc
        ttft = run.get("e2e_ttft") or run.get("ttfr") or {}
        values = ttft.get("values") if isinstance(ttft, dict) else None
        rows.append(
            ImportedRow(
                where=at,
                tool="llama-benchy",
                aggregate_kind="decode-only",
                prompt_tokens=round(prompt),
                concurrency=int(conc),
                ttft_s=ttft_ms / 1000,
                decode_tps=per_request,
                aggregate_tps=total,
                wall_s=ttft_ms / 1000 + _need(run, "response_size", at) / per_request,
                observations=len(values) if isinstance(values, list) and values else 1,
                output_tokens=int(_need(run, "response_size", at)),
                model=printable(str(doc.get("model") or "")),
            )
        )
    return rows


# -- GuideLLM ------------------------------------------------------------------------------------


def _ok(metrics: dict[str, Any], key: str, field: str = "mean") -> float | None:
    metric = metrics.get(key)
    good = metric.get("successful") if isinstance(metric, dict) else None
    return _num(good.get(field)) if isinstance(good, dict) else None


def _guidellm(doc: dict[str, Any], where: str) -> list[ImportedRow]:
    rows: list[ImportedRow] = []
    model = str((doc.get("args") or {}).get("model") or "")
    for i, bench in enumerate(doc["benchmarks"]):
        at = f"{where}: benchmarks[{i}]"
        config = bench.get("config") if isinstance(bench, dict) else None
        metrics = bench.get("metrics") if isinstance(bench, dict) else None
        if not isinstance(config, dict) or not isinstance(metrics, dict):
            raise UserError(f"{at}: no config/metrics (not a GuideLLM generative benchmark)")
        strategy = config.get("strategy") or {}
        kind = str(strategy.get("type_", "")) if isinstance(strategy, dict) else ""
        approx = ""
        if kind == "synchronous":
            conc = 1
        elif kind == "concurrent" and _num(strategy.get("streams")):
            conc = int(strategy["streams"])
        else:
            measured = _ok(metrics, "request_concurrency")
            if measured is None:
                raise UserError(f"{at}: a '{kind}' run without a measured request_concurrency")
            conc = max(1, round(measured))
            approx = (
                f"'{printable(kind)}' (rate-driven) run: concurrency {measured:.2f} measured, "
                "approximate"
            )
        sched = bench.get("scheduler_metrics") or {}
        start, end = _num(sched.get("measure_start_time")), _num(sched.get("measure_end_time"))
        outputs = _ok(metrics, "output_token_count", "total_sum")
        prompt = _ok(metrics, "prompt_token_count")
        ttft_ms = _ok(metrics, "time_to_first_token_ms")
        itl_ms = _ok(metrics, "inter_token_latency_ms")
        if None in (start, end, outputs, prompt, ttft_ms, itl_ms) or not end > start:  # type: ignore[operator]
            raise UserError(
                f"{at}: missing one of prompt/output token counts, time_to_first_token_ms, "
                "inter_token_latency_ms or the measured window"
            )
        assert start is not None and end is not None and outputs is not None
        assert prompt is not None and ttft_ms is not None and itl_ms is not None
        totals = metrics.get("request_totals") or {}
        rows.append(
            ImportedRow(
                where=at,
                tool="GuideLLM",
                aggregate_kind="end-to-end",
                prompt_tokens=round(prompt),
                concurrency=conc,
                ttft_s=ttft_ms / 1000,
                decode_tps=1000 / itl_ms,
                aggregate_tps=outputs / (end - start),
                wall_s=end - start,
                observations=int(_num(totals.get("successful")) or 1),
                output_tokens=round(_ok(metrics, "output_token_count") or 1),
                model=printable(model),
                approximate=approx,
            )
        )
    return rows


# -- vllm bench serve / sweep --------------------------------------------------------------------


def _vllm(doc: dict[str, Any], where: str) -> ImportedRow:
    completed = _need(doc, "completed", where)
    prompt = _need(doc, "total_input_tokens", where) / completed
    output = _need(doc, "total_output_tokens", where) / completed
    ttft_ms = _need(doc, "mean_ttft_ms", where)
    tpot_ms = _need(doc, "mean_tpot_ms", where)
    conc = doc.get("max_concurrency")
    approx = ""
    if isinstance(conc, int) and not isinstance(conc, bool) and conc > MAX_CONCURRENCY:
        raise UserError(f"{where}: 'max_concurrency' is {_what(conc)}, not a concurrency")
    if isinstance(conc, bool) or not isinstance(conc, int) or conc < 1:
        rate, e2e_ms = doc.get("request_rate"), _num(doc.get("mean_e2el_ms"))
        throughput = _num(doc.get("request_throughput"))
        if throughput is None:
            raise UserError(
                f"{where}: a request-rate run without max_concurrency or request_throughput, "
                "so its concurrency cannot be measured; rerun vllm bench serve with "
                "--max-concurrency N"
            )
        how = "mean_e2el_ms"
        if e2e_ms is None:
            e2e_ms, how = ttft_ms + tpot_ms * max(0.0, output - 1), "TTFT + TPOT x output"
        measured = throughput * e2e_ms / 1000
        conc = max(1, round(measured))
        peak = doc.get("max_concurrent_requests")
        # Older vllm bench results have no peak: said only when there is one (not "peak None").
        has_peak = isinstance(peak, int) and not isinstance(peak, bool)
        peak_text = f"; peak {peak}" if has_peak else ""
        approx = (
            f"request-rate run ({printable(str(rate))} req/s): concurrency {measured:.2f} measured "
            f"(request throughput x mean latency from {how}{peak_text}), approximate"
        )
    return ImportedRow(
        where=where,
        tool="vllm bench",
        aggregate_kind="end-to-end",
        prompt_tokens=round(prompt),
        concurrency=conc,
        ttft_s=ttft_ms / 1000,
        decode_tps=1000 / tpot_ms,
        aggregate_tps=_need(doc, "output_throughput", where),
        wall_s=_need(doc, "duration", where),
        observations=int(completed),
        output_tokens=round(output),
        model=printable(str(doc.get("model_id") or "")),
        approximate=approx,
    )


def _median_row(rows: list[ImportedRow], where: str) -> ImportedRow:
    """Runs of one parameter set as one row (medians; the first run's counts)."""
    if len(rows) == 1:
        return rows[0]
    first = rows[0]

    def med(name: str) -> float:
        return float(statistics.median(float(getattr(r, name)) for r in rows))

    return ImportedRow(
        where=f"{where} ({len(rows)} runs)",
        tool=first.tool,
        aggregate_kind=first.aggregate_kind,
        prompt_tokens=round(med("prompt_tokens")),
        concurrency=round(med("concurrency")),
        ttft_s=med("ttft_s"),
        decode_tps=med("decode_tps"),
        aggregate_tps=med("aggregate_tps"),
        wall_s=med("wall_s"),
        observations=sum(r.observations for r in rows),
        output_tokens=first.output_tokens,
        model=first.model,
        approximate=first.approximate,
    )


def _sweep_folder(folder: Path) -> list[ImportedRow]:
    runs = sorted(p for p in folder.rglob("run=*.json") if p.is_file() and not p.is_symlink())
    if not runs:
        summaries = sorted(  # phases/<name>/ holds per-phase copies (warmup, profiling)
            p for p in folder.rglob(AIPERF_FILE) if p.is_file() and "phases" not in p.parts
        )
        if summaries:  # an AIPerf artifact folder (one run, or a sweep's runs below it)
            return [
                r
                for path in summaries
                for where, doc in _documents(path)
                for r in rows_of(where, doc)
            ]
        raise UserError(
            f"{folder}: a folder without run=N.json or {AIPERF_FILE} files; expected a vllm "
            "bench sweep output folder or an AIPerf artifact folder (or pass result files)"
        )
    if len(runs) > MAX_SWEEP_FILES:
        raise UserError(f"{folder}: over {MAX_SWEEP_FILES:,} run files; pass a smaller folder")
    groups: dict[Path, list[ImportedRow]] = {}
    for path in runs:
        for where, doc in _documents(path):
            if not isinstance(doc, dict) or "mean_ttft_ms" not in doc:
                raise UserError(f"{where}: {describe(doc)}; expected a vllm bench serve result")
            groups.setdefault(path.parent, []).append(_vllm(doc, where))
    return [_median_row(rows, str(parent)) for parent, rows in groups.items()]


# -- files ---------------------------------------------------------------------------------------


def _documents(path: Path) -> list[tuple[str, Any]]:
    try:
        raw = read_limited(path, MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{path} not found") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UserError(f"{path}: over {MAX_FILE_BYTES >> 20} MiB; not a result file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise UserError(f"{path}: empty (no benchmark results in it)")
    first = _first_item(text)
    if first is not None and not (isinstance(first, dict) and "mean_ttft_ms" in first):
        # A list is only ever a vllm bench sweep summary (runs): told from its first item,
        # not after building millions of objects (a 24 MB list took 669 MB and 8 s).
        raise UserError(f"{path}: a JSON list whose first item is {describe(first)}; {EXPECTED}")
    try:
        return [(str(path), loads(text))]
    except JsonTooDeep as exc:
        raise UserError(f"{path}: not JSON ({exc.msg})") from None
    except json.JSONDecodeError:
        pass
    docs = []  # JSON lines (vllm bench serve --append-result)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            docs.append((f"{path}:{number}", loads(line)))
        except (json.JSONDecodeError, JsonTooDeep) as exc:
            raise UserError(f"{path}:{number}: not JSON ({exc.msg})") from None
    return docs


_SPACE = re.compile(r"[ \t\r\n]*")


def _first_item(text: str) -> Any:
    """The first item of the JSON list ``text`` is, read alone; None when ``text`` is not a
    list or its first item does not read alone (the whole text is then parsed as before)."""
    start = _SPACE.match(text).end()  # type: ignore[union-attr]
    if text[start : start + 1] != "[":
        return None
    at = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    if text[at : at + 1] in ("", "]"):
        return None
    try:
        item, _end = json.JSONDecoder().raw_decode(text, at)
    except (ValueError, RecursionError):
        return None
    return item


def rows_of(where: str, doc: Any) -> list[ImportedRow]:
    """The rows of one JSON document, by the tool that wrote it; UserError if none did."""
    if isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list):
        first = doc["benchmarks"][0] if doc["benchmarks"] else {}
        if isinstance(first, dict) and "prompt_size" in first:
            return _llama_benchy(doc, where)
        if isinstance(first, dict) and (
            first.get("type_") == "generative_benchmark" or "metrics" in first
        ):
            return _guidellm(doc, where)
    if isinstance(doc, dict) and "mean_ttft_ms" in doc:
        return [_vllm(doc, where)]
    if is_aiperf(doc):
        return [aiperf_row(doc, where)]
    if (
        isinstance(doc, list)
        and doc
        and all(isinstance(d, dict) and "mean_ttft_ms" in d for d in doc)
    ):  # a vllm bench sweep summary.json: the runs of one parameter set
        return [_median_row([_vllm(d, f"{where}[{i}]") for i, d in enumerate(doc)], where)]
    raise UserError(f"{where}: {describe(doc)}; {EXPECTED}")


def import_results(paths: Iterable[str | Path], name: str, *, limits: dict[str, int | None]) -> str:
    """Profile YAML from result files and vllm bench sweep folders of one tool."""
    return import_profile(paths, name, limits=limits).text


def import_profile(
    paths: Iterable[str | Path], name: str, *, limits: dict[str, int | None]
) -> ImportedProfile:
    """Profile YAML and its implausible-value flags (see :func:`import_results`)."""
    rows: list[ImportedRow] = []
    for item in paths:
        path = Path(item)
        try:
            if path.is_dir():
                rows += _sweep_folder(path)
                continue
            for where, doc in _documents(path):
                rows += rows_of(where, doc)
        except (OverflowError, ValueError, ZeroDivisionError) as exc:  # a figure out of range
            raise UserError(f"{path}: a figure out of range ({exc})") from None
    return profile_yaml(rows, name, limits=limits)
