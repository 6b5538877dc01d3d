"""OpenSSH ``sshd`` on a free 127.0.0.1 port with its own host key and config, and a fake
``nvidia-smi`` script (answers precomputed from a :class:`FakeNvidiaSmi`) first on the
session PATH."""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path

import asyncssh
import psutil

from sparktop.sim.sshserver import known_hosts_host, public_key_line
from sparktop.sources.probe import FIELD_SETS
from sparktop.testing.nvsmi import FakeNvidiaSmi

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


class SshdMissing(RuntimeError):
    """OpenSSH's ``sshd`` is not installed here (tests skip, CI fails)."""


def sshd_path() -> str:
    """sshd's path; :class:`SshdMissing` when it is not installed."""
    if os.path.isfile(SSHD) and os.access(SSHD, os.X_OK):
        return SSHD
    raise SshdMissing("OpenSSH sshd not installed (Debian: apt-get install openssh-server)")


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
        self.sshd = sshd_path()
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
