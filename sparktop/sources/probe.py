"""The fixed remote commands sparktop runs on a node, and the markers that split their output.

This module is the contract between the SSH source (which sends these strings and parses the
reply) and the simulator (which answers them). Every command is built from the constants
here only: nothing from the inventory is ever interpolated into a remote command.
"""

from __future__ import annotations

GPU_FIELDS_BASE: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "clocks.sm",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "pstate",
    "driver_version",
)
"""Always queried (every driver knows these). nvidia-smi may print another header name
(``clocks.current.sm [MHz]``); ``driver_version`` repeats on every row (the node's driver)."""

REASONS_FIELD = "clocks_event_reasons.active"
REASONS_FIELD_OLD = "clocks_throttle_reasons.active"
"""Drivers before 535 know only the ``clocks_throttle_reasons.*`` spelling."""

COUNTER_FIELDS: tuple[str, ...] = (
    "clocks_event_reasons_counters.sw_thermal_slowdown",
    "clocks_event_reasons_counters.hw_thermal_slowdown",
    "clocks_event_reasons_counters.sw_power_cap",
    "clocks_event_reasons_counters.hw_power_brake_slowdown",
)
"""Cumulative µs per slowdown; refused by older drivers (then dropped from the query)."""

APPS_FIELDS: tuple[str, ...] = ("gpu_uuid", "pid", "process_name", "used_memory")

REMOTE_TIMEOUT_S = 5
"""Remote ``timeout`` for each nvidia-smi call (the client has its own deadline too)."""

MARK = "@@sparktop:"
"""Section markers in the probe's output: ``@@sparktop:gpu``, ``@@sparktop:rc 0``…"""

SECTION_GPU = "gpu"
SECTION_MEMINFO = "meminfo"
SECTION_APPS = "apps"
SECTION_HOST = "host"

HOST_FILES: tuple[str, ...] = (
    "/proc/uptime",
    "/proc/pressure/memory",
    "/sys/class/infiniband/*/ports/*/state",
    "/sys/class/infiniband/*/ports/*/phys_state",
    "/sys/class/infiniband/*/ports/*/rate",
    "/sys/class/infiniband/*/ports/*/link_layer",
    "/sys/class/infiniband/*/ports/*/gid_attrs/ndevs/0",
    "/sys/class/infiniband/*/ports/*/counters/*",
    "/sys/class/infiniband/*/ports/*/hw_counters/*",
    "/sys/class/infiniband/*/device/hwmon/hwmon*/temp*_input",
    "/sys/class/hwmon/hwmon*/name",
    "/sys/class/hwmon/hwmon*/power*_label",
    "/sys/class/hwmon/hwmon*/power*_input",
    "/sys/class/hwmon/hwmon*/power*_cap",
    "/sys/class/hwmon/hwmon*/energy*_label",
    "/sys/class/hwmon/hwmon*/energy*_input",
    "/sys/class/hwmon/hwmon*/prochot",
    "/sys/class/hwmon/hwmon*/pl_level",
)
"""Fixed paths (shell globs) the slow tier reads, each line printed as ``path:line`` by
``grep -sH .``: the node's clock for rates, memory pressure (PSI), the RDMA ports and the
adapters' temperatures, and every hwmon's power/energy channels (the parser keeps only the
``spark_hwmon`` driver's). A glob that matches nothing is left as it is and ``-s`` keeps
grep quiet about it: a node without ``/sys/class/infiniband`` prints no fabric lines."""

HOST_MAX_LINES = 1500
"""Lines of ``HOST_FILES`` output kept (``head -n``): a DGX Spark prints ~300."""

SLOW_TIER_S = 10.0
"""Period of the slow tier, seconds: the host files in either probe mode, and beside a GPU
stream also ``/proc/meminfo`` and the compute apps. Between reads a node's sample repeats the
last host section (its fabric rates come from the node's own clock, so a repeat is no new
reading)."""


def gpu_fields(reasons_field: str = REASONS_FIELD, counters: bool = True) -> tuple[str, ...]:
    """The ``--query-gpu`` field list for a driver's supported set."""
    return GPU_FIELDS_BASE + (reasons_field,) + (COUNTER_FIELDS if counters else ())


def gpu_section(fields: tuple[str, ...]) -> str:
    """The probe's GPU part: the ``gpu`` marker, nvidia-smi CSV (with header), its status."""
    return (
        f"echo '{MARK}{SECTION_GPU}'; "
        f"timeout {REMOTE_TIMEOUT_S} nvidia-smi --query-gpu={','.join(fields)} "
        "--format=csv,nounits 2>&1; "
        f'echo "{MARK}rc $?"'
    )


def slow_command() -> str:
    """The slow tier, read every few seconds beside the stream: ``/proc/meminfo``, the
    per-process GPU memory and the host files, in the probe's sections::

        @@sparktop:meminfo
        <contents of /proc/meminfo>
        @@sparktop:apps
        <csv with header>
        @@sparktop:rc <status>
        @@sparktop:host
        <path:line for each line of HOST_FILES>
        @@sparktop:rc <status>
    """
    return f"export LC_ALL=C; {_memory_part()}; {host_part()}"


def host_part() -> str:
    """The ``host`` section: every line of :data:`HOST_FILES` as ``path:line``, bounded."""
    return (
        f"echo '{MARK}{SECTION_HOST}'; "
        f"timeout {REMOTE_TIMEOUT_S} grep -sH . {' '.join(HOST_FILES)} "
        f"| head -n {HOST_MAX_LINES}; "
        f'echo "{MARK}rc $?"'
    )


def _memory_part() -> str:
    return (
        f"echo '{MARK}{SECTION_MEMINFO}'; "
        "cat /proc/meminfo; "
        f"echo '{MARK}{SECTION_APPS}'; "
        f"timeout {REMOTE_TIMEOUT_S} nvidia-smi --query-compute-apps={','.join(APPS_FIELDS)} "
        "--format=csv,nounits 2>&1; "
        f'echo "{MARK}rc $?"'
    )


def probe_command(fields: tuple[str, ...], *, host_files: bool = False) -> str:
    """The batched one-shot command: GPU CSV (with header), /proc/meminfo, per-process memory,
    and with ``host_files`` (the slow tier, every :data:`SLOW_TIER_S`) the host section.

    Output shape (each nvidia-smi call followed by its exit status)::

        @@sparktop:gpu
        <csv with header, or nvidia-smi's error text>
        @@sparktop:rc <status>
        @@sparktop:meminfo
        <contents of /proc/meminfo>
        @@sparktop:apps
        <csv with header>
        @@sparktop:rc <status>
        @@sparktop:host                          (only with host_files)
        <path:line for each line of HOST_FILES>
        @@sparktop:rc <status>
    """
    host = f"; {host_part()}" if host_files else ""
    return f"export LC_ALL=C; {gpu_section(fields)}; {_memory_part()}{host}"


STREAM_MIN_INTERVAL_MS = 100
"""The shortest ``-lms`` period asked for (the poller's own floor is 200 ms)."""


def stream_interval_ms(interval_s: float) -> int:
    """``-lms`` milliseconds for a poll period in seconds (an integer: the command is fixed)."""
    return max(STREAM_MIN_INTERVAL_MS, round(float(interval_s) * 1000))


def stream_command(fields: tuple[str, ...], interval_ms: int) -> str:
    """The long-lived GPU stream: nvidia-smi keeps NVML open and prints its CSV header once,
    then one row per GPU every ``interval_ms`` (``-lms``), until the channel closes.

    ``exec`` leaves no shell behind on the node; stderr is merged so a refusal (``-lms``
    unknown, a bad field) arrives as text the client can name.
    """
    ms = int(interval_ms)  # formatted from an integer only: never a string from outside
    return (
        f"export LC_ALL=C; exec nvidia-smi --query-gpu={','.join(fields)} "
        f"--format=csv,nounits -lms {ms} 2>&1"
    )


def field_check_command(fields: tuple[str, ...]) -> str:
    """Run once per host to learn whether a field set is accepted (exit status 0 = yes)."""
    return (
        f"LC_ALL=C timeout {REMOTE_TIMEOUT_S} nvidia-smi --query-gpu={','.join(fields)} "
        "--format=csv,nounits 2>&1"
    )


FIELD_SETS: tuple[tuple[str, ...], ...] = (
    gpu_fields(REASONS_FIELD, counters=True),
    gpu_fields(REASONS_FIELD, counters=False),
    gpu_fields(REASONS_FIELD_OLD, counters=False),
    GPU_FIELDS_BASE,
)
"""Field sets tried in order, newest first, until nvidia-smi accepts one."""
