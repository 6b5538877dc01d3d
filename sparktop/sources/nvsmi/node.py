"""A node's sample from the batched probe: failures as states, unified memory, process memory."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Protocol

from sparktop.hostmodel import GpuProcess
from sparktop.model import (
    NA,
    GpuSample,
    NodeMemory,
    NodeSample,
    NodeState,
    Num,
    is_num,
)
from sparktop.safe_text import strip_escapes
from sparktop.sources.host.files import parse_host
from sparktop.sources.nvsmi.cells import ParseError, first_line, parse_cell
from sparktop.sources.nvsmi.tables import (
    driver_version,
    looks_like_csv,
    parse_apps_csv,
    parse_gpu_csv,
    parse_processes,
    process_memory,
    sum_num,
    with_process_memory,
)
from sparktop.sources.probe import (
    MARK,
    REMOTE_TIMEOUT_S,
    SECTION_APPS,
    SECTION_GPU,
    SECTION_HOST,
    SECTION_MEMINFO,
)

MIB_PER_KIB = 1024.0
MEMINFO_KEYS = frozenset(
    {"MemTotal", "MemAvailable", "MemFree", "Buffers", "Cached", "SwapTotal", "SwapFree"}
)
"""The /proc/meminfo lines read (the other ~50 are skipped unparsed)."""

# -- /proc/meminfo -----------------------------------------------------------------------------


def parse_meminfo(text: str) -> NodeMemory:
    """Total and used host memory (MiB) from ``/proc/meminfo``: used = ``MemTotal − MemAvailable``.

    Values are kB (KiB) in the file. A missing ``MemAvailable`` (kernels before 3.14) falls
    back to ``MemFree + Buffers + Cached``; a missing (or zero) ``MemTotal`` gives NA for both,
    and negative values are ignored. ``gpu_held_mib`` and ``unified`` are left for the
    caller (see :func:`parse_probe_output`).
    """
    kib: dict[str, float] = {}
    for line in text.splitlines():
        key, sep, rest = line.strip().partition(":")
        fields = rest.split()
        if sep and fields and key.strip() in MEMINFO_KEYS:
            value = parse_cell(fields[0])
            if is_num(value) and value >= 0:
                kib[key.strip()] = value
    total = kib.get("MemTotal")
    if not total:
        missing = NA("MemTotal missing from /proc/meminfo")
        return NodeMemory(total_mib=missing, used_mib=missing)
    available = kib.get("MemAvailable")
    if available is None and "MemFree" in kib:
        available = kib["MemFree"] + kib.get("Buffers", 0.0) + kib.get("Cached", 0.0)
    used: Num = NA("MemAvailable missing from /proc/meminfo")
    if available is not None:
        used = max(total - available, 0.0) / MIB_PER_KIB
    swap_total: Num = NA("SwapTotal missing from /proc/meminfo")
    swap_used: Num = swap_total
    if "SwapTotal" in kib:
        swap_total = kib["SwapTotal"] / MIB_PER_KIB
        free = kib.get("SwapFree")
        swap_used = (
            max(kib["SwapTotal"] - free, 0.0) / MIB_PER_KIB
            if free is not None
            else NA("SwapFree missing from /proc/meminfo")
        )
    return NodeMemory(
        total_mib=total / MIB_PER_KIB,
        used_mib=used,
        available_mib=available / MIB_PER_KIB if available is not None else used,
        swap_total_mib=swap_total,
        swap_used_mib=swap_used,
    )


# -- failures ----------------------------------------------------------------------------------

_INVALID_FIELD_RE = re.compile(r"Field\s+[\"“']([^\"”']+)[\"”']\s+is not a valid field to query")


_NVML_INIT_RE = re.compile(r"Failed to initialize NVML:?([^\n]*)", re.IGNORECASE)


def unsupported_field(text: str) -> str | None:
    """The field nvidia-smi refused (``Field "x" is not a valid field to query.``), or None.

    An unknown field makes the whole query fail (exit 2), so the caller retries with an
    older field set.
    """
    match = _INVALID_FIELD_RE.search(text)
    return match.group(1) if match else None


def classify_failure(text: str, exit_status: int | None) -> tuple[NodeState, str] | None:
    """What an nvidia-smi run's output means when it is not GPU CSV; None when it is CSV.

    Driver/library mismatch, "No devices were found", a missing nvidia-smi (exit 127), a
    driver that cannot be reached, a timeout (exit 124) and a refused field are each named;
    ``Failed to initialize NVML: <reason>`` and other non-zero exits are ``GPU_UNAVAILABLE``
    (SSH answered: the node is up, its GPU data is not), a lost GPU is ``ERROR``, and other
    non-CSV output (a default table, ``-q`` output, junk) is ``GARBLED``, each with
    nvidia-smi's words (escape sequences dropped).
    """
    lowered = text.lower()
    if "driver/library version mismatch" in lowered:
        return NodeState.DRIVER_MISMATCH, "driver/library mismatch (reboot or reload the driver)"
    if "no devices were found" in lowered:
        return NodeState.NO_GPU, "no GPU visible"
    if exit_status == 127 or ("nvidia-smi" in lowered and "not found" in lowered):
        return NodeState.NO_DRIVER, "nvidia-smi not found (no NVIDIA driver installed?)"
    if "couldn't communicate with the nvidia driver" in lowered:
        return NodeState.NO_DRIVER, "cannot reach the NVIDIA driver (is it loaded?)"
    if "couldn't find libnvidia-ml.so" in lowered:
        return NodeState.NO_DRIVER, "NVML library not found (is the NVIDIA driver installed?)"
    if exit_status == 124:
        why = f"timed out after {REMOTE_TIMEOUT_S} s on the node"
        return NodeState.NOT_ANSWERING, f"{NodeState.NOT_ANSWERING.value} ({why})"
    # ASCII without escapes: the case-blind pattern can match only where the lowered text
    # holds its words (the search over every poll's CSV was a tenth of its parse).
    plain = text.isascii() and "\x1b" not in text
    nvml = None
    if not plain or "failed to initialize nvml" in lowered:
        nvml = _NVML_INIT_RE.search(strip_escapes(text))
    if nvml is not None:
        why = " ".join(nvml.group(1).split()) or "no reason given"
        return NodeState.GPU_UNAVAILABLE, first_line(f"NVML: {why}")
    field = unsupported_field(text)
    if field is not None:
        return NodeState.ERROR, f"nvidia-smi does not know the field {field!r}"
    if "gpu is lost" in lowered or "fallen off the bus" in lowered:
        return NodeState.ERROR, f"GPU lost (reboot needed): {first_line(text)}"
    if exit_status not in (0, None):
        return NodeState.GPU_UNAVAILABLE, f"nvidia-smi exited {exit_status}: {first_line(text)}"
    if not looks_like_csv(text):
        return NodeState.GARBLED, f"not nvidia-smi CSV: {first_line(text)}"
    return None


# -- unified memory ----------------------------------------------------------------------------

UNIFIED_TOTAL_TOLERANCE = 0.02
"""A GPU whose memory total is within 2 % of the host's MemTotal shares the host's memory."""


def is_unified(gpus: Sequence[GpuSample], host_total_mib: Num) -> bool:
    """True on unified-memory machines: a GB10 by name, ``[N/A]``/unsupported memory
    fields, or a GPU memory total ≈ the host's MemTotal."""
    for gpu in gpus:
        if "GB10" in gpu.name.upper():
            return True
        total = gpu.memory_total_mib
        if isinstance(total, NA) and (total.reason.startswith("[") or "Supported" in total.reason):
            return True
        if _close_to(total, host_total_mib):
            return True
    return False


def _close_to(gpu_total_mib: Num, host_total_mib: Num) -> bool:
    if not (is_num(gpu_total_mib) and is_num(host_total_mib) and host_total_mib > 0):
        return False
    return abs(gpu_total_mib - host_total_mib) <= UNIFIED_TOTAL_TOLERANCE * host_total_mib


# -- the batched probe -------------------------------------------------------------------------

RAW_MAX = 8000
"""How much of the probe's output a sample keeps for the detail screen."""

MAX_GPUS = 64
"""GPUs read per node (a DGX has 8; an HGX 16). More rows are a broken or hostile
nvidia-smi: the node is an error, not 50,000 table rows, alerts and sparklines."""


def _gpu_rows(gpu_text: str) -> int:
    """Rows after the header line in nvidia-smi's CSV (warnings and blank lines aside)."""
    return max(0, sum(1 for line in gpu_text.split("\n") if "," in line) - 1)


def oversized_message(head: str, limit: int) -> str:
    """Why a probe whose output passed ``limit`` characters is refused (``head`` is what
    was read): how many GPU rows nvidia-smi had listed by then, when it was listing."""
    sections = split_probe(head)
    where = f"probe output over {limit // 1024:,} KiB"
    # The probe's GPU section, or the field check's bare CSV (no markers).
    rows = _gpu_rows(sections[SECTION_GPU][0] if SECTION_GPU in sections else head)
    if rows > MAX_GPUS:
        return f"{where}: nvidia-smi listed {rows:,}+ GPUs (at most {MAX_GPUS} are read)"
    return f"{where} (a probe prints a few KiB per GPU)"


_NL_MARK = "\n" + MARK


def split_probe(text: str) -> dict[str, tuple[str, int | None]]:
    """Section name → (body, exit status or None) from the probe's ``@@sparktop:`` markers.

    Lines end at ``\\n`` only, as the shell and nvidia-smi end them: a CR, form feed or
    U+2028 inside a GPU name is part of its row, not a break that would cut the row in two
    (a name with a CR read as a broken node). The text is cut at its marker lines found by
    ``str.find``, the bodies sliced out whole: a streamed poll's text carries the slow tier's
    ~130 lines every second, and reading them one by one was a fifth of the poll's parse
    (same result as :func:`_split_lines`, see tests/test_nvsmi_parse.py)."""
    sections: dict[str, tuple[str, int | None]] = {}
    name: str | None = None
    start = 0

    def close(end: int | None, status: int | None) -> None:
        if name is not None and name not in sections:
            body = text[start:end]
            sections[name] = (body[:-1] if body.endswith("\n") else body, status)

    found = text.find(_NL_MARK)
    at = 0 if text.startswith(MARK) else (found + 1 if found >= 0 else -1)
    while at >= 0:
        end = text.find("\n", at)
        line_end = len(text) if end < 0 else end
        tag = text[at + len(MARK) : line_end].strip()
        if tag.startswith("rc"):
            status = tag[2:].strip()
            close(at, int(status) if status.lstrip("-").isdigit() else None)
            name = None
        else:
            close(at, None)
            name = tag
        start = line_end + 1
        if end < 0:
            break
        found = text.find(_NL_MARK, end)
        at = found + 1 if found >= 0 else -1
    close(None, None)
    return sections


def _split_lines(text: str) -> dict[str, tuple[str, int | None]]:
    """:func:`split_probe` line by line (lines end at ``\\n``)."""
    sections: dict[str, tuple[str, int | None]] = {}
    name: str | None = None
    body: list[str] = []

    def close(status: int | None) -> None:
        if name is not None and name not in sections:
            sections[name] = ("\n".join(body), status)

    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for line in lines:
        if not line.startswith(MARK):
            body.append(line)
            continue
        tag = line[len(MARK) :].strip()
        if tag.startswith("rc"):
            status = tag[2:].strip()
            close(int(status) if status.lstrip("-").isdigit() else None)
            name, body = None, []
        else:
            close(None)
            name, body = tag, []
    close(None)
    return sections


def parse_probe_output(node: str, text: str, time_s: float) -> NodeSample:
    """One node's sample from the output of :func:`sparktop.sources.probe.probe_command`.

    GPUs come from the ``gpu`` section, host memory from ``meminfo``, per-GPU process memory
    from ``apps``. Unified-memory nodes (GB10) get ``NodeMemory(unified=True)`` with
    ``gpu_held_mib`` = Σ per-process ``used_memory``. nvidia-smi failures become the node's
    state (see :func:`classify_failure`) with memory still filled in. Never raises: output
    that cannot be read at all is ``GARBLED``.
    """
    raw = text[:RAW_MAX]
    try:
        return _parse_probe(node, text, time_s, raw)
    except Exception as exc:  # a parser bug must become a node state, not a dead poller
        message = f"cannot read probe output: {type(exc).__name__}: {first_line(str(exc))}"
        return _garbled(node, time_s, raw, message)


def _garbled(node: str, time_s: float, raw: str, message: str) -> NodeSample:
    return NodeSample(
        node=node, time_s=time_s, state=NodeState.GARBLED, message=message, since_s=time_s, raw=raw
    )


def _parse_probe(node: str, text: str, time_s: float, raw: str) -> NodeSample:
    sections = _sections(text)
    if SECTION_GPU not in sections:
        return _garbled(node, time_s, raw, f"not sparktop probe output: {first_line(text)}")
    return parse_sections(node, sections, time_s, raw)


GpuRead = tuple[tuple[NodeState, str] | None, "tuple[GpuSample, ...] | GpuRows", str]
"""What a probe's GPU section says: the failure (state, message) or None, the GPUs (their
process memory not set yet), or their rows to make them from once it is known, and the
driver version ("" without GPUs)."""


class GpuRows(Protocol):
    """GPU rows read, made GPUs once their process memory is known (one copy of each GPU,
    not one and a copy with the memory set)."""

    def __len__(self) -> int: ...

    def uuids(self) -> list[str]:
        """Each row's GPU UUID, as its GPU has it."""
        ...

    def made(self, process_memory_mib: Sequence[Num]) -> tuple[GpuSample, ...]:
        """The GPUs, each with its process memory (MiB)."""
        ...


def parse_sections(
    node: str,
    sections: Mapping[str, tuple[str, int | None]],
    time_s: float,
    raw: str,
    gpu_read: GpuRead | None = None,
) -> NodeSample:
    """:func:`parse_probe_output`'s sample from the text's sections (:func:`split_probe`),
    which hold the ``gpu`` one, and its :func:`read_gpus` when the caller has it; raises for
    a parser bug (the caller makes it a node state)."""
    if SECTION_APPS in sections:
        memory = _meminfo(sections.get(SECTION_MEMINFO, ("", None))[0])
    else:  # meminfo is not followed by the apps marker: its last line may be half a line
        cut = NA("probe output cut short")
        memory = NodeMemory(total_mib=cut, used_mib=cut)
    apps_text, apps_rc = sections.get(SECTION_APPS, ("", None))
    apps: Mapping[str, Num] | None = None
    if apps_rc == 0:
        apps = _apps(apps_text)
    host_text, host_rc = sections.get(SECTION_HOST, (None, None))
    # Without its exit status the section was cut: its last line may be half a line.
    host = parse_host(host_text if host_rc is not None or host_text is None else _whole(host_text))
    failure, gpus, driver = gpu_read if gpu_read is not None else read_gpus(*sections[SECTION_GPU])
    held: Num = NA("process list unavailable")
    if apps is not None and len(gpus):
        held = sum_num(apps.values())
    if not isinstance(gpus, tuple):
        values = process_memory(gpus.uuids(), apps) if apps is not None else [held] * len(gpus)
        gpus = gpus.made(values)
    elif apps is not None:
        gpus = with_process_memory(gpus, apps)
    else:
        gpus = tuple(replace(gpu, process_memory_mib=held) for gpu in gpus)
    unified = is_unified(gpus, memory.total_mib)
    memory = _memory(memory, held, unified, host.psi_some_pct, host.psi_full_pct)
    processes = _processes(apps_text, memory.total_mib) if apps_rc == 0 else ()
    state, message = failure if failure is not None else (NodeState.OK, "")
    return NodeSample(
        node=node,
        time_s=time_s,
        state=state,
        message=message,
        since_s=time_s if failure is not None else None,
        gpus=gpus,
        memory=memory,
        raw=raw,
        driver_version=driver,
        fabric=host.fabric,
        power=host.power,
        processes=processes,
    )


def read_gpus(gpu_text: str, gpu_rc: int | None) -> GpuRead:
    """The GPU section (its body and nvidia-smi's exit status, None when the output was cut)
    as :func:`parse_probe_output` reads it."""
    failure = classify_failure(gpu_text, gpu_rc)
    if failure is None and gpu_rc is None:
        # No exit status after the CSV: the output was cut (connection dropped, command
        # killed), so rows may be half rows and GPUs may be missing: show none, not some.
        failure = NodeState.GARBLED, "probe output cut short (no exit status from nvidia-smi)"
    gpus: tuple[GpuSample, ...] = ()
    if failure is None and _gpu_rows(gpu_text) > MAX_GPUS:
        rows = _gpu_rows(gpu_text)
        # SSH answered: the GPUs cannot be read, the node is not down.
        failure = (
            NodeState.GPU_UNAVAILABLE,
            (f"nvidia-smi listed {rows:,} GPUs (at most {MAX_GPUS} are read)"),
        )
    if failure is None:
        try:
            gpus = parse_gpu_csv(gpu_text)
        except ParseError as exc:
            failure = NodeState.GARBLED, str(exc)
        else:
            if not gpus:
                failure = NodeState.NO_GPU, "no GPU visible"
    return failure, gpus, driver_version(gpu_text) if gpus else ""


_TAIL_MARK = f"\n{MARK}{SECTION_MEMINFO}"


def _sections(text: str) -> Mapping[str, tuple[str, int | None]]:
    """:func:`split_probe` of ``text``, the part from its first ``meminfo`` marker on (the
    slow tier's reading, which a stream repeats for ~10 s of polls) split once per text.

    The same sections: a marker line that is not an exit status closes the section before
    it wherever the text is cut, and a name's first section wins (the head's). The tail's
    bodies are then the same strings from poll to poll, so the parsed readings kept by text
    (memory, compute apps, host files) are found without hashing them again."""
    cut = text.find(_TAIL_MARK) + 1
    if cut <= 0:
        return split_probe(text)
    sections = split_probe(text[:cut])
    for name, body in split_tail(text[cut:]).items():
        sections.setdefault(name, body)
    return sections


TAILS_KEPT = 64
"""Slow-tier tails kept split: one per streamed node up to this many (a few KiB each)."""


@functools.lru_cache(maxsize=TAILS_KEPT)
def split_tail(tail: str) -> Mapping[str, tuple[str, int | None]]:
    """:func:`split_probe` of a slow-tier text (from its ``meminfo`` marker on), kept for the
    :data:`TAILS_KEPT` newest texts: the bodies are the same strings from poll to poll."""
    return MappingProxyType(split_probe(tail))


# A streamed poll carries the slow tier's last reading (memory, compute apps) for ~10 s of
# polls: each text is read once, then found again (keyed by text, so any change is read anew).
SLOW_KEPT = 256
"""Slow-tier texts kept parsed: one per node up to this many nodes."""


@functools.lru_cache(maxsize=SLOW_KEPT)
def _meminfo(text: str) -> NodeMemory:
    return parse_meminfo(text)


@functools.lru_cache(maxsize=SLOW_KEPT, typed=True)
def _memory(memory: NodeMemory, held: Num, unified: bool, some: Num, full: Num) -> NodeMemory:
    """``memory`` with the GPUs' held memory, unified or not, and PSI: the same for every
    poll of one slow-tier reading (a copy of the 10-field memory was an eighth of a poll)."""
    return replace(memory, gpu_held_mib=held, unified=unified, psi_some_pct=some, psi_full_pct=full)


@functools.lru_cache(maxsize=SLOW_KEPT)
def _apps(text: str) -> Mapping[str, Num]:
    return MappingProxyType(parse_apps_csv(text))


@functools.lru_cache(maxsize=SLOW_KEPT)
def _processes(text: str, total_mib: Num) -> tuple[GpuProcess, ...]:
    return parse_processes(text, total_mib)


def _whole(text: str) -> str:
    """``text`` without its last line (it may have been cut mid-line)."""
    head, _, _ = text.rpartition("\n")
    return head
