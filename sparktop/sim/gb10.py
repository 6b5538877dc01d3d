"""Answers sparktop's probe like a GB10 node: a tiny interpreter for the fixed remote commands.

The probe (:mod:`sparktop.sources.probe`) is a ``;``-separated list of simple commands:
``export``, ``echo``, ``cat /proc/meminfo`` and ``[timeout N] nvidia-smi --query-…`` with
``2>&1``. Each is run against the node's :class:`~sparktop.sim.gpu.GpuModel`; anything else
answers like bash (``bash: X: command not found``, status 127). nvidia-smi's output follows
the real tool: CSV with a header (units in brackets even with ``nounits``), ``", "``
separators, ``[N/A]`` memory on GB10, hex masks like ``0x0000000000000020``, and for an
unknown field ``Field "x" is not a valid field to query.`` with status 2.

:meth:`Gb10Responder.stream` answers the long-lived ``exec nvidia-smi --query-gpu=… -lms N``
as the real tool does: the header once, then a row every N ms (the model refreshed before each
row) until the client goes away. ``lms`` emulates drivers whose ``-lms`` misbehaves.
"""

from __future__ import annotations

import asyncio
import functools
import shlex
from collections.abc import AsyncIterator, Callable, Mapping
from types import MappingProxyType

from sparktop.sim.gpu import MAX_SM_CLOCK_MHZ, GpuModel
from sparktop.sim.hostfs import grep_files

Refresh = Callable[[], object]

LMS_MODES = ("ok", "unsupported", "exits", "garbage")
"""How a simulated ``-lms`` behaves: streams; refuses the option; prints three intervals and
exits; prints one interval and then lines that are not its CSV."""

_COUNTER = "clocks_event_reasons_counters."

GPU_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "index": "index",
        "uuid": "uuid",
        "gpu_uuid": "uuid",
        "name": "name",
        "gpu_name": "name",
        "clocks.sm": "clocks.current.sm [MHz]",
        "clocks.current.sm": "clocks.current.sm [MHz]",
        "clocks.max.sm": "clocks.max.sm [MHz]",
        "clocks.max.sm_clock": "clocks.max.sm [MHz]",
        "temperature.gpu": "temperature.gpu",
        "power.draw": "power.draw [W]",
        "utilization.gpu": "utilization.gpu [%]",
        "memory.used": "memory.used [MiB]",
        "memory.total": "memory.total [MiB]",
        "memory.free": "memory.free [MiB]",
        "pstate": "pstate",
        "driver_version": "driver_version",
        "clocks_event_reasons.active": "clocks_event_reasons.active",
        "clocks_throttle_reasons.active": "clocks_event_reasons.active",
        **{
            _COUNTER + c: f"{_COUNTER}{c} [us]"
            for c in ("sw_thermal_slowdown", "hw_thermal_slowdown", "sw_power_cap")
        },
        _COUNTER + "hw_power_brake_slowdown": f"{_COUNTER}hw_power_brake_slowdown [us]",
    }
)
"""Query field → the header nvidia-smi ≥ 535 prints for it (new names even for old aliases)."""

APP_HEADERS: Mapping[str, str] = MappingProxyType(
    {
        "gpu_uuid": "gpu_uuid",
        "pid": "pid",
        "process_name": "process_name",
        "used_memory": "used_gpu_memory [MiB]",
        "used_gpu_memory": "used_gpu_memory [MiB]",
    }
)

_BAD_ARGS = 'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.\n\n'
NEW_DRIVER = "580.95.05"
OLD_DRIVER = "525.147.05"


@functools.lru_cache(maxsize=64)
def split_command(command: str) -> tuple[str, ...]:
    """Shell words and ``;``/``&``/``>`` punctuation of a command line (ValueError if it does
    not parse). Cached: the same few probe commands arrive every poll from every client."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&>|")
    lexer.whitespace_split = True
    return tuple(lexer)


async def _once(text: str, status: int) -> AsyncIterator[str | int]:
    yield text
    yield status


def _invalid(field: str) -> tuple[str, int]:
    return f'Field "{field}" is not a valid field to query.\n\n', 2


class Gb10Responder:
    """``async (command) -> (stdout, status)`` for :func:`sparktop.sim.sshserver.start_ssh_server`.

    ``old_driver`` emulates a driver before 535: ``clocks_event_reasons*`` fields are
    refused (so the client falls back to ``clocks_throttle_reasons.active``, printed under
    that old name). ``refresh`` is called before each answer so the model is current.
    """

    def __init__(
        self,
        gpu: GpuModel,
        refresh: Refresh | None = None,
        old_driver: bool = False,
        lms: str = "ok",
    ):
        self.gpu = gpu
        self.refresh = refresh
        self.old_driver = old_driver
        self.lms = lms
        self.rows_streamed = 0
        """Rows printed by every stream so far (what the node's stream cost is counted by)."""

    async def __call__(self, command: str) -> tuple[str, int]:
        if self.refresh is not None:
            self.refresh()
        return self.run(command)

    def run(self, command: str) -> tuple[str, int]:
        """Interpret a command line; output is stdout (and 2>&1 stderr) and the last status."""
        try:
            tokens = split_command(command)
        except ValueError as exc:
            return f"bash: syntax error: {exc}\n", 2
        out: list[str] = []
        status = 0
        segment: list[str] = []
        piped: str | None = None
        for token in [*tokens, ";"]:
            if token not in (";", "|"):
                segment.append(token)
                continue
            if segment:
                text, status = self._simple(segment, status, piped)
                piped = None
                if token == "|":
                    piped = text
                else:
                    out.append(text)
            segment = []
        return "".join(out), status

    def stream(self, command: str) -> AsyncIterator[str | int] | None:
        """The chunks of a ``-lms`` command (see :data:`~sparktop.sim.sshserver.Streamer`), or
        None for any other command (answered by :meth:`run`)."""
        try:
            tokens = list(split_command(command))
        except ValueError:
            return None
        if "exec" not in tokens or "-lms" not in tokens:
            return None
        args = tokens[tokens.index("exec") + 2 :]
        while len(args) >= 3 and args[-3:] == ["2", ">&", "1"]:
            args = args[:-3]
        at = args.index("-lms")
        ms_text = args[at + 1] if at + 1 < len(args) else ""
        if not ms_text.isdigit() or int(ms_text) <= 0 or self.lms == "unsupported":
            return _once(_BAD_ARGS, 2)
        text, status = self._nvidia_smi(args[:at] + args[at + 2 :])
        if status != 0:
            return _once(text, status)
        return self._rows(args[:at] + args[at + 2 :], int(ms_text) / 1000)

    async def _rows(self, args: list[str], period_s: float) -> AsyncIterator[str | int]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for n in range(1 << 62):
            if self.refresh is not None:
                self.refresh()
            text, _ = self._nvidia_smi(args)
            lines = text.splitlines(keepends=True)
            if self.lms == "garbage" and n >= 1:
                yield "\x1b[2JUnable to determine the device handle for GPU0: Unknown Error, 999\n"
            else:
                self.rows_streamed += len(lines) - 1
                yield "".join(lines if n == 0 else lines[1:])
            if self.lms == "exits" and n >= 2:
                yield 0
                return
            await asyncio.sleep(max(0.0, start + (n + 1) * period_s - loop.time()))

    def _simple(
        self, words: list[str], last_status: int, stdin: str | None = None
    ) -> tuple[str, int]:
        words = [w.replace("$?", str(last_status)) for w in words]
        # Redirections: only "2>&1" (tokens "2", ">&", "1") is used; output is merged anyway.
        while len(words) >= 3 and words[-3:] == ["2", ">&", "1"]:
            words = words[:-3]
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # VAR=value prefixes
        if not words:
            return "", 0
        prog, args = words[0], words[1:]
        if prog == "export":
            return "", 0
        if prog == "exec" and args:
            return self._simple(args, last_status)
        if prog == "echo":
            return " ".join(args) + "\n", 0
        if prog == "timeout" and args:
            return self._simple(args[1:], last_status, stdin)
        if prog == "head" and len(args) == 2 and args[0] == "-n" and args[1].isdigit():
            lines = (stdin or "").splitlines(keepends=True)
            return "".join(lines[: int(args[1])]), 0
        if prog == "grep" and args[:2] == ["-sH", "."]:
            return grep_files(self.gpu.host.files(), args[2:])
        if prog == "cat" and args == ["/proc/meminfo"]:
            return self.gpu.meminfo(), 0
        if prog == "cat":
            return f"cat: {' '.join(args)}: No such file or directory\n", 1
        if prog == "nvidia-smi":
            return self._nvidia_smi(args)
        return f"bash: {prog}: command not found\n", 127

    # -- nvidia-smi ------------------------------------------------------------------------

    def _nvidia_smi(self, args: list[str]) -> tuple[str, int]:
        query, apps, fmt = None, None, ""
        for arg in args:
            if arg.startswith("--query-gpu="):
                query = arg.split("=", 1)[1].split(",")
            elif arg.startswith("--query-compute-apps="):
                apps = arg.split("=", 1)[1].split(",")
            elif arg.startswith("--format="):
                fmt = arg.split("=", 1)[1]
            else:
                return _BAD_ARGS, 2
        opts = set(fmt.split(","))
        if "csv" not in opts:
            return "Only CSV format is supported by this query.\n", 2  # not used by sparktop
        header = "noheader" not in opts
        units = "nounits" not in opts
        if query is not None:
            return self._query_gpu(query, header, units)
        if apps is not None:
            return self._query_apps(apps, header, units)
        return "nvidia-smi: no query given\n", 2

    def _query_gpu(self, fields: list[str], header: bool, units: bool) -> tuple[str, int]:
        for f in fields:
            if f not in GPU_HEADERS:
                return _invalid(f)
            if self.old_driver and f.startswith(("clocks_event_reasons", _COUNTER)):
                return _invalid(f)
        g = self.gpu
        counters = {f"{_COUNTER}{k}": v for k, v in g.counters_us.items()}
        values: dict[str, str] = {
            "index": str(g.index),
            "uuid": g.uuid,
            "name": g.name,
            "clocks.current.sm [MHz]": f"{g.clock_mhz:.0f}" + (" MHz" if units else ""),
            "clocks.max.sm [MHz]": f"{MAX_SM_CLOCK_MHZ:.0f}" + (" MHz" if units else ""),
            "temperature.gpu": f"{g.temp_c:.0f}",
            "power.draw [W]": f"{g.power_w:.2f}" + (" W" if units else ""),
            "utilization.gpu [%]": f"{g.util_pct:.0f}" + (" %" if units else ""),
            "memory.used [MiB]": "[N/A]",
            "memory.total [MiB]": "[N/A]",
            "memory.free [MiB]": "[N/A]",
            "pstate": g.pstate,
            "driver_version": OLD_DRIVER if self.old_driver else NEW_DRIVER,
            "clocks_event_reasons.active": f"0x{g.mask:016X}",
        }
        for name, us in counters.items():
            values[f"{name} [us]"] = f"{us:.0f}" + (" us" if units else "")
        headers = [GPU_HEADERS[f] for f in fields]
        if self.old_driver:
            headers = [
                "clocks_throttle_reasons.active" if f == "clocks_throttle_reasons.active" else h
                for f, h in zip(fields, headers, strict=True)
            ]
        row = [values[GPU_HEADERS[f]] for f in fields]
        lines = ([", ".join(headers)] if header else []) + [", ".join(row)]
        return "\n".join(lines) + "\n", 0

    def _query_apps(self, fields: list[str], header: bool, units: bool) -> tuple[str, int]:
        for f in fields:
            if f not in APP_HEADERS:
                return _invalid(f)
        g = self.gpu
        lines = [", ".join(APP_HEADERS[f] for f in fields)] if header else []
        if g.vllm_pid is not None:
            values = {
                "gpu_uuid": g.uuid,
                "pid": str(g.vllm_pid),
                "process_name": "python3",
                "used_gpu_memory [MiB]": f"{g.vllm_memory_mib()}" + (" MiB" if units else ""),
            }
            lines.append(", ".join(values[APP_HEADERS[f]] for f in fields))
            for pid, name, mib in g.side_processes():
                side = {
                    "gpu_uuid": g.uuid,
                    "pid": str(pid),
                    "process_name": name,
                    "used_gpu_memory [MiB]": f"{mib}" + (" MiB" if units else ""),
                }
                lines.append(", ".join(side[APP_HEADERS[f]] for f in fields))
        return "".join(line + "\n" for line in lines), 0
