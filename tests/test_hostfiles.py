"""The probe's host section: PSI, RDMA ports, spark_hwmon, processes, and n/a with reasons.

The text is in the formats the kernel documents (``Documentation/ABI/stable/
sysfs-class-infiniband``, ``Documentation/accounting/psi.rst``, ``Documentation/hwmon/
sysfs-interface.rst``) as ``grep -sH .`` prints them, and the hwmon layout of the
``spark_hwmon`` driver (``spbm.c``: labels ``sys_total``…``pl1``, µW / µJ).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sparktop.hostmodel import FabricPort, FabricReading
from sparktop.model import NA, is_num
from sparktop.sources.host import files
from sparktop.sources.host.fabric_rates import FabricRates
from sparktop.sources.host.files import NO_INFINIBAND, NO_PSI, parse_host
from sparktop.sources.host.read import read_host_files
from sparktop.sources.nvsmi import parse_meminfo, parse_probe_output
from sparktop.sources.nvsmi.tables import parse_processes
from sparktop.sources.probe import HOST_FILES, MARK, host_part

SPARK = """\
/proc/uptime:350735.47 234388.90
/proc/pressure/memory:some avg10=12.50 avg60=4.10 avg300=0.97 total=81226
/proc/pressure/memory:full avg10=3.25 avg60=1.02 avg300=0.20 total=20351
/sys/class/infiniband/rocep1s0f0/ports/1/state:4: ACTIVE
/sys/class/infiniband/rocep1s0f0/ports/1/phys_state:5: LinkUp
/sys/class/infiniband/rocep1s0f0/ports/1/rate:200 Gb/sec (4X HDR)
/sys/class/infiniband/rocep1s0f0/ports/1/link_layer:Ethernet
/sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/ndevs/0:enp1s0f0np0
/sys/class/infiniband/rocep1s0f0/ports/1/counters/link_downed:0
/sys/class/infiniband/rocep1s0f0/ports/1/counters/port_rcv_data:1000000000
/sys/class/infiniband/rocep1s0f0/ports/1/counters/port_xmit_data:2000000000
/sys/class/infiniband/rocep1s0f0/ports/1/counters/symbol_error:0
/sys/class/infiniband/rocep1s0f0/ports/1/hw_counters/out_of_sequence:7
/sys/class/infiniband/rocep1s0f0/ports/1/hw_counters/rx_write_requests:99
/sys/class/infiniband/rocep1s0f1/ports/1/state:1: DOWN
/sys/class/infiniband/rocep1s0f1/ports/1/phys_state:3: Disabled
/sys/class/infiniband/rocep1s0f1/ports/1/rate:10 Gb/sec (4X SDR)
/sys/class/infiniband/rocep1s0f1/ports/1/counters/link_downed:2
/sys/class/infiniband/rocep1s0f0/device/hwmon/hwmon3/temp1_input:71250
/sys/class/hwmon/hwmon0/name:acpitz
/sys/class/hwmon/hwmon0/power1_input:5000000
/sys/class/hwmon/hwmon2/name:spbm
/sys/class/hwmon/hwmon2/power1_label:sys_total
/sys/class/hwmon/hwmon2/power1_input:41250000
/sys/class/hwmon/hwmon2/power11_label:pl1
/sys/class/hwmon/hwmon2/power11_input:29500000
/sys/class/hwmon/hwmon2/power11_cap:30000000
/sys/class/hwmon/hwmon2/energy4_label:gpu
/sys/class/hwmon/hwmon2/energy4_input:123456789000
/sys/class/hwmon/hwmon2/prochot:0
/sys/class/hwmon/hwmon2/pl_level:2
"""


def test_psi_fabric_and_spark_hwmon_from_real_format_text() -> None:
    read = parse_host(SPARK)
    assert read.uptime_s == pytest.approx(350735.47)
    assert (read.psi_some_pct, read.psi_full_pct) == (12.5, 3.25)
    up, down = read.fabric.ports
    assert (up.name, up.netdev, up.link_layer, up.up) == (
        "rocep1s0f0/1",
        "enp1s0f0np0",
        "Ethernet",
        True,
    )
    assert up.rate == "200 Gb/sec (4X HDR)" and up.rate_gbps == 200.0
    assert up.xmit_bytes == 8_000_000_000 and up.rcv_bytes == 4_000_000_000  # 4-byte words
    assert up.errors["out_of_sequence"] == 7 and "rx_write_requests" not in up.errors
    assert up.temperature_c == pytest.approx(71.25)
    assert not down.up and down.errors["link_downed"] == 2
    assert isinstance(down.xmit_bytes, NA) and isinstance(down.temperature_c, NA)
    power = read.power
    assert power.driver == "spbm"  # the acpitz hwmon's power channel is not the driver's
    assert dict(power.power_w) == {"sys_total": 41.25, "pl1": 29.5}
    assert dict(power.cap_w) == {"pl1": 30.0}
    assert power.energy_j["gpu"] == pytest.approx(123456.789)
    assert (power.prochot, power.pl_level) == (0.0, 2.0)
    assert power.limit_near("pl1") == (29.5, 30.0) and power.limit_near("sys_total") is None


def test_missing_files_are_na_with_their_reason() -> None:
    read = parse_host("/proc/uptime:12.00 3.00\n")
    assert read.psi_some_pct == NA(NO_PSI) and read.psi_full_pct == NA(NO_PSI)
    assert read.fabric.ports == () and read.fabric.missing == NO_INFINIBAND
    assert read.fabric.tx_gbps == NA(NO_INFINIBAND)
    assert not read.power.present
    absent = parse_host(None)  # no host section at all (an older probe, output cut)
    assert absent.fabric.missing == "not read" and isinstance(absent.psi_some_pct, NA)


def test_hostile_lines_are_bounded_and_odd_paths_ignored() -> None:
    lines = [f"/sys/class/infiniband/dev{i}/ports/1/state:4: ACTIVE" for i in range(500)]
    lines += ["/sys/class/infiniband/../../etc/ports/1/state:4: ACTIVE", "garbage", ":x"]
    lines += ["/proc/pressure/memory:some avg10=nan", "/proc/uptime:-5 1"]
    read = parse_host("\n".join(lines))
    assert len(read.fabric.ports) == 32
    assert all(p.device.startswith("dev") for p in read.fabric.ports)
    assert isinstance(read.uptime_s, NA) and isinstance(read.psi_some_pct, NA)


def test_paths_past_the_longest_expected_are_skipped_and_not_kept() -> None:
    """Each path's pattern match is kept across readings (a node names the same files every
    time): a node naming new 60 KB paths every reading grew that table by 120 KB a reading,
    to ~250 MB at its 4,096 entries. A path past any expected shape's length is skipped."""
    kept = files._ib_port.cache_info().currsize
    long = [f"/sys/class/infiniband/x{i}{'a' * 60_000}/ports/1/state:4: ACTIVE" for i in range(2)]
    short = "/sys/class/infiniband/mlx5_9/ports/1/state:4: ACTIVE"
    read = parse_host("\n".join([*long, short]))
    assert [port.device for port in read.fabric.ports] == ["mlx5_9"]
    assert files._ib_port.cache_info().currsize <= kept + 1  # the short path only
    assert all(len(path) <= files.MAX_PATH_CHARS for path, _ in files.host_lines(SPARK))


def test_rates_from_two_readings_on_the_nodes_clock() -> None:
    def reading(uptime: float, words: float, symbol: float) -> FabricReading:
        port = FabricPort(
            "mlx5_0",
            1,
            state="4: ACTIVE",
            xmit_bytes=words * 4,
            rcv_bytes=words * 2,
            errors={"symbol_error": symbol},
        )
        return FabricReading(ports=(port,), missing="", uptime_s=uptime)

    rates = FabricRates()
    first = rates.update(reading(100.0, 0.0, 5))
    assert isinstance(first.ports[0].tx_gbps, NA) and isinstance(first.tx_gbps, NA)
    second = rates.update(reading(110.0, 3.125e9, 9))  # 12.5 GB in 10 s = 10 Gb/s
    assert second.ports[0].tx_gbps == pytest.approx(10.0)
    assert second.rx_gbps == pytest.approx(5.0)
    assert dict(second.ports[0].errors_grown) == {"symbol_error": 4}
    assert rates.update(reading(110.0, 3.125e9, 9)) is second  # the same reading, repeated
    reset = rates.update(reading(5.0, 1.0, 0))  # rebooted: the clock went back
    assert isinstance(reset.ports[0].tx_gbps, NA)


def test_counter_that_goes_down_is_a_reset_not_a_negative_rate() -> None:
    rates = FabricRates()
    port = FabricPort("mlx5_0", 1, xmit_bytes=1e12, rcv_bytes=1e12)
    rates.update(FabricReading(ports=(port,), missing="", uptime_s=1.0))
    port2 = FabricPort("mlx5_0", 1, xmit_bytes=1e3, rcv_bytes=2e12)
    out = rates.update(FabricReading(ports=(port2,), missing="", uptime_s=11.0))
    assert out.ports[0].tx_gbps == NA("counter reset") and is_num(out.ports[0].rx_gbps)


def test_meminfo_pressure_fields() -> None:
    mem = parse_meminfo(
        "MemTotal:       127600748 kB\nMemAvailable:    1572864 kB\n"
        "SwapTotal:      16777212 kB\nSwapFree:       10485756 kB\n"
    )
    assert mem.available_mib == 1536.0
    assert mem.swap_total_mib == pytest.approx(16383.996, abs=0.01)
    assert mem.swap_used_mib == 6144.0
    no_swap_line = parse_meminfo("MemTotal: 100 kB\nMemAvailable: 50 kB\n")
    assert no_swap_line.swap_used_mib == NA("SwapTotal missing from /proc/meminfo")


def test_processes_newest_first_with_unified_share() -> None:
    text = (
        "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
        "GPU-1, 4242, /usr/bin/python3, 103426\n"
        "GPU-1, 50311, jupyter-lab, 9000\n"
        "GPU-1, [N/A], broken, 1\n"
        "GPU-1, 777, vllm, [N/A]\n"
    )
    procs = parse_processes(text, 124_610.1)
    assert [p.pid for p in procs] == [50311, 4242, 777]
    assert procs[1].name == "/usr/bin/python3" and procs[1].gpu_uuid == "GPU-1"
    assert procs[1].share_pct == pytest.approx(83.0, abs=0.01)
    assert isinstance(procs[2].used_mib, NA) and isinstance(procs[2].share_pct, NA)


def test_probe_output_carries_host_section_and_a_cut_one_loses_its_last_line() -> None:
    gpu = (
        f"{MARK}gpu\nindex, uuid, name, clocks.current.sm [MHz], power.draw [W]\n"
        f"0, GPU-1, NVIDIA GB10, 2509, 41.2\n{MARK}rc 0\n"
    )
    slow = (
        f"{MARK}meminfo\nMemTotal: 127600748 kB\nMemAvailable: 20000000 kB\n"
        f"{MARK}apps\ngpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
        f"GPU-1, 4242, python3, 100\n{MARK}rc 0\n{MARK}host\n{SPARK}"
    )
    whole = parse_probe_output("spark-1", gpu + slow + f"{MARK}rc 0\n", 1.0)
    assert whole.ok and whole.memory.psi_some_pct == 12.5
    assert len(whole.fabric.ports) == 2 and whole.power.driver == "spbm"
    assert [p.pid for p in whole.processes] == [4242]
    cut = parse_probe_output("spark-1", gpu + slow[: slow.index("power11_cap") + 15], 1.0)
    assert "pl1" not in cut.power.cap_w


def test_host_command_runs_in_a_real_shell_on_a_machine_without_rdma(tmp_path: Path) -> None:
    """The fixed command as a real bash runs it: globs that match nothing print nothing."""
    out = subprocess.run(
        ["bash", "-c", f"export LC_ALL=C; {host_part()}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert out.startswith(f"{MARK}host\n") and out.rstrip().endswith(f"{MARK}rc 0")
    body = out.split("\n", 1)[1].rsplit(MARK, 1)[0]
    read = parse_host(body)
    assert is_num(read.uptime_s)
    if not Path("/sys/class/infiniband").exists():
        assert read.fabric.missing == NO_INFINIBAND


def test_local_reader_prints_what_grep_prints(tmp_path: Path) -> None:
    root = tmp_path / "root"
    for line in SPARK.splitlines():
        path, _, value = line.partition(":")
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a") as f:
            f.write(value + "\n")
    text = read_host_files(str(root))
    assert parse_host(text) == parse_host(SPARK)
    grep = subprocess.run(
        ["bash", "-c", f"cd {root} && grep -sH . " + " ".join(p.lstrip("/") for p in HOST_FILES)],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    by_grep = sorted("/" + line for line in grep.splitlines())
    assert sorted(text.splitlines()) == by_grep
