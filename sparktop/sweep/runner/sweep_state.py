"""A sweep's plan, provenance and finished cells on disk, and the profile written from them.

Two files per sweep: the profile (``-o my.yaml``, format 1, rewritten after every cell) and
beside it ``my.yaml.runs.jsonl``: a header line (plan and provenance) and one line per
finished cell with every request's measurements. ``--resume`` reads the runs file and skips
the cells it holds; a line cut off by a kill mid-write is ignored. Both files are replaced or
appended without following a symlink an attacker could have put in their place, and a
FIFO or socket in the runs file's place is refused at once (:mod:`sparktop.outfile`).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from sparktop.errors import UserError
from sparktop.inputfile import read_limited
from sparktop.outfile import append_file, create_file
from sparktop.sweep.profiles.profile_file import parse_profile
from sparktop.sweep.runner.bench_client import RequestResult
from sparktop.sweep.runner.sweep_cells import CellRuns, cell_figures, no_figures_reason

RUNS_FORMAT = "sparktop-sweep-runs"
RUNS_VERSION = 1

COLUMNS = (
    ("context", "nominal prompt length asked for (--prompts)"),
    ("context_tokens", "tokens asked for per prompt"),
    ("concurrency", "requests sent together"),
    ("prompt_tokens", "prompt tokens per request as the server counted them (usage), median"),
    ("ttft_s", "time to first content token, s; mean over a run's requests, median of runs"),
    ("prefill_tps", "prompt tokens / TTFT per request, tok/s; mean, median of runs"),
    (
        "decode_tps",
        "per request, tok/s: 1 / the server's mean inter-token latency over the "
        "run when its histogram saw exactly the run's tokens, else output tokens after the "
        "first / time after the first",
    ),
    ("aggregate_prefill_tps", "sum of prompt tokens / max TTFT, tok/s"),
    ("aggregate_tps", "decode-only: sum of output tokens / (last token - max TTFT), tok/s"),
    ("aggregate_e2e_tps", "end-to-end: sum of output tokens / wall time of the run, tok/s"),
    ("wall_s", "wall time of one run of the cell, s (median)"),
    ("observations", "requests that succeeded in the cell"),
)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a sweep measures. ``prompts`` pairs a label (``"4K"``) with its token count."""

    endpoint: str
    model: str
    prompts: tuple[tuple[str, int], ...]
    concurrency: tuple[int, ...]
    output_tokens: int
    runs: int

    def cells(self) -> list[tuple[str, int, int]]:
        """``(label, prompt tokens, concurrency)`` in the order they are measured."""
        return [(lab, tok, c) for lab, tok in self.prompts for c in self.concurrency]

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["prompts"] = [list(p) for p in self.prompts]
        doc["concurrency"] = list(self.concurrency)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Plan:
        return cls(
            endpoint=str(doc["endpoint"]),
            model=str(doc["model"]),
            prompts=tuple((str(a), int(b)) for a, b in doc["prompts"]),
            concurrency=tuple(int(c) for c in doc["concurrency"]),
            output_tokens=int(doc["output_tokens"]),
            runs=int(doc["runs"]),
        )


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where and how the numbers were measured (all text already made printable)."""

    date: str
    sparktop_version: str
    command: str
    server_version: str
    prompt_method: str
    max_model_len: int | None = None
    kv_pool_tokens: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    cache_config: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    engine: str = ""
    """The engine kind's name (``vLLM``, ``llama.cpp``, …); "" when the server did not say."""

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["notes"] = list(self.notes)
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Provenance:
        doc = dict(doc)
        doc["notes"] = tuple(doc.get("notes", ()))
        return cls(**doc)


def runs_path(output: Path) -> Path:
    return output.with_name(output.name + ".runs.jsonl")


OPTION = "--output"
"""The option the runs file's errors name: it is written beside the profile ``-o`` names."""

MAX_RUNS_BYTES = 256 << 20
"""The largest runs file ``--resume`` reads (a few hundred bytes per request measured)."""


def _append(file: IO[str], doc: dict[str, Any]) -> None:
    file.write(json.dumps(doc, ensure_ascii=False) + "\n")
    file.flush()
    os.fsync(file.fileno())


class RunsFile:
    """The append-only record of one sweep (see the module doc), opened as every file
    sparktop writes is (:mod:`sparktop.outfile`): never through a symbolic link, and a FIFO
    or a socket refused at once rather than blocking the sweep."""

    def __init__(self, path: Path, file: IO[str]) -> None:
        self.path = path
        self._file = file

    @classmethod
    def create(cls, path: Path, plan: Plan, provenance: Provenance) -> RunsFile:
        raw = create_file(path, OPTION, exists_hint="pass --resume to continue that sweep")
        file = io.TextIOWrapper(raw, encoding="utf-8")
        header = {
            "format": RUNS_FORMAT,
            "version": RUNS_VERSION,
            "plan": plan.as_json(),
            "provenance": provenance.as_json(),
        }
        try:
            _append(file, header)
        except OSError as exc:
            file.close()
            raise UserError(f"{OPTION}: cannot write {path}: {exc.strerror or exc}") from None
        return cls(path, file)

    @classmethod
    def reopen(cls, path: Path) -> RunsFile:
        return cls(path, append_file(path, OPTION))

    def add(self, cell: CellRuns) -> None:
        _append(self._file, {"cell": cell_json(cell)})

    def close(self) -> None:
        self._file.close()


def cell_json(cell: CellRuns) -> dict[str, Any]:
    return {
        "context": cell.context,
        "context_tokens": cell.context_tokens,
        "concurrency": cell.concurrency,
        "walls_s": list(cell.walls_s),
        "runs": [[r.as_json() for r in run] for run in cell.runs],
    }


def read_runs(path: Path) -> tuple[Plan, Provenance, list[CellRuns]]:
    """Plan, provenance and finished cells of a runs file. UserError naming the file and
    line when it is not one."""
    try:
        # Bounded, and a FIFO nobody writes to fails after a moment instead of hanging.
        raw = read_limited(path, MAX_RUNS_BYTES + 1)
        if len(raw) > MAX_RUNS_BYTES:
            raise UserError(f"{path}: too large for a runs file (over {MAX_RUNS_BYTES:,} bytes)")
        lines = raw.decode("utf-8").splitlines()
    except FileNotFoundError:
        raise UserError(f"nothing to resume: {path} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        header = json.loads(lines[0]) if lines else {}
        if header.get("format") != RUNS_FORMAT or header.get("version") != RUNS_VERSION:
            raise ValueError("not a sparktop sweep runs file")
        plan, prov = Plan.from_json(header["plan"]), Provenance.from_json(header["provenance"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"{path}:1: not a sparktop sweep runs file ({exc})") from None
    cells: list[CellRuns] = []
    for number, line in enumerate(lines[1:], 2):
        try:
            doc = json.loads(line)["cell"]
            cells.append(
                CellRuns(
                    context=str(doc["context"]),
                    context_tokens=int(doc["context_tokens"]),
                    concurrency=int(doc["concurrency"]),
                    walls_s=tuple(float(w) for w in doc["walls_s"]),
                    runs=tuple(
                        tuple(RequestResult.from_json(r) for r in run) for run in doc["runs"]
                    ),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines):
                break  # the last line was cut off by a kill: that cell is measured again
            raise UserError(f"{path}:{number}: broken cell record ({exc})") from None
    return plan, prov, cells


def _num(value: float, places: int) -> float | int:
    rounded = round(value, places)
    return int(rounded) if places == 0 else rounded


def profile_yaml(name: str, plan: Plan, prov: Provenance, cells: list[CellRuns]) -> str | None:
    """Profile YAML (format 1) from the finished cells, validated by loading it back; None
    when no cell has figures yet."""
    rows: list[list[Any]] = []
    notes = [
        f"Measured by sparktop {prov.sparktop_version} 'sparktop sweep' on {prov.date}, "
        f"{prov.engine} server version {prov.server_version}.".strip(),
        f"Command: {prov.command}",
        f"Prompts: {prov.prompt_method}; a unique nonce starts every prompt (no prefix-cache "
        "hits); a warm-up request ran before the first cell.",
        f"Each cell: {plan.runs} run(s) of 'concurrency' requests sent together, "
        f"{plan.output_tokens} output tokens each; figures are medians over runs.",
        *prov.notes,
    ]
    if prov.cache_config:
        info = ", ".join(f"{k}={v}" for k, v in sorted(prov.cache_config.items()))
        notes.append(f"cache_config_info: {info}")
    for cell in sorted(cells, key=lambda c: (c.concurrency, c.context_tokens)):
        if cell.failed:
            why = "; ".join(cell.errors()[:3])
            notes.append(
                f"{cell.context} x {cell.concurrency}: {cell.failed} of {cell.requests} "
                f"requests failed ({why}); not averaged in"
            )
        figures = cell_figures(cell)
        if figures is None:
            notes.append(
                f"{cell.context} x {cell.concurrency}: no figures ({no_figures_reason(cell)})"
            )
            continue
        rows.append(
            [
                cell.context,
                cell.context_tokens,
                cell.concurrency,
                round(figures["prompt_tokens"]),
                _num(figures["ttft_s"], 4),
                _num(figures["prefill_tps"], 1),
                _num(figures["decode_tps"], 2),
                _num(figures["aggregate_prefill_tps"], 1),
                _num(figures["aggregate_tps"], 2),
                _num(figures.get("aggregate_e2e_tps", figures["aggregate_tps"]), 2),
                _num(figures["wall_s"], 3),
                cell.requests - cell.failed,
            ]
        )
    if not rows:
        return None
    total = len(plan.cells())
    if len(cells) < total:
        notes.append(
            f"Partial: {len(cells)} of {total} cells measured; "
            "'sparktop sweep ... --resume' continues."
        )
    doc: dict[str, Any] = {
        "sparktop_profile": 1,
        "name": name,
        "source": f"sparktop sweep of {plan.endpoint} on {prov.date}",
        "model": plan.model,
        "engine": f"{prov.engine} server version {prov.server_version}".strip(),
        "limits": {
            "kv_pool_tokens": prov.kv_pool_tokens,
            "max_model_len": prov.max_model_len,
            "max_num_seqs": prov.max_num_seqs,
            "max_num_batched_tokens": prov.max_num_batched_tokens,
        },
        "output_tokens": plan.output_tokens,
        "aggregate_kind": "decode-only",
        "notes": notes,
        "columns": [{"name": n, "meaning": m} for n, m in COLUMNS],
        "rows": rows,
    }
    text = "# sparktop sweep profile, format 1 (see sparktop/sweep/README.md).\n" + yaml.safe_dump(
        doc, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
    )
    parse_profile(text, f"<sweep {name}>", "sweep")  # what we write must load
    return text


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (a temporary file in the same folder, then rename, so
    a reader or a kill never sees half a profile). A symlink at ``path`` is refused."""
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link; not writing through it")
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
