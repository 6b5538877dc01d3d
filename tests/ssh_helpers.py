"""Test helpers for SSH nodes on loopback: the scaffolding lives in :mod:`sparktop.testing`
(shared with the benchmarks); this module adds what only pytest can do (skip or fail when
``sshd`` is missing).

- :class:`FakeNvidiaSmi` and :func:`asyncssh_responder`: :mod:`sparktop.testing.nvsmi`;
- :class:`Sshd`: :mod:`sparktop.testing.sshd`, skipped here when OpenSSH is not installed;
- :class:`ClientFiles`, :func:`ssh_source`: :mod:`sparktop.testing.sshclient`.
"""

from __future__ import annotations

import os
from pathlib import Path

import asyncssh
import pytest

from sparktop.testing import sshd as _sshd
from sparktop.testing.nvsmi import (
    APPS_CSV,
    DRIVERS,
    GB10_CSV,
    INVALID_ARG_EXIT,
    LOW_POWER_CSV,
    MEMINFO_PROBE,
    MISMATCH_EXIT,
    MISMATCH_TXT,
    NVSMI_CASES,
    THERMAL_CSV,
    FakeNvidiaSmi,
    asyncssh_responder,
    gb10_meminfo,
    probe_reply,
)
from sparktop.testing.sshclient import ClientFiles, client_files, login_user, node, ssh_source
from sparktop.testing.sshd import FAKE_NVIDIA_SMI, SSHD, SshdMissing, free_port

__all__ = [
    "APPS_CSV", "DRIVERS", "FAKE_NVIDIA_SMI", "GB10_CSV", "INVALID_ARG_EXIT", "LOW_POWER_CSV",
    "MEMINFO_PROBE", "MISMATCH_EXIT", "MISMATCH_TXT", "NVSMI_CASES", "SSHD", "THERMAL_CSV",
    "ClientFiles", "FakeNvidiaSmi", "Sshd", "asyncssh_responder", "client_files", "free_port",
    "gb10_meminfo", "login_user", "node", "probe_reply", "require_sshd", "ssh_source",
]  # fmt: skip


def require_sshd() -> str:
    """sshd's path; skip when it is absent outside CI, fail when CI should have installed it."""
    try:
        return _sshd.sshd_path()
    except SshdMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc}; CI must install it (.ci/run)")
        pytest.skip(str(exc))


class Sshd(_sshd.Sshd):
    """:class:`sparktop.testing.sshd.Sshd`, skipping the test when sshd is not installed."""

    def __init__(self, root: Path, client_key: asyncssh.SSHKey, fake: FakeNvidiaSmi) -> None:
        require_sshd()
        super().__init__(root, client_key, fake)
