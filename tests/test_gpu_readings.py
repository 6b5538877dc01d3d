"""GPU readings a node answered with that cannot be trusted: values outside any GPU's range,
and an nvidia-smi that fails while SSH works.

Nodes are asyncssh servers on loopback answering as :class:`FakeNvidiaSmi` from the GB10 case
(gb10-query-with-header.csv) with its numeric cells replaced, or with nvidia-smi's own failure
text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sparktop.alerts.gpu_state import GpuState
from sparktop.alerts.oneshot import judge_now
from sparktop.cluster import ClusterState
from sparktop.model import NA, NodeSample, NodeState
from sparktop.plan import Plan
from sparktop.sim.sshserver import SshServerHandle, start_ssh_server
from sparktop.ui import views
from tests.ssh_helpers import (
    GB10_CSV,
    ClientFiles,
    FakeNvidiaSmi,
    asyncssh_responder,
    client_files,
    node,
    ssh_source,
)

NUMERIC = "2509, 3003, 55, 41.37, 97"
"""The GB10 case's clocks.sm, clocks.max.sm, temperature.gpu, power.draw, utilization.gpu."""


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientFiles:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return client_files(tmp_path / "client")


@pytest.fixture
async def servers() -> AsyncIterator[list[SshServerHandle]]:
    started: list[SshServerHandle] = []
    yield started
    for server in started:
        await server.close()


async def _poll(
    files: ClientFiles, servers: list[SshServerHandle], fake: FakeNvidiaSmi
) -> NodeSample:
    server = await start_ssh_server(asyncssh_responder(fake), authorized_client_keys=[files.key])
    servers.append(server)
    files.trust(server.known_hosts_line())
    source = ssh_source(files, node("spark-1", server.port))
    try:
        sample = await source.sample()
    finally:
        await source.aclose()
    assert isinstance(sample, NodeSample)
    return sample


def _case(tmp_path: Path, numbers: str) -> Path:
    text = GB10_CSV.read_text()
    assert NUMERIC in text
    path = tmp_path / "case.csv"
    path.write_text(text.replace(NUMERIC, numbers))
    return path


def _judge(sample: NodeSample) -> tuple[list[str], dict[str, GpuState], str]:
    plan = Plan.from_layout("loopback", {})
    alerts, states = judge_now([sample], plan.alert_engine(hold_s=0.0), sample.time_s)
    state = ClusterState()
    state.apply(sample)
    rows = views.node_rows(state, {}, sample.time_s, views.ViewConfig.from_plan(plan))
    cell = views.node_states(rows)[sample.node][0]
    return [f"{a.rule}: {a.message}" for a in alerts], states.get(sample.node, {}), cell


@pytest.mark.parametrize(
    ("numbers", "refused"),
    [
        ("NaN, inf, -273, -5, 1e308", ("temperature_c", "power_w", "utilization_pct")),
        (
            "-2509, 0, 9999, 1e30, 500",
            ("sm_clock_mhz", "temperature_c", "power_w", "utilization_pct"),
        ),
    ],
    ids=["negative-and-huge", "hot-and-negative-clock"],
)
async def test_implausible_gpu_readings_are_refused_with_the_reason(
    tmp_path: Path,
    files: ClientFiles,
    servers: list[SshServerHandle],
    numbers: str,
    refused: tuple[str, ...],
) -> None:
    """The trial's two nodes: each value outside its range is n/a saying why, no rule reads it
    (9999 °C fired gpu.temperature), and the GPU's state says its data is implausible."""
    sample = await _poll(files, servers, FakeNvidiaSmi(_case(tmp_path, numbers)))
    gpu = sample.gpus[0]
    for attr in refused:
        value = getattr(gpu, attr)
        assert isinstance(value, NA), attr
        assert value.reason.startswith("implausible: ") and "not a plausible value" in value.reason
    assert len(gpu.implausible) == len(refused)
    alerts, states, cell = _judge(sample)
    assert alerts == []
    assert states == {gpu.key: GpuState.IMPLAUSIBLE}
    assert cell == "implausible"


async def test_temperature_reason_names_the_field_value_and_range(
    tmp_path: Path, files: ClientFiles, servers: list[SshServerHandle]
) -> None:
    sample = await _poll(
        files, servers, FakeNvidiaSmi(_case(tmp_path, "2509, 3003, -273, 41.37, 97"))
    )
    assert sample.gpus[0].temperature_c == NA(
        "implausible: temperature.gpu is -273 °C, not a plausible value (0–150 °C)"
    )


async def test_plausible_extremes_are_kept(
    tmp_path: Path, files: ClientFiles, servers: list[SshServerHandle]
) -> None:
    """A hot, idle, full-power GPU is a real reading: kept and judged as it is."""
    sample = await _poll(files, servers, FakeNvidiaSmi(_case(tmp_path, "0, 3003, 99, 0, 100")))
    gpu = sample.gpus[0]
    assert (gpu.sm_clock_mhz, gpu.temperature_c, gpu.power_w, gpu.utilization_pct) == (
        0,
        99,
        0,
        100,
    )
    assert gpu.implausible == ()
    alerts, _, _ = _judge(sample)
    assert any(a.startswith("gpu.temperature: 99 °C") for a in alerts)


E = "\x1b"
NVML_FAILURE = f"{E}]0;owned\x07{E}[2JFailed to initialize NVML: {E}[31mUnknown Error\x07\n"
"""The trial's node: nvidia-smi's NVML failure (exit 9) wrapped in a title-setting OSC and a
clear-screen CSI, the reason coloured and followed by a lone BEL."""


async def test_a_failing_nvidia_smi_is_gpu_data_unavailable_not_down(
    files: ClientFiles, servers: list[SshServerHandle]
) -> None:
    """SSH answered, so the node is up: its GPU data is unavailable with nvidia-smi's reason
    (a warning, as a driver mismatch is), not ``down`` with a critical alert. Whole escape
    sequences are dropped from the reason, the lone BEL is shown as printable() shows it."""
    sample = await _poll(files, servers, FakeNvidiaSmi(failure=(NVML_FAILURE, 9)))
    assert sample.state is NodeState.GPU_UNAVAILABLE
    assert sample.message == "NVML: Unknown Error\u2407"
    alerts, _, cell = _judge(sample)
    assert cell == "no GPU data"
    assert len(alerts) == 1
    assert alerts[0].startswith("node.gpu_unavailable: GPU data unavailable since ")
    assert alerts[0].endswith(": NVML: Unknown Error\u2407")
    plan = Plan.from_layout("loopback", {})
    found, _ = judge_now([sample], plan.alert_engine(hold_s=0.0), sample.time_s)
    assert [a.severity.value for a in found] == ["warning"]


async def test_a_gpu_name_with_escapes_cr_and_backspace_is_one_row(
    tmp_path: Path, files: ClientFiles, servers: list[SshServerHandle]
) -> None:
    """A CR inside the name cut the GPU row in two and the node read as unreadable output;
    the row is one row (lines end at \\n) and the name keeps nvidia-smi's text, for every
    output to show through printable() (``␛``, ``␍``, as tests/test_safe_text.py holds)."""
    name = f"GB10{E}[2J{E}[31mRED{E}]0;node-title\x07\u202eevil\r\x08"
    path = tmp_path / "name.csv"
    path.write_text(GB10_CSV.read_text().replace("NVIDIA GB10", name), newline="")
    sample = await _poll(files, servers, FakeNvidiaSmi(path))
    assert sample.state is NodeState.OK, sample.message
    assert [g.name for g in sample.gpus] == [name.removesuffix("\r\x08") + "\u240d\x08"]
    assert sample.gpus[0].temperature_c == 55
