"""SshSource against real asyncssh servers on loopback answering with the nvidia-smi cases.

Cases used: gb10-query-with-header.csv, gb10-thermal-slowdown.csv, gb10-hidden-low-power.csv
and driver-mismatch.txt (via tests/ssh_helpers.py, which also reads the GB10 meminfo and
compute-apps fixtures).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from sparktop.model import NodeSample, NodeState, recheck_text
from sparktop.poller import Poller
from sparktop.sim.sshserver import SshServerHandle, generate_key, public_key_line, start_ssh_server
from sparktop.sources.probe import FIELD_SETS, field_check_command, probe_command
from sparktop.sources.ssh.source import BACKOFF_CAP_S
from tests.ssh_helpers import (
    GB10_CSV,
    LOW_POWER_CSV,
    MISMATCH_TXT,
    THERMAL_CSV,
    ClientFiles,
    FakeNvidiaSmi,
    asyncssh_responder,
    client_files,
    login_user,
    node,
    ssh_source,
)

StartNode = Callable[..., Awaitable[SshServerHandle]]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)  # no agent: only the test's key
    return client_files(tmp_path / "client")


@pytest.fixture
async def start_node(files: ClientFiles) -> AsyncIterator[StartNode]:
    """Start an asyncssh node answering as ``FakeNvidiaSmi(csv, driver)``; trusted unless told."""
    servers: list[SshServerHandle] = []

    async def start(
        fake: FakeNvidiaSmi | None = None, *, trust: bool = True, **kwargs: object
    ) -> SshServerHandle:
        kwargs.setdefault("authorized_client_keys", [files.key])
        server = await start_ssh_server(
            asyncssh_responder(fake or FakeNvidiaSmi()),
            **kwargs,  # type: ignore[arg-type]
        )
        servers.append(server)
        if trust:
            files.trust(server.known_hosts_line())
        return server

    yield start
    for server in servers:
        await server.close()


async def test_normal_poll_of_several_nodes_reuses_one_connection(
    files: ClientFiles, start_node: StartNode
) -> None:
    csvs = (GB10_CSV, THERMAL_CSV, LOW_POWER_CSV)
    servers = [await start_node(FakeNvidiaSmi(csv)) for csv in csvs]
    sources = [ssh_source(files, node(f"spark-{i}", s.port)) for i, s in enumerate(servers, 1)]
    try:
        first = await asyncio.gather(*(s.sample() for s in sources))
        second = await asyncio.gather(*(s.sample() for s in sources))
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))

    assert [s.state for s in first + second] == [NodeState.OK] * 6
    normal, thermal, low_power = second
    gpu = normal.gpus[0]
    assert (gpu.sm_clock_mhz, gpu.max_sm_clock_mhz, gpu.temperature_c) == (2509, 3003, 55)
    assert (gpu.power_w, gpu.utilization_pct, gpu.pstate) == (41.37, 97, "P0")
    assert gpu.clock_events == ()
    assert normal.memory.unified and normal.memory.gpu_held_mib == 19135
    assert normal.memory.total_mib == pytest.approx(127600748 / 1024)
    assert thermal.gpus[0].slowdowns == ("sw_thermal_slowdown",)
    assert low_power.gpus[0].sm_clock_mhz == 513 and low_power.gpus[0].clock_event_mask == 0
    assert normal.latency_s is not None and normal.since_s is None

    full = FIELD_SETS[0]
    for server, source in zip(servers, sources, strict=True):
        assert server.connections_accepted == 1 and source.connects == 1
        # One field check per connection, then one batched probe per poll (the first of a
        # connection reads the host files too: the slow tier).
        assert server.commands == [
            field_check_command(full),
            probe_command(full, host_files=True),
            probe_command(full),
        ]


async def test_changed_host_key_is_refused_before_any_command(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node(trust=False)
    files.trust(f"[127.0.0.1]:{server.port} {public_key_line(generate_key())}")
    source = ssh_source(files, node("spark-1", server.port))
    sample = await source.sample()
    await source.aclose()

    assert sample.state is NodeState.HOST_KEY
    assert f"host key for [127.0.0.1]:{server.port} does not match" in sample.message
    assert f"ssh-keygen -R '[127.0.0.1]:{server.port}'" in sample.message
    assert server.commands == []


async def test_unknown_host_key_names_the_keyscan_command(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node(trust=False)
    source = ssh_source(files, node("spark-1", server.port))
    sample = await source.sample()
    await source.aclose()

    assert sample.state is NodeState.HOST_KEY
    assert f"ssh-keyscan -p {server.port} 127.0.0.1 >> " in sample.message
    assert "is not in" in sample.message
    assert server.commands == []


async def test_accept_new_records_an_unknown_key_but_never_a_changed_one(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node(trust=False)
    lax = node("spark-1", server.port, strict_host_key_checking=False)
    source = ssh_source(files, lax)
    assert (await source.sample()).ok
    await source.aclose()
    assert files.known_hosts.read_text() == server.known_hosts_line() + "\n"

    impostor = await start_node(trust=False)
    files.known_hosts.write_text(f"[127.0.0.1]:{impostor.port} {public_key_line(generate_key())}\n")
    source = ssh_source(files, node("spark-2", impostor.port, strict_host_key_checking=False))
    sample = await source.sample()
    await source.aclose()
    assert sample.state is NodeState.HOST_KEY and impostor.commands == []


@pytest.mark.parametrize(
    ("missing", "role"),
    [("identity_file", "identity file"), ("known_hosts", "known_hosts file"),
     ("config", "SSH config file")],
)  # fmt: skip
async def test_a_missing_local_file_is_named_not_a_bare_no_such_file(
    files: ClientFiles, start_node: StartNode, missing: str, role: str
) -> None:
    """What a monitor shows when a simulator that wrote its keys is killed under it."""
    server = await start_node()
    source = ssh_source(files, node("spark-1", server.port))
    assert (await source.sample()).ok
    await source._drop()  # the next poll connects again and reads the files
    path = getattr(files, missing)
    path.unlink()
    sample = await source.sample()
    await source.aclose()
    assert sample.state is NodeState.ERROR
    assert sample.message == f"{role} {path} not found"


async def test_accept_new_creates_a_missing_known_hosts_file(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node(trust=False)
    files.known_hosts.unlink()
    source = ssh_source(files, node("spark-1", server.port, strict_host_key_checking=False))
    assert (await source.sample()).ok
    await source.aclose()
    assert files.known_hosts.read_text() == server.known_hosts_line() + "\n"


async def test_unknown_client_key_is_an_auth_failure(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node(authorized_client_keys=[generate_key()])
    source = ssh_source(files, node("spark-1", server.port))
    sample = await source.sample()
    await source.aclose()
    assert sample.state is NodeState.AUTH
    assert "identity_file" in sample.message and server.commands == []


async def test_encrypted_identity_without_agent_is_an_auth_failure(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node()
    path, secret = str(files.identity_file), "not-in-any-message"
    files.key.write_private_key(path, format_name="pkcs8-pem", passphrase=secret)
    source = ssh_source(files, node("spark-1", server.port))
    sample = await source.sample()
    await source.aclose()
    assert sample.state is NodeState.AUTH and "ssh-agent" in sample.message
    assert "not-in-any-message" not in sample.message and server.commands == []


@pytest.fixture
def agent(files: ClientFiles, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """OpenSSH's ssh-agent holding the client key; SSH_AUTH_SOCK points at it."""
    if shutil.which("ssh-agent") is None or shutil.which("ssh-add") is None:
        pytest.skip("ssh-agent not installed (Debian: openssh-client)")
    sock = os.path.join(tempfile.mkdtemp(prefix="sparktop-agent-"), "agent.sock")
    proc = subprocess.Popen(
        ["ssh-agent", "-D", "-a", sock], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        assert "SSH_AUTH_SOCK" in proc.stdout.readline()  # printed once the socket listens
        env = {**os.environ, "SSH_AUTH_SOCK": sock}
        subprocess.run(["ssh-add", "-q", str(files.identity_file)], env=env, check=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        yield sock
    finally:
        proc.terminate()
        proc.wait(5)
        shutil.rmtree(os.path.dirname(sock), ignore_errors=True)


async def test_agent_supplies_the_key_as_with_openssh(
    files: ClientFiles, start_node: StartNode, agent: str
) -> None:
    server = await start_node()
    # The identity file on disk is encrypted: the agent's copy of the key is used instead.
    files.key.write_private_key(str(files.identity_file), format_name="pkcs8-pem", passphrase="x")
    with_file = ssh_source(files, node("spark-1", server.port))
    agent_only = ssh_source(files, node("spark-2", server.port), identity_file=None)
    try:
        samples = [await with_file.sample(), await agent_only.sample()]
    finally:
        await with_file.aclose()
        await agent_only.aclose()
    assert [s.state for s in samples] == [NodeState.OK, NodeState.OK], [s.message for s in samples]


async def test_hung_probe_does_not_delay_the_other_nodes(
    files: ClientFiles, start_node: StartNode
) -> None:
    servers = [await start_node(FakeNvidiaSmi(csv)) for csv in (GB10_CSV, THERMAL_CSV, GB10_CSV)]
    servers[2].hang()
    sources = [ssh_source(files, node(f"spark-{i}", s.port)) for i, s in enumerate(servers, 1)]
    hung = sources[2]
    arrived: list[NodeSample] = []

    async def poll(index: int) -> None:
        arrived.append(await sources[index].sample())

    try:
        tasks = [asyncio.create_task(poll(i)) for i in range(3)]
        # A second sample() while the hung probe runs joins it instead of starting another.
        joined = asyncio.create_task(hung.sample())
        await asyncio.gather(*tasks)
        assert (await joined) is arrived[-1]
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))

    assert {s.node for s in arrived[:2]} == {"spark-1", "spark-2"}  # before the hung one
    late = arrived[2]
    # sshd ran the command and nvidia-smi hung: the node is there, not "unreachable".
    assert late.node == "spark-3" and late.state is NodeState.NOT_ANSWERING
    assert late.message == "nvidia-smi not answering (probe timed out after 1 s)"
    for sample in arrived[:2]:
        assert sample.ok and sample.latency_s is not None
        assert sample.latency_s < hung.probe_deadline_s
        assert sample.time_s < late.time_s
    assert servers[2].commands == [field_check_command(FIELD_SETS[0])]  # one, never two


async def test_hung_node_keeps_every_other_node_on_schedule(
    files: ClientFiles, start_node: StartNode
) -> None:
    servers = [await start_node() for _ in range(3)]
    servers[0].hang()
    # The hung node's deadline (30 s) is far beyond what this test waits for.
    sources = [ssh_source(files, node("spark-1", servers[0].port), command_timeout_s=30.0)]
    sources += [ssh_source(files, node(f"spark-{i}", servers[i - 1].port)) for i in (2, 3)]
    counts = {s.name: 0 for s in sources}
    enough = asyncio.Event()

    def on_sample(sample: object) -> None:
        assert isinstance(sample, NodeSample)
        counts[sample.node] += 1
        if counts["spark-2"] >= 3 and counts["spark-3"] >= 3:
            enough.set()

    poller = Poller(sources, interval_s=0.2, on_sample=on_sample)
    poller.start()
    try:
        await asyncio.wait_for(enough.wait(), 20)
    finally:
        await poller.aclose()
    assert counts["spark-1"] == 0
    assert len(servers[0].commands) == 1  # still the first command: never a second in flight


async def test_node_that_goes_away_and_comes_back_reconnects(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node()
    source = ssh_source(files, node("spark-1", server.port))
    try:
        assert (await source.sample()).ok
        await server.go_away()
        gone = await source.sample()
        still_gone = await source.sample()
        await server.come_back()
        back = await source.sample()
    finally:
        await source.aclose()

    assert gone.state is NodeState.UNREACHABLE
    assert gone.message == "connection refused"  # the cause; since_s says since when
    assert gone.since_s is not None and gone.since_s <= gone.time_s
    assert still_gone.since_s == gone.since_s and still_gone.message == gone.message
    assert back.ok and back.since_s is None
    assert source.connects == 2 and server.connections_accepted == 2


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_backoff_is_capped_jittered_and_skips_the_network(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node(trust=False)  # every attempt is refused at the host key
    clock = FakeClock()
    inventory_source = ssh_source(files, node("spark-1", server.port))
    source = type(inventory_source)(
        inventory_source.node,
        inventory_source.settings,
        backoff_base_s=1.0,
        backoff_cap_s=4.0,
        clock=clock,
    )
    try:
        delays = []
        first = await source.sample()
        for _ in range(5):
            delays.append(source.retry_in_s)
            again = await source.sample()  # still backing off: no new connection
            assert again.since_s == first.since_s and again.message == first.message
            assert server.connections_accepted == len(delays)
            clock.now += source.retry_in_s
            await source.sample()  # the retry
    finally:
        await source.aclose()
    expected = [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]
    for delay, ceiling in zip(delays, expected, strict=False):
        assert ceiling / 2 <= delay <= ceiling


async def test_a_failure_not_rechecked_says_when_it_was_checked_and_the_next_try(
    files: ClientFiles, start_node: StartNode
) -> None:
    """Issue 20: while backing off the source repeats its last failure; the repeat must say
    it was not re-checked (``checked_s``) and when the next try is (``retry_s``), and the
    node that came back is read at that try."""
    server = await start_node()
    clock = FakeClock()
    base = ssh_source(files, node("spark-1", server.port))
    source = type(base)(base.node, base.settings, clock=clock, stream=False)
    try:
        assert (await source.sample()).ok
        await server.go_away()
        gone = await source.sample()  # a real attempt: refused
        clock.now += source.retry_in_s / 2
        wait_s = source.retry_in_s
        repeated = await source.sample()  # backing off: no attempt
        attempts = server.connections_accepted
        await server.come_back()
        clock.now += source.retry_in_s
        back = await source.sample()
    finally:
        await source.aclose()

    assert gone.state is NodeState.UNREACHABLE and gone.checked_s is None
    assert gone.retry_s is not None and gone.time_s < gone.retry_s <= gone.time_s + 1.0
    assert repeated.state is NodeState.UNREACHABLE and repeated.message == gone.message
    assert repeated.checked_s == gone.time_s and repeated.time_s >= gone.time_s
    assert repeated.retry_s == pytest.approx(repeated.time_s + wait_s, abs=0.05)
    assert recheck_text(repeated).startswith("checked ")
    assert attempts == 1  # the repeat never touched the network
    assert back.ok and back.checked_s is None and back.retry_s is None


async def test_a_node_that_came_back_is_tried_within_the_default_cap(
    files: ClientFiles, start_node: StartNode
) -> None:
    """The default backoff is capped at BACKOFF_CAP_S (10 s, was 30 s): after a long outage a
    node that is back is seen within 10 s, not half a minute."""
    server = await start_node()
    clock = FakeClock()
    base = ssh_source(files, node("spark-1", server.port))
    source = type(base)(base.node, base.settings, clock=clock, stream=False)
    try:
        await server.go_away()
        delays = []
        for _ in range(8):  # 1, 2, 4, 8, then the cap
            failed = await source.sample()
            assert failed.state is NodeState.UNREACHABLE and failed.checked_s is None
            delays.append(source.retry_in_s)
            clock.now += source.retry_in_s
        await server.come_back()
        back = await source.sample()
    finally:
        await source.aclose()
    assert BACKOFF_CAP_S == 10.0
    assert max(delays) <= BACKOFF_CAP_S and delays[-1] >= BACKOFF_CAP_S / 2
    assert back.ok


@pytest.mark.parametrize(
    ("driver", "fields"),
    [("current", FIELD_SETS[0]), ("no-counters", FIELD_SETS[1]), ("old", FIELD_SETS[2])],
)
async def test_field_set_falls_back_for_older_drivers(
    files: ClientFiles, start_node: StartNode, driver: str, fields: tuple[str, ...]
) -> None:
    server = await start_node(FakeNvidiaSmi(THERMAL_CSV, driver=driver))
    source = ssh_source(files, node("spark-1", server.port))
    sample = await source.sample()
    await source.aclose()

    assert sample.ok, sample.message
    assert source.fields == fields
    assert server.commands[-1] == probe_command(fields, host_files=True)
    gpu = sample.gpus[0]
    assert gpu.slowdowns == ("sw_thermal_slowdown",)  # read from the old spelling too
    assert gpu.sm_clock_mhz == 1833
    counters_known = driver == "current"
    assert (gpu.counters.sw_thermal_us == 0) is counters_known


async def test_driver_mismatch_output_is_that_nodes_state(
    files: ClientFiles, start_node: StartNode
) -> None:
    assert MISMATCH_TXT.name == "driver-mismatch.txt"
    fake = FakeNvidiaSmi(driver="mismatch")
    broken = await start_node(fake)
    healthy = await start_node()
    sources = [
        ssh_source(files, node("spark-1", broken.port)),
        ssh_source(files, node("spark-2", healthy.port)),
    ]
    try:
        first, other = await asyncio.gather(*(s.sample() for s in sources))
        second = await sources[0].sample()
        fake.driver = "current"  # the operator reloaded the driver
        fixed = await sources[0].sample()
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))

    assert first.state is NodeState.DRIVER_MISMATCH
    assert first.message == "driver/library mismatch (reboot or reload the driver)"
    assert second.state is NodeState.DRIVER_MISMATCH and second.since_s == first.since_s
    assert other.ok
    assert fixed.ok and fixed.since_s is None and sources[0].fields == FIELD_SETS[0]
    assert sources[0].connects == 1  # the connection was fine all along


async def test_a_driver_that_is_not_loaded_is_a_driver_problem_not_unreadable_output(
    files: ClientFiles, start_node: StartNode
) -> None:
    """nvidia-smi's own words (exit 9) for an unloaded driver, from the field check and the
    probe, read as ``no NVIDIA driver``, never ``unreadable output``."""
    fake = FakeNvidiaSmi(driver="unloaded")
    server = await start_node(fake)
    source = ssh_source(files, node("spark-1", server.port))
    try:
        first = await source.sample()
        second = await source.sample()
        fake.driver = "current"  # the operator loaded the driver
        fixed = await source.sample()
    finally:
        await source.aclose()
    for sample in (first, second):
        assert sample.state is NodeState.NO_DRIVER
        assert sample.message == "cannot reach the NVIDIA driver (is it loaded?)"
    assert "couldn't communicate with the NVIDIA driver" in first.raw
    assert fixed.ok and source.connects == 1


async def test_garbled_output_is_a_node_state_not_a_crash(
    files: ClientFiles, start_node: StartNode
) -> None:
    async def junk(command: str) -> tuple[str, int]:
        return "\x1b[2J\ufffd\ufffd segfault at 0 ip 00007f\n", 0

    server = await start_ssh_server(junk, authorized_client_keys=[files.key])
    files.trust(server.known_hosts_line())
    source = ssh_source(files, node("spark-1", server.port))
    try:
        sample = await source.sample()
    finally:
        await source.aclose()
        await server.close()
    assert sample.state is NodeState.GARBLED and sample.since_s is not None


async def test_ssh_config_alias_supplies_host_port_user_identity_and_known_hosts(
    files: ClientFiles, start_node: StartNode
) -> None:
    server = await start_node()
    files.config.write_text(
        "Host spark-alias\n"
        "  HostName 127.0.0.1\n"
        f"  Port {server.port}\n"
        f"  User {login_user()}\n"
        f"  IdentityFile {files.identity_file}\n"
        f"  UserKnownHostsFile {files.known_hosts}\n"
    )
    aliased = node("spark-1", server.port).model_copy(update={"host": "spark-alias", "port": None})
    source = ssh_source(files, aliased, identity_file=None, known_hosts=None, user=None)
    sample = await source.sample()
    await source.aclose()
    assert sample.ok, sample.message


async def test_proxyjump_from_ssh_config(files: ClientFiles, start_node: StartNode) -> None:
    jump = await start_node(allow_tcp_forwarding=True)
    target = await start_node()
    files.config.write_text(
        "Host jump\n"
        "  HostName 127.0.0.1\n"
        f"  Port {jump.port}\n"
        "Host spark-behind\n"
        "  HostName 127.0.0.1\n"
        f"  Port {target.port}\n"
        "  ProxyJump jump\n"
        "Host *\n"
        f"  User {login_user()}\n"
        f"  IdentityFile {files.identity_file}\n"
        f"  UserKnownHostsFile {files.known_hosts}\n"
    )
    behind = node("spark-1", 22).model_copy(update={"host": "spark-behind", "port": None})
    source = ssh_source(files, behind, identity_file=None, known_hosts=None, user=None)
    sample = await source.sample()
    await source.aclose()
    assert sample.ok, sample.message
    assert jump.connections_accepted == 1 and jump.commands == []
    assert target.commands[-1] == probe_command(FIELD_SETS[0], host_files=True)


@pytest.mark.parametrize("driver", ["current", "old"])
async def test_driver_version_is_read_with_the_gpu_fields(
    files: ClientFiles, start_node: StartNode, driver: str
) -> None:
    """``driver ·`` in the details is filled for SSH nodes: the fixed field set asks for
    ``driver_version`` (in every fallback set, so old drivers report it too)."""
    fake = FakeNvidiaSmi(THERMAL_CSV, driver=driver)
    server = await start_node(fake)
    source = ssh_source(files, node("spark-1", server.port))
    try:
        sample = await source.sample()
    finally:
        await source.aclose()
    assert sample.ok, sample.message
    assert sample.driver_version == fake.driver_version
    assert source.fields is not None and "driver_version" in source.fields


async def test_a_driver_changing_under_the_connection_never_reads_as_down(
    files: ClientFiles, start_node: StartNode
) -> None:
    """The field set falls back within the poll that finds it refused: the node stays ok
    (it was shown ``down`` while the older set was learnt on the following polls)."""
    fake = FakeNvidiaSmi(THERMAL_CSV)
    server = await start_node(fake)
    source = ssh_source(files, node("spark-1", server.port))
    try:
        before = await source.sample()
        fake.driver = "old"  # e.g. the driver was downgraded; the connection stays
        after = [await source.sample() for _ in range(3)]
    finally:
        await source.aclose()
    assert before.ok and source.fields == FIELD_SETS[2]
    assert [(s.state, s.message) for s in after] == [(NodeState.OK, "")] * 3
    assert after[0].gpus[0].slowdowns == ("sw_thermal_slowdown",)
    assert source.connects == 1


async def test_the_inventory_can_turn_the_stream_off_globally_or_per_node(
    files: ClientFiles, start_node: StartNode
) -> None:
    """``probe: oneshot`` under ``ssh:`` or on a node: that node never starts ``-lms`` and
    says why it is read one-shot; another value is refused with its line."""
    from sparktop.errors import UserError
    from sparktop.inventory import parse_inventory
    from sparktop.sources.build import build_node_sources
    from sparktop.sources.ssh.source import SshSource

    server = await start_node(FakeNvidiaSmi(GB10_CSV))
    text = (
        f"ssh: {{user: {login_user()}, identity_file: {files.identity_file}, "
        f"known_hosts: {files.known_hosts}, config: {files.config}, probe: oneshot}}\n"
        "nodes:\n"
        f"  - {{name: a, host: 127.0.0.1, port: {server.port}}}\n"
        f"  - {{name: b, host: 127.0.0.1, port: {server.port}, probe: stream}}\n"
    )
    inventory = parse_inventory(text, "c.yaml")
    a, b = build_node_sources(inventory)
    assert isinstance(a, SshSource) and isinstance(b, SshSource)
    assert a.stream is None and b.stream is not None
    a.follow_interval(0.5)
    try:
        samples = [await a.sample() for _ in range(3)]
    finally:
        await a.aclose()
        await b.aclose()
    assert all(s.ok for s in samples)
    assert samples[-1].probe == "one-shot (probe: oneshot in the inventory)"
    assert not any("-lms" in c for c in server.commands)
    with pytest.raises(
        UserError, match=r"c\.yaml:4:52: nodes\[1\]\.probe: input should be 'stream' or 'oneshot'"
    ):
        parse_inventory(text.replace("probe: stream", "probe: sometimes"), "c.yaml")
