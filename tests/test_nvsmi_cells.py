"""One nvidia-smi cell or header at a time: numbers with units, masks, ``[N/A]`` kept as text.

Checked against every CSV file in fixtures/nvidia-smi and cases/nvidia-smi, the field
reference (``--help-query-gpu``) and random text.
"""

from __future__ import annotations

import csv
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktop.model import NA, is_num
from sparktop.sources.nvsmi import normalise_header, parse_cell, parse_mask
from sparktop.sources.nvsmi.cells import REASON_MAX
from sparktop.sources.probe import FIELD_SETS
from tests.nvsmi_helpers import ALL_FIELDS_CSV, NVSMI, NVSMI_CASES, number_in, read

# -- parse_cell / parse_mask -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("41.37 W", 41.37),
        ("2509 MHz", 2509.0),
        ("97 %", 97.0),
        ("0 us", 0.0),
        ("15814595384 us", 15814595384.0),
        (" 81559 MiB ", 81559.0),
        ("55", 55.0),
        ("0x0000000000000020", 32.0),
        ("-3", -3.0),
    ],
)
def test_parse_cell_numbers(text: str, expected: float) -> None:
    assert parse_cell(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "[N/A]",
        "[Not Supported]",
        "[Requested functionality has been deprecated]",
        "N/A",
        "Not Supported",
        "ERR!",
        "[Unknown Error]",
        "nan",
        "Active",
    ],
)
def test_parse_cell_missing_keeps_reason(text: str) -> None:
    value = parse_cell(text)
    assert isinstance(value, NA)
    assert value.reason == text
    assert not is_num(value)


def test_parse_cell_empty() -> None:
    assert parse_cell("  ") == NA("empty")


def test_parse_mask() -> None:
    assert parse_mask("0x0000000000000020") == 0x20
    assert parse_mask("0x00000000000001FF") == 0x1FF
    assert parse_mask("1") == 1
    assert parse_mask("[N/A]") == NA("[N/A]")


def test_normalise_header_folds_units_and_aliases() -> None:
    assert normalise_header(" clocks.current.sm [MHz]") == "clocks.sm"
    assert normalise_header("clocks.sm") == "clocks.sm"
    assert normalise_header("clocks_throttle_reasons.active") == "clocks_event_reasons.active"
    assert normalise_header("used_gpu_memory [MiB]") == "used_memory"
    assert normalise_header("gpu_uuid") == "uuid"


@pytest.mark.parametrize(
    "help_file", ["nvidia-smi-590-help-query-gpu.txt", "nvidia-smi-610-help-query-gpu.txt"]
)
def test_aliases_agree_with_help_query_gpu(help_file: str) -> None:
    """Every ``"a" or "b"`` pair that nvidia-smi documents for a field we read folds to one name."""
    pairs = re.findall(r'^"([^"]+)" or "([^"]+)"$', read(NVSMI / help_file), re.M)
    fields = {f for fs in FIELD_SETS for f in fs}
    checked = 0
    for a, b in pairs:
        if {a, b} & fields:
            assert normalise_header(a) == normalise_header(b), (a, b)
            checked += 1
    assert checked >= 4  # name, uuid, clocks.sm, clocks_event_reasons.active, clocks.max.sm
    documented = {
        name
        for line in read(NVSMI / help_file).splitlines()
        if line.startswith('"')
        for name in re.findall(r'"([^"]+)"', line)
    }
    assert {f for f in fields if f != "clocks_throttle_reasons.active"} <= documented


CSV_FILES = sorted(p.name for p in NVSMI.glob("*.csv")) + sorted(
    p.name for p in NVSMI_CASES.glob("*.csv")
)


def test_csv_file_lists_are_complete() -> None:
    assert set(CSV_FILES) == {
        *ALL_FIELDS_CSV,
        "gb10-580.173.02-query-gpu-memory-util-power-temp.csv",
        "gb10-580.95.05-query-gpu-index-name-memory-noheader-nounits.csv",
        "gb10-query-compute-apps-noheader-nounits.csv",
        "gb10-query-gpu-index-name-memory.csv",
        "gb10-query-gpu-memused-memtotal-memutil.csv",
        "gb10-query-with-header.csv",
        "gb10-thermal-slowdown.csv",
        "gb10-hidden-low-power.csv",
    }
    assert {p.name for p in NVSMI_CASES.iterdir()} == {
        "gb10-query-with-header.csv",
        "gb10-thermal-slowdown.csv",
        "gb10-hidden-low-power.csv",
        "driver-mismatch.txt",
        "no-devices.txt",
    }


@pytest.mark.parametrize("name", CSV_FILES)
def test_every_cell_of_every_csv_file(name: str) -> None:
    """Bracketed and N/A cells keep their text; numbers (with a unit) and masks are read."""
    path = NVSMI / name if (NVSMI / name).exists() else NVSMI_CASES / name
    cells = [c for row in csv.reader(read(path).splitlines(), skipinitialspace=True) for c in row]
    checked = 0
    for cell in cells:
        value = parse_cell(cell)
        if cell.startswith("[") or cell in ("N/A", "Not Supported", ""):
            assert value == NA(cell or "empty"), cell
        elif re.fullmatch(r"-?\d+(\.\d+)? ?(W|MHz|%|MiB|us|C)?", cell):
            assert value == number_in(cell), cell
        elif cell.startswith("0x"):
            assert value == int(cell, 16), cell
        else:  # names, UUIDs, pstates, "Active", header names: kept (cut) as the reason
            kept = cell if len(cell) <= REASON_MAX else cell[: REASON_MAX - 1] + "…"
            assert value == NA(kept), cell
            continue
        checked += 1
    assert checked > 0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_parse_cell_never_raises_and_never_invents_zero(text: str) -> None:
    value = parse_cell(text)
    if isinstance(value, NA):
        assert value.reason
    else:
        assert is_num(value)
    mask = parse_mask(text)
    assert isinstance(mask, NA) or 0 <= mask < 2**64


@pytest.mark.parametrize(
    "text", ["1e400", "0x" + "F" * 300, "0xZZ", "²", "١٢", "9" * 400, "5 apples", "12abc"]
)
def test_parse_cell_and_mask_reject_out_of_range(text: str) -> None:
    for value in (parse_cell(text), parse_mask(text)):
        assert isinstance(value, NA)
        assert len(value.reason) <= REASON_MAX  # a 400-digit cell is not kept whole


def _parse_cell_by_pattern(text: str) -> float | NA:
    """parse_cell as its pattern alone reads a cell (no plain-number shortcut)."""
    from sparktop.sources.nvsmi.cells import _HEX_RE, _NUMBER_RE, missing

    value = text.strip()
    if not value:
        return NA("empty")
    if value[:2] in ("0x", "0X"):
        return float(int(value, 16)) if _HEX_RE.fullmatch(value) else missing(value)
    match = _NUMBER_RE.fullmatch(value)
    number = float(match.group(1)) if match else float("nan")
    return number if number == number and abs(number) != float("inf") else missing(value)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=30), st.from_regex(r"\s*[0-9.٠-٩²]{0,12}\s*", fullmatch=True)))
def test_parse_cell_plain_number_shortcut_reads_as_the_pattern(text: str) -> None:
    assert parse_cell(text) == _parse_cell_by_pattern(text)


@pytest.mark.parametrize("text", ["5.", ".5", "1.2.3", "007", "9" * 400, "1.0", "٣", " 42 "])
def test_parse_cell_shortcut_edges(text: str) -> None:
    assert parse_cell(text) == _parse_cell_by_pattern(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab ,"\t\x00x1;\u240d')), max_size=30))
def test_csv_lines_split_as_the_csv_module_splits_them(line: str) -> None:
    from sparktop.sources.nvsmi import tables

    def by_csv(raw: str) -> tuple[tuple[str, ...], ...]:
        rows = []
        for part in raw.split("\n"):
            if not part.strip():
                continue
            try:
                row = [c.strip() for c in next(csv.reader([part], skipinitialspace=True))]
            except csv.Error as exc:
                return (("error", str(exc)),)
            if len(row) > 1 and row[-1] == "" and part.rstrip().endswith(","):
                row.pop()
            rows.append(tuple(row))
        return tuple(rows)

    try:
        got = tables._csv_rows.__wrapped__(line)
    except csv.Error as exc:
        got = (("error", str(exc)),)
    assert got == by_csv(line)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["clocks.sm", "temperature.gpu", "power.draw", "memory.used", "x.counter"]),
    st.one_of(
        st.sampled_from(["0", "3003", "10.77", "[N/A]", "", " 55 ", "-1", "99999", "1e400"]),
        st.text(alphabet="0123456789.-e [NA/]x", max_size=60),
    ),
)
def test_a_kept_gpu_cell_reads_as_it_reads_anew(column: str, text: str) -> None:
    from sparktop.sources.nvsmi.cells import plausible
    from sparktop.sources.nvsmi.tables import _number

    for _ in range(2):  # the second read is the kept one (for a short cell)
        assert _number(column, text) == plausible(column, parse_cell(text))
