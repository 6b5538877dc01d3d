"""Shared by the nvidia-smi parser tests: fixture paths, the GB10 meminfo, probe output."""

from __future__ import annotations

import re
from pathlib import Path

from sparktop.model import GpuSample
from sparktop.sources.nvsmi import parse_gpu_csv
from sparktop.sources.probe import MARK
from tests.conftest import CASES, FIXTURES

NVSMI = FIXTURES / "nvidia-smi"
NVSMI_CASES = CASES / "nvidia-smi"
DCGM = FIXTURES / "dcgm"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# The /proc/meminfo lines of a real GB10 (gb10-580.173.02-nvml-meminfo-probe.txt).
GB10_MEMINFO = "".join(
    line.strip() + "\n"
    for line in read(NVSMI / "gb10-580.173.02-nvml-meminfo-probe.txt").splitlines()
    if line.strip().startswith("Mem")
)
_KIB = {key: int(value) for key, value in re.findall(r"(\w+):\s+(\d+) kB", GB10_MEMINFO)}
GB10_TOTAL_MIB = _KIB["MemTotal"] / 1024
GB10_USED_MIB = (_KIB["MemTotal"] - _KIB["MemAvailable"]) / 1024


ALL_FIELDS_CSV = [
    "h100-590-query-gpu-all-fields-idle.csv",
    "h100-590-query-gpu-all-fields-load.csv",
    "rtx2080super-610-query-gpu-all-fields-idle.csv",
]
"""``--query-gpu=<every field>`` captures with the driver's own per-reason columns."""


def number_in(cell: str) -> float:
    """``"631.95 W"`` → 631.95: the number nvidia-smi printed before its unit."""
    return float(cell.split()[0])


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
