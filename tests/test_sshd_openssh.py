"""SshSource and ``sparktop snapshot`` against OpenSSH's sshd on loopback.

Each node is a real ``sshd -D -e`` with its own host key and config on a free 127.0.0.1 port;
a fake ``nvidia-smi`` first on the session PATH answers from the nvidia-smi cases
(gb10-query-with-header.csv, gb10-thermal-slowdown.csv, gb10-hidden-low-power.csv,
driver-mismatch.txt) and ``/proc/meminfo`` is the machine's own. With ``-lms`` the fake
streams as nvidia-smi does, stalls on request, or misbehaves (refuses ``-lms``, prints junk).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import yaml

from sparktop.cli import main
from sparktop.inventory import NodeConfig
from sparktop.model import NodeSample, NodeState, Sample
from sparktop.poller import Poller
from sparktop.sim.sshserver import generate_key, public_key_line
from sparktop.sources.probe import FIELD_SETS
from sparktop.sources.ssh.source import SshSource
from tests.ssh_helpers import (
    GB10_CSV,
    LOW_POWER_CSV,
    MISMATCH_TXT,
    THERMAL_CSV,
    ClientFiles,
    FakeNvidiaSmi,
    Sshd,
    client_files,
    login_user,
    node,
    require_sshd,
    ssh_source,
)

pytestmark = pytest.mark.sshd

MakeSshd = Callable[..., Sshd]


def sshd_source(files: ClientFiles, node_config: NodeConfig, **settings: object) -> SshSource:
    """:func:`ssh_source` with a 4 s probe deadline: a real sshd probe (login, shell, the fake
    nvidia-smi) takes 0.7-1.6 s on a loaded 2-core machine, where 1 s failed under -n 2."""
    return ssh_source(files, node_config, **{"command_timeout_s": 4.0, **settings})


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return client_files(tmp_path / "client")


@pytest.fixture
def make_sshd(tmp_path: Path, files: ClientFiles) -> Iterator[MakeSshd]:
    require_sshd()
    started: list[Sshd] = []

    def make(fake: FakeNvidiaSmi | None = None, *, trust: bool = True) -> Sshd:
        daemon = Sshd(tmp_path / f"sshd-{len(started)}", files.key, fake or FakeNvidiaSmi())
        started.append(daemon)
        daemon.start()
        if trust:
            files.trust(daemon.known_hosts_line())
        return daemon

    yield make
    for daemon in started:
        daemon.stop()


def _accepted(daemon: Sshd) -> int:
    return sum("Accepted publickey" in line for line in daemon.log)


async def test_normal_poll_of_several_sshd_nodes(files: ClientFiles, make_sshd: MakeSshd) -> None:
    daemons = [make_sshd(FakeNvidiaSmi(csv)) for csv in (GB10_CSV, THERMAL_CSV, LOW_POWER_CSV)]
    sources = [sshd_source(files, node(f"spark-{i}", d.port)) for i, d in enumerate(daemons, 1)]
    try:
        await asyncio.gather(*(s.sample() for s in sources))
        samples = await asyncio.gather(*(s.sample() for s in sources))
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))

    assert [s.state for s in samples] == [NodeState.OK] * 3, [s.message for s in samples]
    clocks = [s.gpus[0].sm_clock_mhz for s in samples]
    assert clocks == [2509, 1833, 513]
    assert samples[1].gpus[0].clock_events == ("sw_thermal_slowdown",)
    for sample in samples:
        assert sample.memory.unified and sample.memory.gpu_held_mib == 19135
        assert isinstance(sample.memory.total_mib, float) and sample.memory.total_mib > 0
    for daemon, source in zip(daemons, sources, strict=True):
        assert source.connects == 1 and _accepted(daemon) == 1  # one connection, two polls


async def test_changed_host_key_is_refused_and_nothing_runs(
    files: ClientFiles, make_sshd: MakeSshd
) -> None:
    daemon = make_sshd(trust=False)
    files.trust(f"[127.0.0.1]:{daemon.port} {public_key_line(generate_key())}")
    source = sshd_source(files, node("spark-1", daemon.port))
    sample = await source.sample()
    await source.aclose()

    assert sample.state is NodeState.HOST_KEY
    assert f"ssh-keygen -R '[127.0.0.1]:{daemon.port}'" in sample.message
    assert f"ssh-keyscan -p {daemon.port} 127.0.0.1" in sample.message
    assert daemon.calls == [] and _accepted(daemon) == 0


async def test_hung_probe_on_one_sshd_node(files: ClientFiles, make_sshd: MakeSshd) -> None:
    daemons = [make_sshd() for _ in range(3)]
    daemons[1].hang()
    sources = [
        sshd_source(files, node(f"spark-{i}", d.port), command_timeout_s=3.0)
        for i, d in enumerate(daemons, 1)
    ]
    arrived: list[NodeSample] = []

    async def poll(index: int) -> None:
        arrived.append(await sources[index].sample())

    try:
        await asyncio.gather(*(poll(i) for i in range(3)))
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))

    assert {s.node for s in arrived[:2]} == {"spark-1", "spark-3"}
    assert arrived[-1].node == "spark-2"
    late = arrived[-1]
    assert late.state is NodeState.NOT_ANSWERING
    assert late.message == "nvidia-smi not answering (probe timed out after 3 s)"
    for sample in arrived[:2]:
        assert sample.ok and sample.latency_s is not None
        assert sample.latency_s < sources[1].probe_deadline_s


async def test_sshd_node_goes_away_and_comes_back(files: ClientFiles, make_sshd: MakeSshd) -> None:
    daemon = make_sshd()
    source = sshd_source(files, node("spark-1", daemon.port))
    try:
        assert (await source.sample()).ok
        daemon.stop()
        gone = await source.sample()
        daemon.start()
        back = await source.sample()
    finally:
        await source.aclose()

    assert gone.state is NodeState.UNREACHABLE
    assert gone.message == "connection refused", gone.message  # the cause; since: its own field
    assert back.ok and source.connects == 2


async def test_old_driver_field_set_over_sshd(files: ClientFiles, make_sshd: MakeSshd) -> None:
    daemon = make_sshd(FakeNvidiaSmi(THERMAL_CSV, driver="old"))
    source = sshd_source(files, node("spark-1", daemon.port))
    sample = await source.sample()
    await source.aclose()

    assert sample.ok, sample.message
    assert source.fields == FIELD_SETS[2]
    assert sample.gpus[0].slowdowns == ("sw_thermal_slowdown",)
    refused = [call for call in daemon.calls if "clocks_event_reasons" in call]
    assert len(refused) == 2  # the two newer field sets, each tried once


async def test_driver_mismatch_over_sshd(files: ClientFiles, make_sshd: MakeSshd) -> None:
    assert MISMATCH_TXT.name == "driver-mismatch.txt"
    broken = make_sshd(FakeNvidiaSmi(driver="mismatch"))
    healthy = make_sshd()
    sources = [
        sshd_source(files, node("spark-1", broken.port)),
        sshd_source(files, node("spark-2", healthy.port)),
    ]
    try:
        bad, good = await asyncio.gather(*(s.sample() for s in sources))
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))
    assert bad.state is NodeState.DRIVER_MISMATCH
    assert bad.message == "driver/library mismatch (reboot or reload the driver)"
    assert good.ok


async def test_unloaded_driver_over_sshd_reads_as_no_driver(
    files: ClientFiles, make_sshd: MakeSshd
) -> None:
    """nvidia-smi's exact words for an unloaded driver (exit 9), through a real shell and the
    monitor's polling (field check, one-shot probe, stream attempts): ``no NVIDIA driver``
    on every poll, never ``unreadable output``."""
    daemon = make_sshd(FakeNvidiaSmi(driver="unloaded"))
    source = sshd_source(files, node("spark-1", daemon.port), command_timeout_s=5)
    arrived: list[NodeSample] = []
    enough = asyncio.Event()

    def on_sample(sample: Sample) -> None:
        assert isinstance(sample, NodeSample)
        arrived.append(sample)
        if len(arrived) >= 4:
            enough.set()

    poller = Poller([source], interval_s=0.25, on_sample=on_sample)
    poller.start()
    try:
        await asyncio.wait_for(enough.wait(), 30)
    finally:
        await poller.aclose()
    assert {(s.state, s.message) for s in arrived} == {
        (NodeState.NO_DRIVER, "cannot reach the NVIDIA driver (is it loaded?)")
    }


async def test_proxyjump_through_sshd(files: ClientFiles, make_sshd: MakeSshd) -> None:
    jump = make_sshd()
    target = make_sshd()
    files.config.write_text(
        f"Host jump\n  HostName 127.0.0.1\n  Port {jump.port}\n"
        f"Host spark-behind\n  HostName 127.0.0.1\n  Port {target.port}\n  ProxyJump jump\n"
        f"Host *\n  User {login_user()}\n  IdentityFile {files.identity_file}\n"
        f"  UserKnownHostsFile {files.known_hosts}\n"
    )
    behind = node("spark-1", 22).model_copy(update={"host": "spark-behind", "port": None})
    source = sshd_source(files, behind, identity_file=None, known_hosts=None, user=None)
    sample = await source.sample()
    await source.aclose()
    assert sample.ok, sample.message
    assert jump.calls == [] and target.calls != []


def test_snapshot_json_four_sshd_nodes_one_hung(
    tmp_path: Path, files: ClientFiles, make_sshd: MakeSshd, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's "done when": 4 sshd nodes, one hung → failure exit, hung node marked with
    its reason, every other GPU's readings filled in."""
    cases = (GB10_CSV, THERMAL_CSV, LOW_POWER_CSV, GB10_CSV)
    daemons = [make_sshd(FakeNvidiaSmi(csv)) for csv in cases]
    daemons[3].hang()
    inventory = {
        "cluster": "loopback-4x",
        "ssh": {
            "user": login_user(),
            "identity_file": str(files.identity_file),
            "known_hosts": str(files.known_hosts),
            "config": str(files.config),
            "connect_timeout_s": 5,
            # Long enough for a healthy real sshd probe on a loaded machine (0.7-1.6 s seen).
            "command_timeout_s": 3,
        },
        "nodes": [
            {"name": f"spark-{i}", "host": "127.0.0.1", "port": d.port}
            for i, d in enumerate(daemons, 1)
        ],
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(inventory))

    status = main(["snapshot", "--inventory", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)

    # Exit 1 when a node did not answer (3 is kept for critical conditions in the data).
    assert status == 1 and doc["complete"] is False
    assert doc["critical"] is any(a["severity"] == "critical" for a in doc["alerts"])
    nodes = {n["node"]: n for n in doc["nodes"]}
    hung = nodes.pop("spark-4")
    assert hung["state"] == "nvidia-smi not answering" and hung["gpus"] == []
    assert hung["message"].endswith("(probe timed out after 3 s)")
    assert hung["since"] is not None
    expected_reasons = {"spark-1": [], "spark-2": ["sw_thermal_slowdown"], "spark-3": []}
    # The nodes that answered carry the monitor's state: spark-2 slowed down, spark-3 in the
    # hidden low-power pattern.
    states = {"spark-1": "ok", "spark-2": "throttled", "spark-3": "low-power"}
    for name, entry in nodes.items():
        assert entry["state"] == states[name], entry["message"]
        assert entry["memory"]["unified"] is True
        assert entry["memory"]["total_mib"] > 0 and entry["memory"]["used_mib"] > 0
        assert entry["memory"]["gpu_held_mib"] == 19135
        (gpu,) = entry["gpus"]
        for key in ("sm_clock_mhz", "max_sm_clock_mhz", "temperature_c", "power_w"):
            assert isinstance(gpu[key], float), (name, key)
        assert isinstance(gpu["utilization_pct"], float)
        assert gpu["clock_event_mask"] is not None
        assert gpu["clock_events"] == expected_reasons[name]
        assert set(gpu["missing"]) == {"memory_used_mib", "memory_total_mib"}


# -- the streaming probe over sshd ---------------------------------------------------------------


def _streams(daemon: Sshd) -> list[str]:
    return [call for call in daemon.calls if "-lms" in call]


def _node_processes(daemon: Sshd) -> list[str]:
    """Command lines of every live process the daemon's sessions run (fake nvidia-smi…)."""
    assert daemon.proc is not None
    out = []
    for child in psutil.Process(daemon.proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            out.append(" ".join(child.cmdline()))
    return out


async def test_monitor_streams_over_sshd_by_default(
    files: ClientFiles, make_sshd: MakeSshd
) -> None:
    daemon = make_sshd()
    source = sshd_source(files, node("spark-1", daemon.port), command_timeout_s=5)
    arrived: list[NodeSample] = []
    enough = asyncio.Event()

    def on_sample(sample: Sample) -> None:
        assert isinstance(sample, NodeSample)
        arrived.append(sample)
        if sum(s.probe.startswith("stream") for s in arrived) >= 8:
            enough.set()

    poller = Poller([source], interval_s=0.25, on_sample=on_sample)
    poller.start()
    try:
        await asyncio.wait_for(enough.wait(), 30)
        running = _node_processes(daemon)
    finally:
        await poller.aclose()
    streamed = [s for s in arrived if s.probe == "stream (nvidia-smi -lms 250)"]
    assert len(streamed) >= 8 and all(s.ok for s in arrived)
    assert streamed[-1].gpus[0].sm_clock_mhz == 2509
    assert streamed[-1].memory.gpu_held_mib == 19135  # the slow tier, beside the stream
    (stream,) = _streams(daemon)
    assert stream.endswith("--format=csv,nounits -lms 250")
    # One nvidia-smi stays on the node (no shell left behind it: the command execs it).
    assert sum("nvidia-smi" in cmd for cmd in running) == 1, running
    times = [s.time_s for s in streamed]
    assert all(b > a for a, b in itertools.pairwise(times))


async def test_sshd_stream_stall_goes_stale_and_restarts(
    files: ClientFiles, make_sshd: MakeSshd
) -> None:
    daemon = make_sshd()
    source = sshd_source(files, node("spark-1", daemon.port), command_timeout_s=5)
    source.follow_interval(0.25)
    try:
        await source.sample()
        streamed = await source.sample()
        daemon.stall()
        stale = await source.sample()
        daemon.unstall()
        after = [await source.sample() for _ in range(3)]
    finally:
        await source.aclose()
    assert streamed.probe == "stream (nvidia-smi -lms 250)"
    assert stale.ok and stale.probe == "one-shot while the stream restarts (no output for 1.0 s)"
    assert after[-1].ok and after[-1].probe == "stream (nvidia-smi -lms 250)"
    assert len(_streams(daemon)) == 2


@pytest.mark.parametrize(
    ("lms", "reason"),
    [
        ("unsupported", "one-shot: the stream nvidia-smi -lms exited 2 before its first row: "),
        ("garbage", "one-shot: the stream printed what is not nvidia-smi CSV (a row of 2 cells"),
    ],
)
async def test_sshd_node_without_a_working_lms_stays_one_shot(
    files: ClientFiles, make_sshd: MakeSshd, lms: str, reason: str
) -> None:
    daemon = make_sshd()
    daemon.set_lms(lms)
    source = sshd_source(files, node("spark-1", daemon.port), command_timeout_s=5)
    source.follow_interval(0.25)
    try:
        samples = [await source.sample() for _ in range(6)]
    finally:
        await source.aclose()
    assert all(s.ok for s in samples), [s.message for s in samples]
    assert samples[-1].probe.startswith(reason), samples[-1].probe
    assert samples[-1].gpus[0].sm_clock_mhz == 2509
    assert len(_streams(daemon)) == 1  # tried once on this connection, then one-shot
