"""nvidia-smi parsers over every real fixture and case file, plus garbage that must not crash."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktop.model import NA, GpuSample, NodeState, decode_clock_events, is_num, slowdown_reasons
from sparktop.sources.nvsmi import (
    ParseError,
    classify_failure,
    normalise_header,
    parse_apps_csv,
    parse_cell,
    parse_gpu_csv,
    parse_mask,
    parse_meminfo,
    parse_probe_output,
    split_probe,
    unsupported_field,
)
from sparktop.sources.probe import FIELD_SETS, MARK, probe_command
from tests.conftest import CASES, FIXTURES

NVSMI = FIXTURES / "nvidia-smi"
NVSMI_CASES = CASES / "nvidia-smi"
DCGM = FIXTURES / "dcgm"

# /proc/meminfo lines from gb10-580.173.02-nvml-meminfo-probe.txt (a real GB10).
GB10_MEMINFO = "MemTotal:       127600748 kB\nMemFree:  1000 kB\nMemAvailable:   118566368 kB\n"
GB10_TOTAL_MIB = 127600748 / 1024
GB10_USED_MIB = (127600748 - 118566368) / 1024


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def only_gpu(text: str, fields: list[str] | None = None) -> GpuSample:
    gpus = parse_gpu_csv(text, fields)
    assert len(gpus) == 1
    return gpus[0]


def probe(
    gpu: str, gpu_rc: int = 0, meminfo: str = GB10_MEMINFO, apps: str = "", apps_rc: int = 0
) -> str:
    """Probe output in the shape of sparktop.sources.probe.probe_command."""
    return (
        f"{MARK}gpu\n{gpu}\n{MARK}rc {gpu_rc}\n{MARK}meminfo\n{meminfo}\n"
        f"{MARK}apps\n{apps}\n{MARK}rc {apps_rc}\n"
    )


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


# -- case files --------------------------------------------------------------------------------


def test_case_gb10_thermal_slowdown() -> None:
    gpu = only_gpu(read(NVSMI_CASES / "gb10-thermal-slowdown.csv"))
    assert gpu.sm_clock_mhz == 1833 and gpu.max_sm_clock_mhz == 3003
    assert gpu.temperature_c == 91
    assert gpu.clock_event_mask == 0x20
    assert gpu.clock_events == ("sw_thermal_slowdown",)
    assert gpu.slowdowns == ("sw_thermal_slowdown",)
    assert gpu.memory_total_mib == NA("[N/A]")


def test_case_gb10_hidden_low_power() -> None:
    gpu = only_gpu(read(NVSMI_CASES / "gb10-hidden-low-power.csv"))
    assert gpu.sm_clock_mhz == 513
    assert gpu.utilization_pct == 100
    assert gpu.power_w == pytest.approx(14.9)
    assert gpu.clock_event_mask == 0
    assert gpu.clock_events == () and gpu.slowdowns == ()


def test_case_gb10_query_with_header_is_unified() -> None:
    text = read(NVSMI_CASES / "gb10-query-with-header.csv")
    gpu = only_gpu(text)
    assert gpu.uuid == "GPU-5f1c0000-0000-0000-0000-00000000a1b2" and gpu.name == "NVIDIA GB10"
    assert (gpu.sm_clock_mhz, gpu.power_w, gpu.utilization_pct) == (2509, 41.37, 97)
    assert gpu.memory_used_mib == NA("[N/A]") and gpu.memory_total_mib == NA("[N/A]")
    apps = f"gpu_uuid, pid, used_gpu_memory [MiB]\n{gpu.uuid}, 4242, 19135\n{gpu.uuid}, 4243, 865\n"
    sample = parse_probe_output("spark-1", probe(text, apps=apps), 100.0)
    assert sample.state is NodeState.OK and sample.since_s is None
    memory = sample.memory
    assert memory.unified
    assert memory.total_mib == pytest.approx(GB10_TOTAL_MIB)
    assert memory.used_mib == pytest.approx(GB10_USED_MIB)
    assert memory.gpu_held_mib == 20000
    assert sample.gpus[0].process_memory_mib == 20000
    assert sample.gpus[0].memory_total_mib == NA("[N/A]")


def test_case_driver_mismatch() -> None:
    text = read(NVSMI_CASES / "driver-mismatch.txt")
    expected = (NodeState.DRIVER_MISMATCH, "driver/library mismatch (reboot or reload the driver)")
    assert classify_failure(text, 18) == expected
    sample = parse_probe_output("spark-2", probe(text, gpu_rc=18, apps=text, apps_rc=18), 5.0)
    assert (sample.state, sample.message) == expected
    assert sample.since_s == 5.0 and sample.gpus == ()
    assert sample.memory.total_mib == pytest.approx(GB10_TOTAL_MIB)  # memory still shown


def test_case_no_devices() -> None:
    text = read(NVSMI_CASES / "no-devices.txt")
    assert classify_failure(text, 6) == (NodeState.NO_GPU, "no GPU visible")
    sample = parse_probe_output("spark-3", probe(text, gpu_rc=6), 1.0)
    assert sample.state is NodeState.NO_GPU and sample.message == "no GPU visible"


# -- fixtures: CSV -----------------------------------------------------------------------------


def fixture_row(name: str) -> dict[str, str]:
    header, row = csv.reader(read(NVSMI / name).splitlines(), skipinitialspace=True)
    return dict(zip(header, row, strict=True))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Values read from the files (see SOURCES.md); units are printed in each cell.
        (
            "h100-590-query-gpu-all-fields-idle.csv",
            dict(sm=345, max_sm=1980, temp=41, power=69.85, util=0, used=0, total=81559,
                 pstate="P0", mask=0x1, sw_power_cap_us=0),
        ),
        (
            "h100-590-query-gpu-all-fields-load.csv",
            dict(sm=1980, max_sm=1980, temp=59, power=631.95, util=100, used=19818,
                 total=81559, pstate="P0", mask=0x0, sw_power_cap_us=0),
        ),
        (
            "rtx2080super-610-query-gpu-all-fields-idle.csv",
            dict(sm=765, max_sm=2145, temp=33, power=39.17, util=0, used=211, total=8192,
                 pstate="P8", mask=0x1, sw_power_cap_us=15814595384),
        ),
    ],
)  # fmt: skip
def test_all_fields_csv_maps_columns_by_header(name: str, expected: dict[str, object]) -> None:
    gpu = only_gpu(read(NVSMI / name))
    assert gpu.index == 0
    assert gpu.uuid == "GPU-00000000-0000-0000-0000-000000000000"
    assert gpu.name.startswith("NVIDIA ")
    got = dict(
        sm=gpu.sm_clock_mhz, max_sm=gpu.max_sm_clock_mhz, temp=gpu.temperature_c,
        power=gpu.power_w, util=gpu.utilization_pct, used=gpu.memory_used_mib,
        total=gpu.memory_total_mib, pstate=gpu.pstate, mask=gpu.clock_event_mask,
        sw_power_cap_us=gpu.counters.sw_power_cap_us,
    )  # fmt: skip
    assert got == expected
    assert gpu.counters.sw_thermal_us == 0 and gpu.counters.hw_power_brake_us == 0


REASON_COLUMNS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
    "sync_boost",
)


@pytest.mark.parametrize(
    "name",
    [
        "h100-590-query-gpu-all-fields-idle.csv",
        "h100-590-query-gpu-all-fields-load.csv",
        "rtx2080super-610-query-gpu-all-fields-idle.csv",
    ],
)
def test_clock_event_mask_matches_the_drivers_own_per_reason_columns(name: str) -> None:
    """The same row has the mask and one Active/Not Active column per reason: decode agrees."""
    row = fixture_row(name)
    mask = parse_mask(row["clocks_event_reasons.active"])
    assert isinstance(mask, int)
    active = {r for r in REASON_COLUMNS if row[f"clocks_event_reasons.{r}"] == "Active"}
    assert set(decode_clock_events(mask)) == active
    supported = parse_mask(row["clocks_event_reasons.supported"])
    assert supported == 0x1FF
    assert len(decode_clock_events(supported)) == 9  # every NVML reason, no "other"
    assert "other" not in " ".join(decode_clock_events(supported))


def test_clock_event_masks_from_dcgm_fixtures() -> None:
    """DCGM_FI_DEV_CLOCK_THROTTLE_REASONS = 1 on idle A30 MIG slices is the GPU-idle bit."""
    text = read(DCGM / "a30-mig-clock-throttle-reasons-fragment.prom")
    values = [
        int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("DCGM_FI")
    ]
    assert values and all(decode_clock_events(v) == ("gpu_idle",) for v in values)
    assert all(slowdown_reasons(v) == () for v in values)
    # t400-clock-events-count.prom names the same reasons with dcgm's own labels.
    labels = set(
        re.findall(r'clock_event="([a-z_]+)"', read(DCGM / "t400-clock-events-count.prom"))
    )
    ours = {name.removesuffix("_slowdown") for name in decode_clock_events(0x1FF)}
    assert labels <= ours


def test_gb10_memory_util_power_temp_with_units() -> None:
    gpu = only_gpu(read(NVSMI / "gb10-580.173.02-query-gpu-memory-util-power-temp.csv"))
    assert gpu.memory_total_mib == NA("[N/A]") and gpu.memory_used_mib == NA("[N/A]")
    assert (gpu.utilization_pct, gpu.power_w, gpu.temperature_c) == (0, 11.17, 35)
    assert gpu.sm_clock_mhz == NA("not queried")


def test_gb10_index_name_memory_with_header() -> None:
    gpu = only_gpu(read(NVSMI / "gb10-query-gpu-index-name-memory.csv"))
    assert (gpu.index, gpu.name) == (0, "NVIDIA GB10")
    assert gpu.memory_total_mib == NA("[N/A]")


def test_gb10_noheader_nounits_needs_the_field_list() -> None:
    text = read(NVSMI / "gb10-580.95.05-query-gpu-index-name-memory-noheader-nounits.csv")
    with pytest.raises(ParseError):
        parse_gpu_csv(text)
    fields = ["index", "name", "memory.total", "memory.used", "memory.free"]
    gpu = only_gpu(text, fields)
    assert (gpu.index, gpu.name) == (0, "NVIDIA GB10")
    assert gpu.memory_total_mib == NA("[N/A]") and gpu.memory_used_mib == NA("[N/A]")


def test_gb10_memused_memtotal_memutil_noheader() -> None:
    text = read(NVSMI / "gb10-query-gpu-memused-memtotal-memutil.csv")
    gpu = only_gpu(text, ["memory.used", "memory.total", "utilization.memory"])
    assert gpu.memory_used_mib == NA("[N/A]") and gpu.memory_total_mib == NA("[N/A]")


def test_gb10_compute_apps_with_elided_uuid() -> None:
    text = read(NVSMI / "gb10-query-compute-apps-noheader-nounits.csv")
    assert parse_apps_csv(text) == {"GPU-...": 19135.0}
    fields = ["gpu_uuid", "pid", "process_name", "used_memory"]
    assert parse_apps_csv(text, fields) == {"GPU-...": 19135.0}
    # The one GPU of a GB10 gets the elided entry.
    gpu_csv = read(NVSMI_CASES / "gb10-query-with-header.csv")
    apps = "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n" + text
    sample = parse_probe_output("n", probe(gpu_csv, apps=apps), 0.0)
    assert sample.gpus[0].process_memory_mib == 19135 and sample.memory.gpu_held_mib == 19135


def test_apps_edge_cases() -> None:
    assert parse_apps_csv("") == {}
    assert parse_apps_csv("gpu_uuid, pid, used_gpu_memory [MiB]\n") == {}
    assert parse_apps_csv("gpu_uuid, pid, used_gpu_memory [MiB]\nGPU-a, 1, [N/A]\n") == {}
    text = "gpu_uuid, pid, used_gpu_memory [MiB]\nGPU-a, 1, 10 MiB\nGPU-b, 2, 5 MiB\nGPU-a, 3, 1\n"
    assert parse_apps_csv(text) == {"GPU-a": 11.0, "GPU-b": 5.0}


def test_meminfo_from_gb10_probe_fixture() -> None:
    memory = parse_meminfo(read(NVSMI / "gb10-580.173.02-nvml-meminfo-probe.txt"))
    assert memory.total_mib == pytest.approx(GB10_TOTAL_MIB)
    assert memory.used_mib == pytest.approx(GB10_USED_MIB)
    missing = parse_meminfo("garbage\n")
    assert isinstance(missing.total_mib, NA) and isinstance(missing.used_mib, NA)
    old_kernel = parse_meminfo(
        "MemTotal: 2048 kB\nMemFree: 512 kB\nBuffers: 0 kB\nCached: 512 kB\n"
    )
    assert (old_kernel.total_mib, old_kernel.used_mib) == (2.0, 1.0)


def test_discrete_gpu_memory_is_not_unified() -> None:
    text = read(NVSMI / "h100-590-query-gpu-all-fields-load.csv")
    meminfo = "MemTotal: 1056000000 kB\nMemAvailable: 1000000000 kB\n"
    sample = parse_probe_output("h100", probe(text, meminfo=meminfo), 0.0)
    assert sample.state is NodeState.OK
    assert not sample.memory.unified
    assert sample.gpus[0].memory_used_mib == 19818
    assert sample.gpus[0].process_memory_mib == 0 and sample.memory.gpu_held_mib == 0


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
        ("", 124, NodeState.ERROR),
        ("Unable to determine the device handle for GPU0000:01:00.0: GPU is lost.", 15,
         NodeState.ERROR),
        ("Insufficient Permissions", 4, NodeState.ERROR),
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
    assert isinstance(parse_cell(text), NA)
    assert isinstance(parse_mask(text), NA)
