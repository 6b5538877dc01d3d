"""A streamed poll read from the stream's pieces (parse_streamed) gives exactly the sample the
probe parser gives for the poll's whole text: on the simulator's node under each fault, on
real captures, and on rows and slow-tier texts that could read otherwise as one text.

Cases used: gb10-query-with-header.csv, gb10-thermal-slowdown.csv,
gb10-hidden-low-power.csv; fixtures: the all-fields captures of an H100 and an RTX 2080 Super.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktop.model import NodeState
from sparktop.sim.gb10 import Gb10Responder
from sparktop.sim.gpu import Fault, GpuModel
from sparktop.sources.nvsmi import parse_probe_output, split_probe
from sparktop.sources.nvsmi.stream_rows import StreamInterval
from sparktop.sources.nvsmi.streamed import FAILURE_WORDS, parse_streamed
from sparktop.sources.probe import FIELD_SETS, MARK, probe_command, slow_command
from tests.nvsmi_helpers import ALL_FIELDS_CSV, NVSMI, NVSMI_CASES, probe, read


def _sim(fault: Fault, loaded: bool = True) -> tuple[str, list[str], str]:
    """A simulated GB10's GPU header and row (one-shot probe) and its slow-tier text."""
    g = GpuModel("spark-1", 0, "GPU-1", 2509.0, 55.0, random.Random(1), vllm_pid=4242)
    g.fault, g.loaded = fault, loaded
    for _ in range(50):
        g.step(0.1)
    node = Gb10Responder(g)
    text, _ = node.run(probe_command(FIELD_SETS[0], host_files=True))
    header, *rows = split_probe(text)["gpu"][0].split("\n")
    slow, _ = node.run(slow_command())
    return header, rows, slow


def _csv(path_text: str) -> tuple[str, list[str]]:
    header, *rows = [line for line in path_text.splitlines() if line.strip()]
    return header, rows


APPS = "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
GB10_HEADER, GB10_ROWS = _csv(read(NVSMI_CASES / "gb10-query-with-header.csv"))
UUID = GB10_ROWS[0].split(",")[1].strip()
SLOW_PLAIN = probe("x").split(f"{MARK}rc 0\n", 1)[1]
SLOW_APPS = probe("x", apps=f"{APPS}{UUID}, 4242, python3, 512 MiB").split(f"{MARK}rc 0\n", 1)[1]
SLOW_ELIDED = probe("x", apps=f"{APPS}GPU-..., 7, vllm, 100 MiB").split(f"{MARK}rc 0\n", 1)[1]

SLOWS = {
    "none yet": "",
    "meminfo, no processes": SLOW_PLAIN,
    "a process": SLOW_APPS,
    "an elided UUID": SLOW_ELIDED,
    "cut before the apps' status": SLOW_APPS[: SLOW_APPS.rindex(MARK)],
    "cut inside meminfo": SLOW_PLAIN[:40],
    "not starting at its marker": "junk\n" + SLOW_PLAIN,
    "a gpu section of its own": SLOW_PLAIN + f"{MARK}gpu\n{GB10_HEADER}\n{MARK}rc 0\n",
    "apps failed": probe("x", apps="boom", apps_rc=6).split(f"{MARK}rc 0\n", 1)[1],
}


def _tables() -> dict[str, tuple[str, list[str]]]:
    tables = {
        "gb10": (GB10_HEADER, GB10_ROWS),
        "gb10 thermal": _csv(read(NVSMI_CASES / "gb10-thermal-slowdown.csv")),
        "gb10 low power": _csv(read(NVSMI_CASES / "gb10-hidden-low-power.csv")),
        **{name: _csv(read(NVSMI / name)) for name in ALL_FIELDS_CSV},
    }
    row = GB10_ROWS[0]
    rest = row.split(",", 1)[1]
    odd = {
        "four GPUs": [f"{i},{rest}" for i in range(4)],
        "65 GPUs": [f"{i},{rest}" for i in range(65)],
        "a marker starting a row": [f"{MARK}host,{rest}"],
        "a marker inside a row": [row.replace("NVIDIA", MARK)],
        "a quoted name": [row.replace("NVIDIA GB10", '"NVIDIA, GB10"')],
        "a CR in the name": [row.replace("NVIDIA GB10", "NVIDIA\rGB10")],
        "an escape in the name": [row.replace("NVIDIA GB10", "NVIDIA\x1b[31mGB10")],
        "a non-ASCII name": [row.replace("NVIDIA GB10", "NVIDIA GB10 ✓")],
        "a NUL": [row.replace("NVIDIA", "NVI\0DIA")],
        "[N/A] everywhere": [", ".join(["0", *["[N/A]"] * GB10_HEADER.count(",")])],
        "implausible": [row.replace(", 3003,", ", 99999,")],
        "a cell short": [row.rsplit(",", 1)[0]],
        "a cell more": [row + ", 7"],
        "a warning row": [row, "WARNING: infoROM is corrupted"],
        "NVML failing": ["Failed to initialize NVML: Unknown Error"],
        "a refused field": ['Field "foo" is not a valid field to query.'],
        "a lost GPU": [row, "Unable to determine the device handle: GPU is lost"],
        "driver mismatch": ["Failed to initialize NVML: Driver/library version mismatch"],
        "empty rows": ["", ""],
        "a trailing comma": [row + ","],
    }
    tables.update({name: (GB10_HEADER, rows) for name, rows in odd.items()})
    h100 = tables[ALL_FIELDS_CSV[0]][0]
    tables["[N/A] everywhere, all fields"] = (
        h100,
        [", ".join(["0", *["[N/A]"] * h100.count(",")])],
    )
    tables["a marker in the header"] = (MARK + GB10_HEADER, GB10_ROWS)
    tables["a header of junk"] = ("no header here", GB10_ROWS)
    return tables


TABLES = _tables()


def _same(header: str, rows: list[str], slow: str) -> None:
    interval = StreamInterval(1234.5, header, tuple(rows))
    expected = parse_probe_output("spark-1", interval.gpu_section() + slow, 1234.5)
    assert parse_streamed("spark-1", interval, slow, 1234.5) == expected


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("slow", sorted(SLOWS))
def test_a_streamed_poll_reads_as_its_whole_text(table: str, slow: str) -> None:
    header, rows = TABLES[table]
    _same(header, rows, SLOWS[slow])


@pytest.mark.parametrize("fault", list(Fault))
@pytest.mark.parametrize("loaded", [True, False])
def test_the_simulated_node_reads_the_same_both_ways(fault: Fault, loaded: bool) -> None:
    header, rows, slow = _sim(fault, loaded)
    _same(header, rows, slow)
    interval = StreamInterval(1.0, header, tuple(rows))
    sample = parse_streamed("spark-1", interval, slow, 1.0)
    assert sample.state is NodeState.OK and sample.gpus and sample.fabric.ports
    # The slow tier's reading, split once, is found again by the same text (a later poll).
    later = StreamInterval(2.0, header, tuple(rows))
    assert parse_streamed("spark-1", later, slow, 2.0).memory == sample.memory


def test_plain_rows_are_read_without_the_text_and_odd_ones_with_it() -> None:
    """The rows nvidia-smi prints take the plain path (what makes a streamed poll cheap);
    the others are read as text (and, above, read the same)."""
    from sparktop.sources.nvsmi.streamed import _plain_gpus

    def plain(name: str) -> bool:
        header, rows = TABLES[name]
        body = "\n".join((header, *rows))
        return _plain_gpus(StreamInterval(1.0, header, tuple(rows)), body) is not None

    assert all(plain(name) for name in ("gb10", "gb10 thermal", "four GPUs", *ALL_FIELDS_CSV))
    assert plain("[N/A] everywhere, all fields") and plain("implausible")
    odd = ("a quoted name", "a CR in the name", "a NUL", "a cell short", "NVML failing", "65 GPUs")
    assert not any(plain(name) for name in odd)


CELLS = st.sampled_from(
    ["0", "1", " 3003 ", "10.77", "[N/A]", "", "P8", "0x01", "GPU-1", "-5", "1e3", "x y",
     '"a,b"', "a\rb", "\x1b[1m", "é", *FAILURE_WORDS, "Field \"x\" is not a valid field to query"]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(CELLS, min_size=1, max_size=18), min_size=0, max_size=4))
def test_any_rows_read_as_their_whole_text(cells: list[list[str]]) -> None:
    rows = [",".join(row) for row in cells]
    _same(GB10_HEADER, rows, SLOW_APPS)
    width = GB10_HEADER.count(",") + 1
    _same(GB10_HEADER, [",".join((row * width)[:width]) for row in cells], SLOW_PLAIN)
