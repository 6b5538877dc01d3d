"""Test helpers for SSH nodes on loopback: a fake nvidia-smi, asyncssh and OpenSSH sshd nodes.

- :class:`FakeNvidiaSmi` answers ``--query-gpu`` / ``--query-compute-apps`` from the real case
  files in ``/work/shared/cases/nvidia-smi`` (columns picked by the requested field names),
  as a current driver, one without the slowdown counters, an old (< 535) driver that only
  knows ``clocks_throttle_reasons.*``, or one with the driver/library mismatch.
- :func:`asyncssh_responder` emulates the probe's shell commands for
  :func:`sparktop.sim.sshserver.start_ssh_server`.
- :class:`Sshd` runs OpenSSH's ``sshd`` on a free 127.0.0.1 port with its own host key and
  config, and a fake ``nvidia-smi`` script first on the session PATH.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import psutil
import pytest

from sparktop.inventory import Inventory, NodeConfig, SshSettings
from sparktop.sim.sshserver import Responder, generate_key, known_hosts_host, public_key_line
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
from sparktop.sources.ssh import SshSource
from tests.conftest import CASES, FIXTURES

NVSMI_CASES = CASES / "nvidia-smi"
GB10_CSV = NVSMI_CASES / "gb10-query-with-header.csv"
THERMAL_CSV = NVSMI_CASES / "gb10-thermal-slowdown.csv"
LOW_POWER_CSV = NVSMI_CASES / "gb10-hidden-low-power.csv"
MISMATCH_TXT = NVSMI_CASES / "driver-mismatch.txt"
APPS_CSV = FIXTURES / "nvidia-smi" / "gb10-query-compute-apps-noheader-nounits.csv"
MEMINFO_PROBE = FIXTURES / "nvidia-smi" / "gb10-580.173.02-nvml-meminfo-probe.txt"

DRIVERS = ("current", "no-counters", "old", "mismatch")
MISMATCH_EXIT = 9  # nvidia-smi's exit status when NVML cannot initialise
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
    assert len(lines) == 2, MEMINFO_PROBE
    return "\n".join([lines[0], "MemFree:         1024000 kB", lines[1]]) + "\n"


@dataclass
class FakeNvidiaSmi:
    """nvidia-smi on one node, answering from a case CSV (header + GPU rows).

    ``driver``: ``current`` accepts every field sparktop asks for; ``no-counters`` refuses
    ``clocks_event_reasons_counters.*``; ``old`` also refuses ``clocks_event_reasons.*`` and
    prints ``clocks_throttle_reasons.active``; ``mismatch`` prints the driver/library
    mismatch case for every call.
    """

    csv_path: Path = GB10_CSV
    driver: str = "current"
    counters_us: dict[str, str] = field(default_factory=dict)

    def _table(self) -> tuple[list[str], list[list[str]]]:
        lines = [ln for ln in self.csv_path.read_text().splitlines() if ln.strip()]
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
        if self.driver == "mismatch":
            return MISMATCH_TXT.read_text(), MISMATCH_EXIT
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
        if self.driver == "mismatch":
            return MISMATCH_TXT.read_text(), MISMATCH_EXIT
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


# -- client side -------------------------------------------------------------------------------


@dataclass
class ClientFiles:
    """A client's identity, known_hosts and (empty) SSH config, isolated from ~/.ssh."""

    root: Path
    key: asyncssh.SSHKey
    identity_file: Path
    known_hosts: Path
    config: Path

    def trust(self, line: str) -> None:
        with self.known_hosts.open("a") as out:
            out.write(line + "\n")

    def settings(self, **overrides: object) -> SshSettings:
        values: dict[str, object] = {
            "identity_file": self.identity_file,
            "known_hosts": self.known_hosts,
            "config": self.config,
            "connect_timeout_s": 3.0,
            "command_timeout_s": 1.0,
            "user": login_user(),
        }
        values.update(overrides)
        return SshSettings.model_validate(values)


def ssh_source(files: ClientFiles, node_config: NodeConfig, **settings: object) -> SshSource:
    """An :class:`SshSource` with settings merged exactly as the inventory merges them."""
    inventory = Inventory(ssh=files.settings(**settings), nodes=(node_config,))
    return SshSource(node_config, inventory.ssh_for(node_config), backoff_base_s=0.0)


def client_files(root: Path, key: asyncssh.SSHKey | None = None) -> ClientFiles:
    root.mkdir(parents=True, exist_ok=True)
    key = key or generate_key()
    identity = root / "id_ed25519"
    key.write_private_key(str(identity))
    identity.chmod(0o600)
    (root / "known_hosts").write_text("")
    (root / "ssh_config").write_text("")
    return ClientFiles(root, key, identity, root / "known_hosts", root / "ssh_config")


def node(name: str, port: int, **extra: object) -> NodeConfig:
    return NodeConfig.model_validate({"name": name, "host": "127.0.0.1", "port": port, **extra})


def login_user() -> str:
    return getpass.getuser()


# -- OpenSSH sshd ------------------------------------------------------------------------------

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

FAKE_NVIDIA_SMI = r"""#!/bin/bash
# Fake nvidia-smi for sparktop's tests: answers precomputed per query, or hangs. With -lms N it
# streams like the real tool: the header once, then the rows every N ms, until its output
# closes; $d/lms says how -lms behaves (ok, unsupported, exits, garbage) and while $d/stall
# exists the stream prints nothing. Sleeping is `read -t` on a pipe nobody writes to, so a
# streaming fake starts no process per interval (as a real nvidia-smi keeps NVML open).
d='{dir}'
echo "$*" >> "$d/calls"
read -r mode < "$d/mode"
if [ "$mode" = hang ]; then exec sleep 30; fi
q=
f=
lms=
prev=
for arg in "$@"; do
  case "$arg" in
    --query-gpu=*) q="${{arg#--query-gpu=}}" ;;
    --query-compute-apps=*) f="$d/apps" ;;
  esac
  if [ "$prev" = -lms ]; then lms="$arg"; fi
  prev="$arg"
done
if [ -z "$f" ]; then f="$d/gpu-$(printf '%s' "$q" | md5sum | cut -c1-32)"; fi
if [ ! -f "$f.out" ]; then
  echo "Field \"$q\" is not a valid field to query."
  exit 2
fi
if [ -z "$lms" ]; then
  cat "$f.out"
  exit "$(cat "$f.rc")"
fi
read -r how < "$d/lms"
if [ "$how" = unsupported ]; then
  echo 'Invalid combination of input arguments. Please run "nvidia-smi -h" for help.'
  exit 2
fi
read -r rc < "$f.rc"
if [ "$rc" != 0 ]; then cat "$f.out"; exit "$rc"; fi
{{ read -r header; rows=$(cat); }} < "$f.out"
secs=$(printf '%d.%03d' $((lms / 1000)) $((lms % 1000)))
exec 9<> <(:)
printf '%s\n' "$header"
n=0
while :; do
  while [ -e "$d/stall" ]; do read -r -t 0.05 -u 9; done
  if [ "$how" = garbage ] && [ "$n" -ge 1 ]; then
    printf '%s\n' 'Unable to determine the device handle for GPU0: Unknown Error, Unknown Error'
  else
    printf '%s\n' "$rows"
  fi
  n=$((n + 1))
  if [ "$how" = exits ] && [ "$n" -ge 3 ]; then exit 0; fi
  read -r -t "$secs" -u 9
done
"""


def require_sshd() -> str:
    """sshd's path; skip when it is absent outside CI, fail when CI should have installed it."""
    if os.path.isfile(SSHD) and os.access(SSHD, os.X_OK):
        return SSHD
    message = "OpenSSH sshd not installed (Debian: apt-get install openssh-server)"
    if os.environ.get("CI"):
        pytest.fail(message + "; CI must install it (.ci/run)")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sshd:
    """One OpenSSH ``sshd -D -e`` on 127.0.0.1 with its own host key, config and fake GPU.

    ``set_driver("old")`` / ``hang()`` change what the fake ``nvidia-smi`` does;
    ``stop()`` kills the daemon and every session (the node goes away); ``start()`` brings
    it back on the same port.
    """

    def __init__(self, root: Path, client_key: asyncssh.SSHKey, fake: FakeNvidiaSmi) -> None:
        self.sshd = require_sshd()
        self.root = root
        self.fake = fake
        self.port = free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.log: list[str] = []
        self.lms = "ok"
        root.mkdir(parents=True, exist_ok=True)
        self.bin = root / "bin"
        self.answers = root / "answers"
        self.bin.mkdir(exist_ok=True)
        self.answers.mkdir(exist_ok=True)
        host_key = root / "ssh_host_ed25519_key"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True
        )
        self.host_key_public = " ".join(Path(f"{host_key}.pub").read_text().split()[:2])
        (root / "authorized_keys").write_text(public_key_line(client_key) + "\n")
        script = self.bin / "nvidia-smi"
        script.write_text(FAKE_NVIDIA_SMI.format(dir=self.answers))
        script.chmod(0o755)
        self.config = root / "sshd_config"
        self.config.write_text(
            "\n".join(
                [
                    f"ListenAddress 127.0.0.1:{self.port}",
                    f"HostKey {host_key}",
                    f"AuthorizedKeysFile {root / 'authorized_keys'}",
                    "PidFile none",
                    "StrictModes no",
                    "UsePAM no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PubkeyAuthentication yes",
                    "PermitRootLogin prohibit-password",
                    # SHLVL=1: bash run by sshd skips ~/.bashrc when SHLVL says it is nested,
                    # so the node's shell does not run this machine's rc files (a pyenv
                    # rehash there waits on a lock that a killed session can leave behind).
                    f"SetEnv PATH={self.bin}:/usr/local/bin:/usr/bin:/bin SHLVL=1",
                    "LogLevel INFO",
                    "",
                ]
            )
        )
        self.set_driver(fake.driver)

    def known_hosts_line(self) -> str:
        return f"{known_hosts_host('127.0.0.1', self.port)} {self.host_key_public}"

    def set_driver(self, driver: str) -> None:
        """Precompute the fake nvidia-smi's answers for ``driver`` and stop hanging."""
        self.fake.driver = driver
        for old in self.answers.glob("*.out"):
            old.unlink()
        for fields in FIELD_SETS:
            query = ",".join(fields)
            digest = hashlib.md5(query.encode()).hexdigest()
            out, rc = self.fake.query_gpu(fields)
            (self.answers / f"gpu-{digest}.out").write_text(out)
            (self.answers / f"gpu-{digest}.rc").write_text(f"{rc}\n")
        out, rc = self.fake.query_apps()
        (self.answers / "apps.out").write_text(out)
        (self.answers / "apps.rc").write_text(f"{rc}\n")
        (self.answers / "mode").write_text("answer\n")
        (self.answers / "lms").write_text(f"{self.lms}\n")

    @property
    def calls(self) -> list[str]:
        """Every fake nvidia-smi invocation's arguments, in order."""
        path = self.answers / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def set_lms(self, how: str) -> None:
        """How the fake's ``-lms`` behaves: ok, unsupported, exits (after 3 intervals) or
        garbage (after the first interval)."""
        self.lms = how
        (self.answers / "lms").write_text(f"{how}\n")

    def stall(self) -> None:
        """Streams print nothing until :meth:`unstall` (one-shot calls still answer)."""
        (self.answers / "stall").write_text("")

    def unstall(self) -> None:
        (self.answers / "stall").unlink(missing_ok=True)

    def hang(self) -> None:
        """Every nvidia-smi call from now on sleeps (until the remote ``timeout`` kills it)."""
        (self.answers / "mode").write_text("hang\n")

    def start(self) -> None:
        if os.geteuid() == 0:
            # sshd refuses to start as root without its privilege-separation directory.
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        listening = threading.Event()
        self.proc = subprocess.Popen(
            [self.sshd, "-D", "-e", "-f", str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._drain, args=(self.proc, listening), daemon=True).start()
        if not listening.wait(10) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("sshd did not start:\n" + "\n".join(self.log[-20:]))

    def _drain(self, proc: subprocess.Popen[str], listening: threading.Event) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.log.append(line.rstrip())
            if "Server listening on" in line:
                listening.set()
        listening.set()  # sshd exited: let start() see it

    def stop(self) -> None:
        """Kill sshd and every session process it started (each session has its own
        process group, so they are found as descendants of this sshd)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            children = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        proc.send_signal(signal.SIGKILL)
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.kill()
        proc.wait(5)
        for child in children:
            _wait_exited(child.pid)


def _wait_exited(pid: int, timeout_s: float = 5.0) -> None:
    """Wait until a process (not necessarily our child) has exited, via a pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
