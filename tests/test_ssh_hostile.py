"""SSH nodes that lie or misbehave, on loopback: host keys as OpenSSH judges them, an
nvidia-smi that lists 50,000 GPUs, and one that hangs on a working connection.

asyncssh servers (``sparktop.sim.sshserver``) answering from the nvidia-smi case
``gb10-query-with-header.csv`` via tests/ssh_helpers.py.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from sparktop.alerts.gpu_rules import node_down_finding
from sparktop.alerts.model import Severity
from sparktop.model import NodeState
from sparktop.sim.sshserver import (
    Responder,
    SshServerHandle,
    generate_key,
    known_hosts_host,
    public_key_line,
    start_ssh_server,
)
from sparktop.sources.nvsmi.node import MAX_GPUS, RAW_MAX
from sparktop.sources.probe import FIELD_SETS, field_check_command, probe_command
from tests.ssh_helpers import (
    GB10_CSV,
    ClientFiles,
    FakeNvidiaSmi,
    Sshd,
    asyncssh_responder,
    client_files,
    gb10_meminfo,
    probe_reply,
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


# -- nvidia-smi that lists too many GPUs, or hangs ---------------------------------------------


def many_gpus_csv(path: Path, count: int) -> Path:
    """The GB10 case with its GPU row repeated ``count`` times (index and UUID made unique)."""
    header, row = GB10_CSV.read_text().splitlines()[:2]
    cells = [c.strip() for c in row.split(",")]
    rows = (", ".join([str(i), f"GPU-{i:08d}", *cells[2:]]) for i in range(count))
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def cached_responder(fake: FakeNvidiaSmi) -> Responder:
    """The probe's answers computed once (a 50,000-row answer is built once, not per poll)."""
    answers: dict[str, tuple[str, int]] = {}
    meminfo = gb10_meminfo()
    for fields in FIELD_SETS:
        answers[field_check_command(fields)] = fake.query_gpu(fields)
        answers[probe_command(fields)] = (probe_reply(fake, fields, meminfo), 0)
        reply = probe_reply(fake, fields, meminfo, host_files=True)
        answers[probe_command(fields, host_files=True)] = (reply, 0)

    async def respond(command: str) -> tuple[str, int]:
        return answers.get(command, ("sh: 1: unexpected command\n", 127))

    return respond


class _Loop:
    """Servers on an event loop of their own (a thread): their cost of producing megabytes
    is not charged to the client's loop under test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = __import__("threading").Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def run(self, coro: object) -> object:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def server_loop() -> Iterator[_Loop]:
    loop = _Loop()
    yield loop
    loop.stop()


@pytest.mark.parametrize("gpus", [50_000, 100])
async def test_a_node_listing_too_many_gpus_is_gpu_data_unavailable_on_its_row_only(
    files: ClientFiles, tmp_path: Path, server_loop: _Loop, gpus: int
) -> None:
    hostile_fake = FakeNvidiaSmi(many_gpus_csv(tmp_path / "many.csv", gpus))
    fakes = [hostile_fake, *(FakeNvidiaSmi() for _ in range(3))]
    servers: list[SshServerHandle] = []
    for fake in fakes:
        server = await server_loop.run(
            start_ssh_server(cached_responder(fake), authorized_client_keys=[files.key])
        )
        assert isinstance(server, SshServerHandle)
        files.trust(server.known_hosts_line())
        servers.append(server)
    sources = [
        ssh_source(files, node_config(f"spark-{i}", s.port), command_timeout_s=1.0)
        for i, s in enumerate(servers)
    ]
    try:
        rounds = [await asyncio.gather(*(s.sample() for s in sources)) for _ in range(3)]
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))
        for server in servers:
            await server_loop.run(server.close())

    for hostile, *healthy in rounds:
        # Healthy nodes are never late, never "unreachable", whatever their neighbour sends.
        assert [s.state for s in healthy] == [NodeState.OK] * 3, [s.message for s in healthy]
        # SSH answered: a warning (node.gpu_unavailable), not a node down (trial 34 item 14)
        assert hostile.state is NodeState.GPU_UNAVAILABLE and not hostile.gpus
        assert f"(at most {MAX_GPUS} are read)" in hostile.message, hostile.message
        assert len(hostile.raw) <= RAW_MAX
    if gpus > 1000:  # cut off at the output bound, long before 50,000 rows arrived
        assert rounds[-1][0].message.startswith("probe output over 256 KiB: nvidia-smi listed ")
    else:
        assert rounds[-1][0].message == f"nvidia-smi listed {gpus} GPUs (at most 64 are read)"
    assert sources[0].connects == 1  # a refused answer is not a broken connection


async def test_a_hung_nvidia_smi_on_a_working_connection_is_not_unreachable(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node()
    files.trust(server.known_hosts_line())
    source = ssh_source(files, node_config("spark-1", server.port), command_timeout_s=0.5)
    try:
        assert (await source.sample()).ok
        server.hang()
        hung = await source.sample()
        server.unhang()
        recovered = await source.sample()
    finally:
        await source.aclose()

    assert hung.state is NodeState.NOT_ANSWERING
    assert hung.message == "nvidia-smi not answering (probe timed out after 0.5 s)"
    assert node_down_finding(hung).severity is Severity.WARNING  # not a critical "unreachable"
    assert recovered.ok and source.connects == 1  # the connection was kept throughout
