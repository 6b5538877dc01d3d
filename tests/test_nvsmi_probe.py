"""The batched probe's output as a node sample: failures as states, never an exception.

Covers nvidia-smi's non-CSV output (default tables, ``-q``), error texts, output cut short,
CRLF, trailing commas, multi-GPU and MIG-style process lists, and garbage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktop.model import NA, GpuSample, NodeSample, NodeState
from sparktop.sources.nvsmi import (
    classify_failure,
    parse_gpu_csv,
    parse_probe_output,
    split_probe,
    unsupported_field,
)
from sparktop.sources.probe import FIELD_SETS, MARK, probe_command
from tests.nvsmi_helpers import NVSMI, NVSMI_CASES, only_gpu, probe, read

# -- fixtures: non-CSV -------------------------------------------------------------------------

TEXT_FIXTURES = sorted(p.name for p in NVSMI.glob("*.txt"))


def test_text_fixture_list_is_complete() -> None:
    assert set(TEXT_FIXTURES) == {
        "gb10-580.126.09-nvidia-smi.txt",
        "gb10-580.173.02-nvml-meminfo-probe.txt",
        "gb10-580.95.05-nvidia-smi.txt",
        "gh200-550-nvidia-smi-q.txt",
        "gh200-550-nvidia-smi.txt",
        "h100-590-nvidia-smi-idle.txt",
        "h100-590-nvidia-smi-load.txt",
        "h100-590-nvidia-smi-q-idle.txt",
        "h100-590-nvidia-smi-q-load.txt",
        "h100-mig-590-nvidia-smi-load.txt",
        "nvidia-smi-590-help-query-gpu.txt",
        "nvidia-smi-610-help-query-gpu.txt",
        "rtx2080super-610-nvidia-smi-idle.txt",
        "rtx2080super-610-nvidia-smi-q-idle.txt",
        "rtx4080super-595-nvidia-smi-load.txt",
    }


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_default_tables_and_q_output_are_garbled_not_crashes(name: str) -> None:
    text = read(NVSMI / name)
    state, message = classify_failure(text, 0) or (NodeState.OK, "")
    assert state is NodeState.GARBLED
    assert message.startswith("not nvidia-smi CSV: ") and "\n" not in message
    assert len(message) <= 140
    sample = parse_probe_output("n", probe(text), 0.0)
    assert sample.state is NodeState.GARBLED and sample.gpus == ()
    raw = parse_probe_output("n", text, 0.0)  # not even probe output
    assert raw.state is NodeState.GARBLED and raw.message


def test_default_table_message_names_the_table() -> None:
    _, message = classify_failure(read(NVSMI / "gb10-580.126.09-nvidia-smi.txt"), 0) or ("", "")
    assert "NVIDIA-SMI 580.126.09" in message


# -- other failures ----------------------------------------------------------------------------


def test_unsupported_field_wording() -> None:
    # Wording and exit status 2 as reported in public issues against nvidia-smi users.
    text = 'Field "clocks_event_reasons_counters.sw_power_cap" is not a valid field to query.\n\n'
    assert unsupported_field(text) == "clocks_event_reasons_counters.sw_power_cap"
    assert unsupported_field("Field “encoder.stats.sessionCount” is not a valid field to query.")
    assert unsupported_field("index, name\n0, NVIDIA GB10\n") is None
    state, message = classify_failure(text, 2) or (NodeState.OK, "")
    assert state is NodeState.ERROR and "clocks_event_reasons_counters.sw_power_cap" in message


@pytest.mark.parametrize(
    ("text", "status", "state"),
    [
        ("bash: nvidia-smi: command not found", 127, NodeState.NO_DRIVER),
        ("timeout: failed to run command 'nvidia-smi': No such file or directory", 127,
         NodeState.NO_DRIVER),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make "
         "sure that the latest NVIDIA driver is installed and running.", 9, NodeState.NO_DRIVER),
        ("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure "
         "that the NVIDIA Display Driver is properly installed and present in your system.", 12,
         NodeState.NO_DRIVER),
        ("", 124, NodeState.NOT_ANSWERING),
        ("Unable to determine the device handle for GPU0000:01:00.0: GPU is lost.", 15,
         NodeState.ERROR),
        ("Insufficient Permissions", 4, NodeState.GPU_UNAVAILABLE),
        ("Failed to initialize NVML: Unknown Error", 9, NodeState.GPU_UNAVAILABLE),
        ("", 0, NodeState.GARBLED),
        ("\x1b[31mjunk\x00", 0, NodeState.GARBLED),
    ],
)  # fmt: skip
def test_classify_failure(text: str, status: int, state: NodeState) -> None:
    result = classify_failure(text, status)
    assert result is not None and result[0] is state
    assert "\x1b" not in result[1] and "\x00" not in result[1]


def test_csv_is_not_a_failure() -> None:
    assert classify_failure(read(NVSMI_CASES / "gb10-query-with-header.csv"), 0) is None


def test_warning_line_before_header_is_skipped() -> None:
    text = "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n" + read(
        NVSMI_CASES / "gb10-thermal-slowdown.csv"
    )
    assert classify_failure(text, 0) is None
    assert only_gpu(text).clock_event_mask == 0x20


def test_header_only_means_no_gpu() -> None:
    header = read(NVSMI_CASES / "gb10-query-with-header.csv").splitlines()[0]
    sample = parse_probe_output("n", probe(header, apps="gpu_uuid, pid, used_memory\n"), 0.0)
    assert sample.state is NodeState.NO_GPU
    assert isinstance(sample.memory.gpu_held_mib, NA)  # no GPU: unknown, not 0


def test_old_driver_throttle_reasons_header() -> None:
    text = "index, uuid, clocks_throttle_reasons.active\n0, GPU-x, 0x0000000000000004\n"
    gpu = only_gpu(text)
    assert gpu.clock_event_mask == 4 and gpu.slowdowns == ("sw_power_cap",)


def test_probe_round_trip_every_field_set() -> None:
    """Real command strings: the parser understands each field set's header names."""
    row = {
        "index": "0", "uuid": "GPU-1", "name": "NVIDIA GB10", "clocks.sm": "2522",
        "clocks.max.sm": "3003", "temperature.gpu": "54", "power.draw": "40.10",
        "utilization.gpu": "96", "memory.used": "[N/A]", "memory.total": "[N/A]",
        "pstate": "P0", "clocks_event_reasons.active": "0x0000000000000000",
        "clocks_throttle_reasons.active": "0x0000000000000000",
    }  # fmt: skip
    for fields in FIELD_SETS:
        assert "nvidia-smi --query-gpu=" + ",".join(fields) in probe_command(fields)
        values = [row.get(f, "0") for f in fields]
        text = ", ".join(fields) + "\n" + ", ".join(values) + "\n"
        sample = parse_probe_output("n", probe(text), 0.0)
        assert sample.state is NodeState.OK, fields
        assert sample.gpus[0].sm_clock_mhz == 2522 and sample.memory.unified


def test_split_probe_sections() -> None:
    sections = split_probe(probe("a, b\n1, 2", gpu_rc=3, apps="x", apps_rc=0))
    assert sections["gpu"] == ("a, b\n1, 2", 3)
    assert sections["apps"] == ("x", 0)
    assert sections["meminfo"][1] is None


def test_apps_failure_leaves_process_memory_unknown() -> None:
    text = read(NVSMI_CASES / "gb10-query-with-header.csv")
    sample = parse_probe_output("n", probe(text, apps="boom", apps_rc=1), 0.0)
    assert sample.state is NodeState.OK
    assert isinstance(sample.memory.gpu_held_mib, NA)
    assert isinstance(sample.gpus[0].process_memory_mib, NA)


# -- shapes of real output: several GPUs, CRLF, trailing commas, [N/A], cuts -------------------


def two_gpus() -> tuple[str, str, str]:
    """Header plus the thermal-slowdown and hidden-low-power case rows as GPUs 0 and 1."""
    header, hot = read(NVSMI_CASES / "gb10-thermal-slowdown.csv").splitlines()
    _, low = read(NVSMI_CASES / "gb10-hidden-low-power.csv").splitlines()
    return header, hot, "1" + low[1:]


def apps_for(*rows: tuple[str, str]) -> str:
    return "gpu_uuid, pid, used_gpu_memory [MiB]\n" + "".join(
        f"{uuid}, {pid}, {mib}\n" for pid, (uuid, mib) in enumerate(rows, start=100)
    )


def test_several_gpus_keep_their_rows_and_process_memory() -> None:
    header, hot, low = two_gpus()
    first, second = parse_gpu_csv(f"{header}\n{hot}\n{low}\n")
    apps = apps_for((first.uuid, "100"), (second.uuid, "40"), (first.uuid, "[N/A]"))
    sample = parse_probe_output("n", probe(f"{header}\n{hot}\n{low}", apps=apps), 0.0)
    assert sample.state is NodeState.OK
    assert [g.uuid for g in sample.gpus] == [first.uuid, second.uuid]
    assert [g.slowdowns for g in sample.gpus] == [("sw_thermal_slowdown",), ()]
    # A process with [N/A] memory (as under MIG on some drivers) makes that GPU's total
    # unknown instead of quietly smaller; the other GPU keeps its number.
    assert sample.gpus[0].process_memory_mib == NA("[N/A]")
    assert sample.gpus[1].process_memory_mib == 40
    assert sample.memory.gpu_held_mib == NA("[N/A]")


@pytest.mark.parametrize(
    "shape",
    [
        lambda t: t.replace("\n", "\r\n"),
        lambda t: "\n\n" + t.replace("\n", "\n\n"),
        lambda t: t.replace("\n", ",\n"),
        lambda t: t.replace("\n", ", \n"),
        lambda t: "\n".join(t.splitlines()[:1] + [r + "," for r in t.splitlines()[1:]]),
        lambda t: t.replace(", ", ","),
        lambda t: "\ufeff" + t,
    ],
    ids=["crlf", "blank-lines", "trailing-comma", "trailing-comma-space", "comma-on-rows-only",
         "no-spaces", "bom"],
)  # fmt: skip
def test_line_shapes_do_not_change_the_gpus(shape: Callable[[str], str]) -> None:
    text = "\n".join(two_gpus()) + "\n"
    expected = parse_gpu_csv(text)
    sample = parse_probe_output("n", probe(shape(text)), 0.0)
    assert sample.state is NodeState.OK and sample.gpus[0].uuid == expected[0].uuid
    assert [replace(g, process_memory_mib=NA()) for g in sample.gpus] == [
        replace(g, process_memory_mib=NA()) for g in expected
    ]


def test_n_a_in_every_column_is_n_a_never_zero() -> None:
    header = two_gpus()[0]
    row = ", ".join(["[N/A]"] * len(header.split(",")))
    gpu = only_gpu(f"{header}\n{row}\n")
    assert gpu.index == 0 and gpu.uuid == "" and gpu.name == ""  # key falls back to gpu0
    read_from_csv = {f.name for f in dataclass_fields(gpu)} - {
        "index",
        "uuid",
        "name",
        "counters",
        "process_memory_mib",
    }
    assert len(read_from_csv) == 9
    assert all(getattr(gpu, name) == NA("[N/A]") for name in read_from_csv)


def test_a_row_with_the_wrong_number_of_cells_is_not_dropped_silently() -> None:
    header, hot, low = two_gpus()
    sample = parse_probe_output("n", probe(f"{header}\n{hot}\n{low}, extra"), 0.0)
    assert sample.state is NodeState.GARBLED and sample.gpus == ()
    assert sample.message.startswith("GPU row 2 has 13 cells but the header has 12: 1, GPU-")


def test_output_cut_anywhere_never_shows_fewer_gpus_or_wrong_memory() -> None:
    """The SSH channel can close at any byte: either everything is read, or it says so."""
    header, hot, low = two_gpus()
    uuid = parse_gpu_csv(f"{header}\n{hot}")[0].uuid
    full = probe(f"{header}\n{hot}\n{low}", apps=apps_for((uuid, "5")))
    complete = parse_probe_output("n", full, 0.0)
    assert complete.state is NodeState.OK and len(complete.gpus) == 2
    assert complete.gpus[0].process_memory_mib == 5

    def without_process_memory(sample: NodeSample) -> list[GpuSample]:
        return [replace(g, process_memory_mib=NA()) for g in sample.gpus]

    for end in range(len(full)):
        sample = parse_probe_output("n", full[:end], 0.0)
        if sample.state is NodeState.OK:
            assert without_process_memory(sample) == without_process_memory(complete), end
        for got, whole in [
            *(
                (g.process_memory_mib, c.process_memory_mib)
                for g, c in zip(sample.gpus, complete.gpus, strict=False)
            ),
            (sample.memory.gpu_held_mib, complete.memory.gpu_held_mib),
            # Memory is either the full reading or unknown, never a number from half a line.
            (sample.memory.total_mib, complete.memory.total_mib),
            (sample.memory.used_mib, complete.memory.used_mib),
        ]:
            assert got == whole or isinstance(got, NA), end


# -- never raises ------------------------------------------------------------------------------

GARBAGE = [
    "",
    "\n\n",
    f"{MARK}",
    f"{MARK}gpu",
    f"{MARK}gpu\n{MARK}rc",
    f"{MARK}gpu\n{MARK}rc x\n{MARK}rc 0",
    f"{MARK}rc 0\n{MARK}gpu\nindex, uuid\n",
    f"{MARK}gpu\nindex, uuid, name\n0, 1\n1, 2, 3, 4\n{MARK}rc 0",
    f'{MARK}gpu\nindex, name\n"unterminated, x\n{MARK}rc 0',
    f"{MARK}gpu\nindex, clocks.sm\n99999999999999999999999, 1e400\n{MARK}rc 0",
    f"{MARK}gpu\nindex, clocks_event_reasons.active\n0, 0xZZ\n{MARK}rc 0",
    f"{MARK}meminfo\nMemTotal: -1 kB\n{MARK}apps\n,,,\n{MARK}rc 0",
    "\x00\x01\x02" * 100,
    "é" * 10_000,
]


@pytest.mark.parametrize("text", GARBAGE)
def test_probe_parser_never_raises_on_garbage(text: str) -> None:
    sample = parse_probe_output("n", text, 1.0)
    assert sample.node == "n" and sample.time_s == 1.0
    assert len(sample.raw) <= 8000


@settings(max_examples=200, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("0x1, \n[]N/A@sparktop:gpurcmeinfoaps.%MHzW-")), max_size=300
    )
)
def test_probe_parser_never_raises_fuzz(text: str) -> None:
    sample = parse_probe_output("n", text, 0.0)
    assert isinstance(sample.state, NodeState)
