"""The SSH source prefers AES-GCM (cheaper per packet in asyncssh) unless the SSH config or
the server decides otherwise; the node is polled the same either way."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sparktop.sim.sshserver import SshServerHandle, start_ssh_server
from sparktop.sources.ssh.util import gcm_first
from tests.ssh_helpers import (
    GB10_CSV,
    ClientFiles,
    FakeNvidiaSmi,
    asyncssh_responder,
    client_files,
    node,
    ssh_source,
)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[SshServerHandle, ClientFiles]]:
    files = client_files(tmp_path / "client")
    handle = await start_ssh_server(
        asyncssh_responder(FakeNvidiaSmi(GB10_CSV)), authorized_client_keys=[files.key]
    )
    files.trust(handle.known_hosts_line())
    try:
        yield handle, files
    finally:
        await handle.close()


def test_gcm_first_keeps_every_cipher() -> None:
    algs = [b"chacha20-poly1305@openssh.com", b"aes256-gcm@openssh.com", b"aes128-ctr"]
    assert gcm_first(algs) == ["aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
                               "aes128-ctr"]  # fmt: skip


async def cipher_used(handle: SshServerHandle, files: ClientFiles) -> str:
    source = ssh_source(files, node("n1", handle.port))
    try:
        sample = await source.sample()
        assert sample.ok, sample.message
        assert source._conn is not None
        return str(source._conn.get_extra_info("send_cipher"))
    finally:
        await source.aclose()


async def test_default_settings_negotiate_aes_gcm(
    server: tuple[SshServerHandle, ClientFiles],
) -> None:
    assert (await cipher_used(*server)).endswith("-gcm@openssh.com")


async def test_ciphers_from_the_ssh_config_are_kept(
    server: tuple[SshServerHandle, ClientFiles],
) -> None:
    handle, files = server
    files.config.write_text("Host *\n  Ciphers chacha20-poly1305@openssh.com\n")
    assert await cipher_used(handle, files) == "chacha20-poly1305@openssh.com"
