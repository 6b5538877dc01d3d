"""Parse and validate the sweep-profile YAML format, with ``file:line`` in every error.

The format (``sparktop_profile: 1``) is documented in ``sparktop/sweep/README.md``. Metadata is
validated by strict pydantic models (unknown keys are errors, with a "did you mean"); rows are
sequences aligned with ``columns`` and checked cell by cell here so an error can name the row's
line and the column.
"""

from __future__ import annotations

import difflib
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from sparktop.errors import UserError
from sparktop.model import NA
from sparktop.sweep.profiles.profile import AcceptancePoint, Profile, ProfileRow
from sparktop.yamltree import Marks, YamlSyntaxError, compose, loc_to_path, looks_like

FORMAT_VERSION = 1

COLUMN_TYPES: dict[str, type] = {
    "context": str,
    "context_tokens": int,
    "prompt_tokens": int,
    "concurrency": int,
    "ttft_s": float,
    "prefill_tps": float,
    "decode_tps": float,
    "aggregate_tps": float,
    "aggregate_prefill_tps": float,
    "wall_s": float,
    "aggregate_e2e_tps": float,
    "observations": int,
    "ttft_p25_s": float,
    "ttft_p75_s": float,
    "decode_p25_tps": float,
    "decode_p75_tps": float,
}
"""Every column name a profile may use, with the type of its cells."""

REQUIRED_COLUMNS = (
    "prompt_tokens",
    "concurrency",
    "ttft_s",
    "prefill_tps",
    "decode_tps",
    "aggregate_tps",
)

_Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Limits(_Strict):
    kv_pool_tokens: PositiveInt | None = None
    max_model_len: PositiveInt | None = None
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None


class _Baseline(_Strict):
    sm_clock_mhz: list[PositiveFloat] = []
    temperature_c: list[float] = []


class _Column(_Strict):
    name: str
    meaning: str = Field(min_length=1)
    derived: bool = False


class _Acceptance(_Strict):
    prompt_tokens: PositiveInt
    concurrency: PositiveInt = 1
    ttft_s: PositiveFloat
    prefill_tps: PositiveFloat | None = None
    decode_tps: PositiveFloat | None = None
    aggregate_tps: PositiveFloat | None = None
    note: str = ""


class _Document(_Strict):
    sparktop_profile: Literal[1]
    name: _Name
    source: str = Field(min_length=1)
    aggregate_kind: Literal["end-to-end", "decode-only"]
    cluster: str = ""
    model: str = ""
    engine: str = ""
    nodes: PositiveInt | None = None
    limits: _Limits = _Limits()
    output_tokens: PositiveInt | None = None
    baseline: _Baseline = _Baseline()
    notes: list[str] = []
    columns: list[_Column] = Field(min_length=1)
    rows: list[list[Any]] = Field(min_length=1)
    acceptance: list[_Acceptance] = []


# -- YAML and lines ------------------------------------------------------------------------------


def _line(marks: Marks, loc: tuple[int | str, ...]) -> int:
    """The line of the deepest value along ``loc`` (a pydantic error location) in the file."""
    mark = marks.nearest(loc)[1]
    return 1 if mark is None else mark.line + 1


def _compose(text: str, where: str) -> tuple[Marks, dict[str, Any]]:
    """The document as plain data with marks, through the inventory's guarded loader.

    Aliases that expand too far, nesting too deep, custom tags and duplicate keys are refused
    with ``where:line:…`` (one line), as they are for an inventory.
    """
    try:
        data, marks, problems = compose(text, "a profile")
    except YamlSyntaxError as exc:
        problem = exc.problem
        raise UserError(f"{where}:{problem.line}:{problem.column}: {problem.message}") from None
    if problems:
        first = problems[0]
        path = f"{first.path}: " if first.path else ""
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UserError(f"{where}:{first.line}: {path}{first.message}{more}")
    if data is None:
        raise UserError(f"{where}:1: empty profile file")
    if not isinstance(data, dict):
        raise UserError(f"{where}:{_line(marks, ())}: a profile must be a YAML mapping of keys")
    return marks, data


MAX_LISTED = 12
"""Problems a profile error lists in full (a profile has few keys; past this, "and N more")."""


def _validation_message(exc: ValidationError, marks: Marks, where: str) -> str:
    """One line: the first problem's line, then every problem (a mapping's missing keys
    named together), up to :data:`MAX_LISTED`."""
    errors = exc.errors()
    first_line = _line(marks, tuple(errors[0]["loc"]))
    missing: dict[str, list[str]] = {}
    items: list[tuple[str, str]] = []  # ("missing", mapping path) or ("text", the problem)
    for error in errors:
        loc = tuple(error["loc"])
        if error["type"] == "missing":
            parent = loc_to_path(loc[:-1])
            if parent not in missing:
                missing[parent] = []
                items.append(("missing", parent))
            missing[parent].append(str(loc[-1]))
            continue
        msg = error["msg"]
        at = _line(marks, loc)
        if error["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc[:-1])
            guess = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            msg = f"unknown key '{loc[-1]}'" + (f" (did you mean '{guess[0]}'?)" if guess else "")
            key_mark = marks.key.get(loc)
            at = at if key_mark is None else key_mark.line + 1
        prefix = "" if at == first_line else f"line {at}: "
        items.append(("text", f"{prefix}{loc_to_path(loc)}: {msg}"))
    shown = []
    for kind, text in items:
        if kind == "missing":
            keys = missing[text]
            noun = "key" if len(keys) == 1 else "keys"
            named = ", ".join(f"'{k}'" for k in keys)
            shown.append(f"{text + ': ' if text else ''}missing required {noun} {named}")
        else:
            shown.append(text)
    more = f"; and {len(shown) - MAX_LISTED} more" if len(shown) > MAX_LISTED else ""
    return f"{where}:{first_line}: " + "; ".join(shown[:MAX_LISTED]) + more


_SUBMODELS: dict[str, type[BaseModel]] = {
    "limits": _Limits,
    "baseline": _Baseline,
    "columns": _Column,
    "acceptance": _Acceptance,
}


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = _Document
    names = [p for p in loc if isinstance(p, str)]
    for name in names:
        sub = _SUBMODELS.get(name)
        if sub is None:
            break
        model = sub
    return list(model.model_fields)


# -- rows ----------------------------------------------------------------------------------------


def _cell(value: Any, kind: type, column: str) -> Any:
    if kind is str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"column {column}: expected a label, got {value!r}")
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"column {column}: expected a number, got {value!r}")
    if kind is int:
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"column {column}: expected a whole number, got {value!r}")
            value = int(value)
        if value <= 0:
            raise ValueError(f"column {column}: must be > 0, got {value!r}")
        return value
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"column {column}: must be a positive finite number, got {value!r}")
    return float(value)


def _columns(doc: _Document, marks: Marks, where: str) -> tuple[str, ...]:
    names: list[str] = []
    for i, col in enumerate(doc.columns):
        line = _line(marks, ("columns", i))
        if col.name not in COLUMN_TYPES:
            guess = difflib.get_close_matches(col.name, list(COLUMN_TYPES), n=1)
            hint = f" (did you mean '{guess[0]}'?)" if guess else ""
            raise UserError(f"{where}:{line}: columns[{i}]: unknown column '{col.name}'{hint}")
        if col.name in names:
            raise UserError(f"{where}:{line}: columns[{i}]: column '{col.name}' listed twice")
        names.append(col.name)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        line = _line(marks, ("columns",))
        raise UserError(f"{where}:{line}: columns: missing required column(s) {', '.join(missing)}")
    return tuple(names)


def _rows(doc: _Document, names: tuple[str, ...], marks: Marks, where: str) -> list[ProfileRow]:
    rows: list[ProfileRow] = []
    seen: dict[tuple[int, int], int] = {}
    for i, raw in enumerate(doc.rows):
        line = _line(marks, ("rows", i))
        if len(raw) != len(names):
            raise UserError(
                f"{where}:{line}: rows[{i}]: {len(raw)} values for {len(names)} columns "
                f"({', '.join(names)})"
            )
        try:
            cells = {n: _cell(v, COLUMN_TYPES[n], n) for n, v in zip(names, raw, strict=True)}
        except ValueError as exc:
            raise UserError(f"{where}:{line}: rows[{i}]: {exc}") from None
        key = (cells["prompt_tokens"], cells["concurrency"])
        if key in seen:
            raise UserError(
                f"{where}:{line}: rows[{i}]: a second row for prompt_tokens {key[0]} at "
                f"concurrency {key[1]} (first on line {seen[key]})"
            )
        seen[key] = line
        rows.append(ProfileRow(line=line, **cells))
    return rows


def _na(value: int | float | None, reason: str) -> Any:
    return NA(reason) if value is None else value


def parse_profile(text: str, where: str, origin: str) -> Profile:
    """Validate profile YAML ``text`` read from ``where`` (used in messages) into a Profile.

    Raises :class:`UserError` ``where:line: path: problem`` on the first problem found.
    """
    marks, data = _compose(text, where)
    if isinstance(data, dict) and data and not looks_like(data, tuple(_Document.model_fields)):
        # Any other file (a path typed wrong, a hostile inventory pointing at a secret): its
        # keys are its contents, never quoted back.
        raise UserError(
            f"{where}:1: not a sparktop profile (its {len(data)} top-level keys are not a "
            "profile's; profiles are written by 'sparktop sweep' and 'sparktop profiles --import')"
        )
    try:
        doc = _Document.model_validate(data)
    except ValidationError as exc:
        raise UserError(_validation_message(exc, marks, where)) from None
    names = _columns(doc, marks, where)
    rows = _rows(doc, names, marks, where)
    acceptance = tuple(
        AcceptancePoint(
            prompt_tokens=a.prompt_tokens,
            concurrency=a.concurrency,
            ttft_s=a.ttft_s,
            prefill_tps=_na(a.prefill_tps, "not published with the acceptance point"),
            decode_tps=_na(a.decode_tps, "not published with the acceptance point"),
            aggregate_tps=_na(a.aggregate_tps, "not published with the acceptance point"),
            note=a.note,
            line=_line(marks, ("acceptance", i)),
        )
        for i, a in enumerate(doc.acceptance)
    )
    missing = "not stated in the profile"
    return Profile(
        name=doc.name,
        source=doc.source,
        aggregate_kind=doc.aggregate_kind,
        rows=tuple(sorted(rows, key=lambda r: (r.concurrency, r.prompt_tokens))),
        columns=tuple((c.name, c.meaning) for c in doc.columns),
        derived_columns=tuple(c.name for c in doc.columns if c.derived),
        acceptance=acceptance,
        cluster=doc.cluster,
        model=doc.model,
        engine=doc.engine,
        nodes=_na(doc.nodes, missing),
        kv_pool_tokens=_na(doc.limits.kv_pool_tokens, missing),
        max_model_len=_na(doc.limits.max_model_len, missing),
        max_num_seqs=_na(doc.limits.max_num_seqs, missing),
        max_num_batched_tokens=_na(doc.limits.max_num_batched_tokens, missing),
        output_tokens=_na(doc.output_tokens, missing),
        baseline_sm_clock_mhz=tuple(doc.baseline.sm_clock_mhz),
        baseline_temperature_c=tuple(doc.baseline.temperature_c),
        notes=tuple(doc.notes),
        origin=origin,
    )
