"""nvidia-smi CSV (GPUs, processes) and /proc/meminfo over every real fixture and case file."""

from __future__ import annotations

import csv
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktop.model import NA, NodeState, decode_clock_events, is_num, slowdown_reasons
from sparktop.sources.nvsmi import (
    ParseError,
    classify_failure,
    parse_apps_csv,
    parse_gpu_csv,
    parse_mask,
    parse_meminfo,
    parse_probe_output,
)
from tests.nvsmi_helpers import (
    ALL_FIELDS_CSV,
    DCGM,
    GB10_MEMINFO,
    GB10_TOTAL_MIB,
    GB10_USED_MIB,
    NVSMI,
    NVSMI_CASES,
    number_in,
    only_gpu,
    probe,
    read,
)

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


PRINTED_FIELD = {
    # GpuSample attribute → the header nvidia-smi printed for it (units stripped).
    "sm_clock_mhz": "clocks.current.sm",
    "max_sm_clock_mhz": "clocks.max.sm",
    "temperature_c": "temperature.gpu",
    "power_w": "power.draw",
    "utilization_pct": "utilization.gpu",
    "memory_used_mib": "memory.used",
    "memory_total_mib": "memory.total",
}
PRINTED_COUNTER = {
    "sw_thermal_us": "clocks_event_reasons_counters.sw_thermal_slowdown",
    "hw_thermal_us": "clocks_event_reasons_counters.hw_thermal_slowdown",
    "sw_power_cap_us": "clocks_event_reasons_counters.sw_power_cap",
    "hw_power_brake_us": "clocks_event_reasons_counters.hw_power_brake_slowdown",
}


def fixture_fields(name: str) -> dict[str, str]:
    """The file's one row by field name, read with the csv module (units dropped from names)."""
    return {re.sub(r"\s*\[.*\]$", "", k): v for k, v in fixture_row(name).items()}


@pytest.mark.parametrize("name", ALL_FIELDS_CSV)
def test_all_fields_csv_maps_columns_by_header(name: str) -> None:
    """Among ~200 columns, each reading comes from its own column (expected values are read
    from the same file with the csv module)."""
    fields = fixture_fields(name)
    gpu = only_gpu(read(NVSMI / name))
    assert (gpu.index, gpu.uuid, gpu.name) == (int(fields["index"]), fields["uuid"], fields["name"])
    assert gpu.pstate == fields["pstate"]
    assert gpu.clock_event_mask == int(fields["clocks_event_reasons.active"], 16)
    for attr, field in PRINTED_FIELD.items():
        assert getattr(gpu, attr) == number_in(fields[field]), attr
    for attr, field in PRINTED_COUNTER.items():
        assert getattr(gpu.counters, attr) == number_in(fields[field]), attr
    assert is_num(gpu.power_w) and gpu.power_w > 0  # not a column of zeros read by mistake


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
    # A process with [N/A] memory (MIG) leaves its GPU's total unknown, not 0.
    na = "gpu_uuid, pid, used_gpu_memory [MiB]\nGPU-a, 1, [N/A]\nGPU-a, 2, 5\nGPU-b, 3, 7\n"
    assert parse_apps_csv(na) == {"GPU-a": NA("[N/A]"), "GPU-b": 7.0}
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


@pytest.mark.parametrize(
    "text",
    [
        "MemTotal: -1 kB\nMemAvailable: 5 kB\n",
        "MemTotal: 0 kB\nMemAvailable: 0 kB\n",
        "MemTotal: 1x kB\n",
        "MemTotal:\n",
    ],
)
def test_meminfo_nonsense_is_unknown_not_a_number(text: str) -> None:
    memory = parse_meminfo(text)
    assert isinstance(memory.total_mib, NA) and isinstance(memory.used_mib, NA)


def test_meminfo_crlf_and_available_above_total() -> None:
    memory = parse_meminfo(GB10_MEMINFO.replace("\n", "\r\n"))
    assert memory.used_mib == pytest.approx(GB10_USED_MIB)
    assert parse_meminfo("MemTotal: 1024 kB\nMemAvailable: 4096 kB\n").used_mib == 0


def test_discrete_gpu_memory_is_not_unified() -> None:
    text = read(NVSMI / "h100-590-query-gpu-all-fields-load.csv")
    meminfo = "MemTotal: 1056000000 kB\nMemAvailable: 1000000000 kB\n"
    sample = parse_probe_output("h100", probe(text, meminfo=meminfo), 0.0)
    assert sample.state is NodeState.OK
    assert not sample.memory.unified
    assert sample.gpus[0].memory_used_mib == 19818
    assert sample.gpus[0].process_memory_mib == 0 and sample.memory.gpu_held_mib == 0


def test_probe_sections_split_alike_by_line_and_by_marker_search() -> None:
    # split_probe cuts plain-"\n" text at its markers with str.find; any other line break
    # goes line by line: both must give the same sections for every shape of text.
    from sparktop.sources.nvsmi.node import _split_lines, split_probe

    rnd = random.Random(5)
    atoms = [
        "@@sparktop:gpu", "@@sparktop:rc 0", "@@sparktop:rc", "@@sparktop:rc -1",
        "@@sparktop:rc x", " @@sparktop:gpu", "@@sparktop:apps  ", "@@sparktop:meminfo",
        "x", "", "a,b", "@@sparktop:", "@@sparktop:rc 12 ", "é",
    ]  # fmt: skip
    texts = [read(NVSMI / "gb10-580.173.02-nvml-meminfo-probe.txt")]
    for _ in range(3000):
        text = "\n".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 9)))
        text += rnd.choice(["", "\n", "\n\n"])
        if rnd.random() < 0.1:
            text = text.replace("\n", rnd.choice(["\r\n", "\x0c", "\u2028"]), 1)
        texts.append(text)
    for text in texts:
        assert split_probe(text) == _split_lines(text), text


# -- a poll's GPU text split once ----------------------------------------------------------------


def test_a_polls_gpu_text_is_split_once_and_each_reader_gets_its_own_rows() -> None:
    from sparktop.sources.nvsmi import tables

    # Blank lines read as none: a text no other test has split, read as the capture.
    gpu_text = read(NVSMI / "h100-590-query-gpu-all-fields-load.csv") + "\n" * 7
    text = probe(gpu_text)
    before = tables._csv_rows.cache_info()
    sample = parse_probe_output("spark-1", text, 0.0)
    after = tables._csv_rows.cache_info()
    assert sample.state is NodeState.OK and sample.gpus
    # The GPU CSV split once (and perhaps the empty compute apps' CSV, unless an earlier
    # test split it); the failure check, the GPUs and the driver version read the GPU text:
    # the last two find it split.
    assert 1 <= after.misses - before.misses <= 2
    assert after.hits - before.hits >= 2
    rows = tables.csv_rows(gpu_text)
    rows[0].clear()
    rows.append(["changed"])
    fresh = [list(row) for row in tables._csv_rows.__wrapped__(gpu_text)]
    assert tables.csv_rows(gpu_text) == fresh
    assert parse_probe_output("spark-1", text, 0.0).gpus == sample.gpus


def test_probe_sections_split_alike_whole_and_cut_at_the_slow_tier() -> None:
    # A streamed poll's text is split in two at its first meminfo marker, the slow tier's
    # part split once per text: the sections must be split_probe's of the whole text.
    from sparktop.sources.nvsmi.node import _sections, split_probe

    rnd = random.Random(7)
    atoms = [
        "@@sparktop:gpu", "@@sparktop:rc 0", "@@sparktop:rc", "@@sparktop:meminfo",
        "@@sparktop:meminfo2", "@@sparktop:apps", "@@sparktop:host", " @@sparktop:meminfo",
        "x", "", "a,b", "@@sparktop:", "@@sparktop:rc 3", "MemTotal: 1 kB",
    ]  # fmt: skip
    texts = [read(NVSMI / "gb10-580.173.02-nvml-meminfo-probe.txt")]
    for _ in range(3000):
        text = "\n".join(rnd.choice(atoms) for _ in range(rnd.randint(0, 12)))
        texts.append(text + rnd.choice(["", "\n", "\n\n"]))
    for text in texts:
        for _ in range(2):  # the second time from the kept split
            assert dict(_sections(text)) == split_probe(text), text
            assert list(_sections(text)) == list(split_probe(text)), text


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from([NA("a"), NA("b"), 0.0, 1.5, 2048.0]),
    st.booleans(),
    st.sampled_from([NA("no PSI"), 0.0, 3.25]),
    st.sampled_from([NA("no PSI"), NA("no 'full' line in PSI"), 0.0, 1.75]),
)
def test_a_kept_memory_is_the_reading_with_its_values_set(
    held: float | NA, unified: bool, some: float | NA, full: float | NA
) -> None:
    from dataclasses import replace

    from sparktop.sources.nvsmi.node import _memory

    memory = parse_meminfo(GB10_MEMINFO)
    expected = replace(
        memory, gpu_held_mib=held, unified=unified, psi_some_pct=some, psi_full_pct=full
    )
    for _ in range(2):  # the second is the kept one
        got = _memory(memory, held, unified, some, full)
        assert got == expected and got.psi_full_pct == full and got.gpu_held_mib == held
