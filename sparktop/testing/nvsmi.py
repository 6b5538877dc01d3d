"""A fake ``nvidia-smi`` for one node, and an asyncssh responder running sparktop's probe.

:class:`FakeNvidiaSmi` answers ``--query-gpu`` / ``--query-compute-apps`` from the real case
files in ``shared/cases/nvidia-smi`` (columns picked by the requested field names), as a
current driver, one without the slowdown counters, an old (< 535) driver that only knows
``clocks_throttle_reasons.*``, one with the driver/library mismatch, or one whose driver is
not loaded.
:func:`asyncssh_responder` emulates the probe's shell commands for
:func:`sparktop.sim.sshserver.start_ssh_server`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sparktop.sim.sshserver import Responder
from sparktop.sources.probe import (
    COUNTER_FIELDS,
    FIELD_SETS,
    MARK,
    REASONS_FIELD,
    REASONS_FIELD_OLD,
    SECTION_APPS,
    SECTION_GPU,
    SECTION_HOST,
    SECTION_MEMINFO,
    field_check_command,
    probe_command,
)
from sparktop.testing.shared import CASES, FIXTURES

NVSMI_CASES = CASES / "nvidia-smi"
GB10_CSV = NVSMI_CASES / "gb10-query-with-header.csv"
THERMAL_CSV = NVSMI_CASES / "gb10-thermal-slowdown.csv"
LOW_POWER_CSV = NVSMI_CASES / "gb10-hidden-low-power.csv"
MISMATCH_TXT = NVSMI_CASES / "driver-mismatch.txt"
APPS_CSV = FIXTURES / "nvidia-smi" / "gb10-query-compute-apps-noheader-nounits.csv"
MEMINFO_PROBE = FIXTURES / "nvidia-smi" / "gb10-580.173.02-nvml-meminfo-probe.txt"

DRIVERS = ("current", "no-counters", "old", "mismatch", "unloaded")
MISMATCH_EXIT = 9  # nvidia-smi's exit status when NVML cannot initialise
NO_DRIVER_TEXT = (  # nvidia-smi's own words (exit 9) when the kernel driver is not loaded
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n\n"
)
INVALID_ARG_EXIT = 2  # nvidia-smi's exit status for an unknown --query-gpu field


def _strip_unit(header: str) -> str:
    return header.split(" [", 1)[0].strip()


def gb10_meminfo() -> str:
    """A /proc/meminfo with the GB10's MemTotal/MemAvailable from the NVML probe fixture."""
    lines = [
        line.strip()
        for line in MEMINFO_PROBE.read_text().splitlines()
        if line.strip().startswith(("MemTotal:", "MemAvailable:"))
    ]
    if len(lines) != 2:
        raise ValueError(f"{MEMINFO_PROBE}: no MemTotal and MemAvailable")
    return "\n".join([lines[0], "MemFree:         1024000 kB", lines[1]]) + "\n"


@dataclass
class FakeNvidiaSmi:
    """nvidia-smi on one node, answering from a case CSV (header + GPU rows).

    ``driver``: ``current`` accepts every field sparktop asks for; ``no-counters`` refuses
    ``clocks_event_reasons_counters.*``; ``old`` also refuses ``clocks_event_reasons.*`` and
    prints ``clocks_throttle_reasons.active``; ``mismatch`` prints the driver/library
    mismatch case for every call; ``unloaded`` prints :data:`NO_DRIVER_TEXT` for every call.
    """

    csv_path: Path = GB10_CSV
    driver: str = "current"
    counters_us: dict[str, str] = field(default_factory=dict)
    failure: tuple[str, int] | None = None
    """Output and exit status every call gives instead (a failing nvidia-smi's own words)."""

    def _table(self) -> tuple[list[str], list[list[str]]]:
        # Lines end at "\n" as nvidia-smi ends them: a CR in a name is part of its row.
        with self.csv_path.open(encoding="utf-8", newline="") as file:
            lines = [ln for ln in file.read().split("\n") if ln.strip()]
        header = [c.strip() for c in lines[0].split(",")]
        rows = [[c.strip() for c in ln.split(",")] for ln in lines[1:]]
        return header, rows

    @property
    def driver_version(self) -> str:
        """What ``--query-gpu=driver_version`` prints for this driver."""
        return "525.147.05" if self.driver == "old" else "580.95.05"

    def refused(self, fields: Sequence[str]) -> str | None:
        bad: set[str] = set()
        if self.driver in ("no-counters", "old"):
            bad |= set(COUNTER_FIELDS)
        if self.driver == "old":
            bad.add(REASONS_FIELD)
        return next((f for f in fields if f in bad), None)

    def query_gpu(self, fields: Sequence[str]) -> tuple[str, int]:
        """Output and exit status of ``nvidia-smi --query-gpu=<fields> --format=csv,nounits``."""
        if self.failure is not None:
            return self.failure
        if self.driver == "mismatch":
            return MISMATCH_TXT.read_text(), MISMATCH_EXIT
        if self.driver == "unloaded":
            return NO_DRIVER_TEXT, MISMATCH_EXIT
        bad = self.refused(fields)
        if bad is not None:
            return f'Field "{bad}" is not a valid field to query.\n\n', INVALID_ARG_EXIT
        header, rows = self._table()
        by_name = {
            _strip_unit(h).replace("clocks.current.sm", "clocks.sm"): i
            for i, h in enumerate(header)
        }
        out_header: list[str] = []
        columns: list[int | str] = []
        for f in fields:
            if f == REASONS_FIELD_OLD:
                out_header.append(REASONS_FIELD_OLD)
                columns.append(by_name[REASONS_FIELD])
            elif f in COUNTER_FIELDS:
                out_header.append(f"{f} [us]")
                columns.append(self.counters_us.get(f, "0"))
            elif f == "driver_version":
                out_header.append(f)
                columns.append(self.driver_version)
            elif f in by_name:
                out_header.append(header[by_name[f]])
                columns.append(by_name[f])
            else:
                return f'Field "{f}" is not a valid field to query.\n\n', INVALID_ARG_EXIT
        body = [", ".join(row[c] if isinstance(c, int) else c for c in columns) for row in rows]
        return "\n".join([", ".join(out_header), *body]) + "\n", 0

    def query_apps(self) -> tuple[str, int]:
        """``--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,nounits`` (with header)."""
        if self.failure is not None:
            return self.failure
        if self.driver == "mismatch":
            return MISMATCH_TXT.read_text(), MISMATCH_EXIT
        if self.driver == "unloaded":
            return NO_DRIVER_TEXT, MISMATCH_EXIT
        rows = []
        for line in APPS_CSV.read_text().splitlines():
            cells = [c.strip() for c in line.split(",")]
            if len(cells) == 4:
                rows.append(f"{cells[0]}, {cells[1]}, {cells[3]}")
        return "\n".join(["gpu_uuid, pid, used_gpu_memory [MiB]", *rows]) + "\n", 0


def probe_reply(
    fake: FakeNvidiaSmi, fields: Sequence[str], meminfo: str, *, host_files: bool = False
) -> str:
    """What :func:`probe_command` prints on a node with this nvidia-smi (see probe.py); with
    ``host_files`` the host section of a node where none of the host files exist."""
    gpu, gpu_rc = fake.query_gpu(fields)
    apps, apps_rc = fake.query_apps()
    host = f"{MARK}{SECTION_HOST}\n{MARK}rc 0\n" if host_files else ""
    return (
        f"{MARK}{SECTION_GPU}\n{gpu}{MARK}rc {gpu_rc}\n"
        f"{MARK}{SECTION_MEMINFO}\n{meminfo}"
        f"{MARK}{SECTION_APPS}\n{apps}{MARK}rc {apps_rc}\n{host}"
    )


def asyncssh_responder(fake: FakeNvidiaSmi, meminfo: str | None = None) -> Responder:
    """A responder that runs sparktop's fixed commands against ``fake`` (anything else: 127)."""
    known: dict[str, tuple[str, tuple[str, ...]]] = {}
    for fields in FIELD_SETS:
        known[field_check_command(fields)] = ("check", fields)
        known[probe_command(fields)] = ("probe", fields)
        known[probe_command(fields, host_files=True)] = ("probe+host", fields)
    text = meminfo if meminfo is not None else gb10_meminfo()

    async def respond(command: str) -> tuple[str, int]:
        kind, fields = known.get(command, ("", ()))
        if kind == "check":
            return fake.query_gpu(fields)
        if kind.startswith("probe"):
            return probe_reply(fake, fields, text, host_files=kind == "probe+host"), 0
        return "sh: 1: unexpected command\n", 127

    return respond
