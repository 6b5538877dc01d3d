"""SSH nodes that lie or misbehave, on loopback: host keys as OpenSSH judges them.

asyncssh servers (``sparktop.sim.sshserver``) answering from the nvidia-smi case
``gb10-query-with-header.csv`` via tests/ssh_helpers.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sparktop.model import NodeState
from sparktop.sim.sshserver import (
    SshServerHandle,
    generate_key,
    known_hosts_host,
    public_key_line,
    start_ssh_server,
)
from tests.ssh_helpers import (
    ClientFiles,
    FakeNvidiaSmi,
    Sshd,
    asyncssh_responder,
    client_files,
    require_sshd,
    ssh_source,
)
from tests.ssh_helpers import node as node_config

StartNode = Callable[..., Awaitable[SshServerHandle]]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # no agent: only the test's key
    return client_files(tmp_path / "client")


@pytest.fixture
async def start_node(files: ClientFiles) -> AsyncIterator[StartNode]:
    """Start an asyncssh node answering as a GB10 (not trusted: each test writes known_hosts)."""
    servers: list[SshServerHandle] = []

    async def start(fake: FakeNvidiaSmi | None = None, **kwargs: object) -> SshServerHandle:
        server = await start_ssh_server(
            asyncssh_responder(fake or FakeNvidiaSmi()),
            authorized_client_keys=[files.key],
            **kwargs,  # type: ignore[arg-type]
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


# -- host keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize("also_trusted", [False, True], ids=["revoked-only", "revoked-and-other"])
async def test_a_revoked_host_key_is_reported_as_revoked_with_no_fix_command(
    files: ClientFiles, start_node: StartNode, also_trusted: bool
) -> None:
    server = await start_node()
    pattern = known_hosts_host("127.0.0.1", server.port)
    lines = [f"@revoked {server.known_hosts_line()}"]
    if also_trusted:  # the host's other (current) key is trusted: OpenSSH still says REVOKED
        lines.append(f"{pattern} {public_key_line(generate_key())}")
    files.known_hosts.write_text("\n".join(lines) + "\n")
    source = ssh_source(files, node_config("spark-1", server.port))
    sample = await source.sample()
    await source.aclose()

    assert sample.state is NodeState.HOST_KEY
    assert sample.message.startswith(f"REVOKED host key for {pattern}"), sample.message
    assert "@revoked" in sample.message
    # Removing the entry and re-scanning would trust the stolen key again: no such advice.
    assert "ssh-keygen" not in sample.message and "ssh-keyscan" not in sample.message
    assert server.commands == []


async def test_a_cert_authority_host_presenting_a_plain_key_is_a_host_key_failure(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node()
    pattern = known_hosts_host("127.0.0.1", server.port)
    files.known_hosts.write_text(f"@cert-authority {pattern} {generate_key_line()}\n")
    source = ssh_source(files, node_config("spark-1", server.port))
    sample = await source.sample()
    await source.aclose()

    assert sample.state is NodeState.HOST_KEY, sample.message
    assert "@cert-authority" in sample.message and "certificate" in sample.message
    assert "unreachable" not in sample.message and server.commands == []


async def test_a_known_hosts_path_that_is_a_directory_is_named(
    files: ClientFiles, start_node: StartNode, tmp_path: Path
) -> None:
    server = await start_node()
    folder = tmp_path / "known_hosts.d"
    folder.mkdir()
    source = ssh_source(files, node_config("spark-1", server.port), known_hosts=str(folder))
    sample = await source.sample()
    await source.aclose()

    assert not sample.ok
    assert sample.message == f"known_hosts file {folder}: Is a directory"
    assert "~/.ssh" not in sample.message and server.commands == []


async def test_a_changed_host_key_is_noticed_on_reconnect_with_when_it_was_last_verified(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node()
    files.trust(server.known_hosts_line())
    source = ssh_source(files, node_config("spark-1", server.port))
    try:
        first = await source.sample()
        assert first.ok, first.message
        verified = source.host_key_verified_s
        assert verified is not None
        # The node is replaced by another machine with another key on the same address.
        await server.go_away()
        await start_node(port=server.port)
        second = await source.sample()
    finally:
        await source.aclose()

    assert second.state is NodeState.HOST_KEY, second.message
    assert "does not match" in second.message
    match = re.search(r"since it was last verified at (\d\d:\d\d:\d\d)", second.message)
    assert match is not None, second.message
    assert source.host_key_verified_s == verified  # the new key was never accepted


@pytest.mark.sshd
@pytest.mark.parametrize("entry", ["@revoked", "@cert-authority"])
async def test_revoked_and_cert_authority_entries_against_openssh_sshd(
    files: ClientFiles, tmp_path: Path, entry: str
) -> None:
    require_sshd()
    daemon = Sshd(tmp_path / "sshd", files.key, FakeNvidiaSmi())
    daemon.start()
    try:
        pattern = known_hosts_host("127.0.0.1", daemon.port)
        if entry == "@revoked":
            files.known_hosts.write_text(f"@revoked {daemon.known_hosts_line()}\n")
        else:
            files.known_hosts.write_text(f"@cert-authority {pattern} {generate_key_line()}\n")
        source = ssh_source(files, node_config("spark-1", daemon.port), connect_timeout_s=10)
        sample = await source.sample()
        await source.aclose()
    finally:
        daemon.stop()
    assert sample.state is NodeState.HOST_KEY, sample.message
    if entry == "@revoked":
        assert sample.message.startswith("REVOKED host key") and "ssh-keygen" not in sample.message
    else:
        assert "@cert-authority" in sample.message
    assert daemon.calls == []  # nothing ran on the node


def generate_key_line() -> str:
    return public_key_line(generate_key())
