"""Recordings keep the host readings: fabric ports, spark_hwmon channels, processes and the
memory-pressure fields round-trip through the recording codec, NA reasons included."""

from __future__ import annotations

import dataclasses
import inspect
import json
from types import MappingProxyType
from typing import Any

from sparktop import hostmodel
from sparktop.hostmodel import FabricPort, FabricReading, GpuProcess, PowerTelemetry
from sparktop.model import NA, NodeMemory, NodeSample
from sparktop.record.codec import decode, encode

PORT = FabricPort(
    "rocep1s0f0",
    1,
    state="1: DOWN",
    phys_state="3: Disabled",
    rate="40 Gb/sec (4X QDR)",
    rate_gbps=40.0,
    link_layer="Ethernet",
    netdev="enp1s0f0np0",
    xmit_bytes=6.7e11,
    rcv_bytes=NA("no counters/port_rcv_data"),
    tx_gbps=0.0,
    rx_gbps=NA("counter reset"),
    errors=MappingProxyType({"symbol_error": 120.0, "link_downed": 1.0}),
    errors_grown=MappingProxyType({"symbol_error": 37.0}),
    temperature_c=62.0,
)
FABRIC = FabricReading(ports=(PORT,), missing="", uptime_s=86_400.5)
POWER = PowerTelemetry(
    driver="spbm",
    power_w=MappingProxyType({"pl1": 29.4, "gpu": 16.5}),
    cap_w=MappingProxyType({"pl1": 30.0}),
    energy_j=MappingProxyType({"gpu": 559.0}),
    prochot=0.0,
    pl_level=NA("no pl_level file"),
)
PROCESS = GpuProcess(41_000, "python3", "GPU-1", 103_426.0, NA("memory total unknown"))
NODE = NodeSample(
    node="spark-2",
    time_s=1_767_000_000.0,
    memory=NodeMemory(
        124_610.0,
        123_000.0,
        available_mib=1_400.0,
        swap_total_mib=16_384.0,
        swap_used_mib=5_800.0,
        psi_some_pct=36.6,
        psi_full_pct=NA("no 'full' line in PSI"),
    ),
    fabric=FABRIC,
    power=POWER,
    processes=(PROCESS,),
)


def roundtrip(value: Any) -> Any:
    return decode(type(value), json.loads(json.dumps(encode(value))))


def test_host_readings_round_trip_through_a_recording() -> None:
    samples = [PORT, FABRIC, POWER, PROCESS, NODE, FabricReading(), PowerTelemetry()]
    for sample in samples:
        back = roundtrip(sample)
        assert back == sample, type(sample).__name__
    assert isinstance(roundtrip(NODE).power.cap_w, MappingProxyType)  # read-only again
    covered = {type(s) for s in samples}
    declared = {
        obj
        for _, obj in inspect.getmembers(hostmodel, inspect.isclass)
        if dataclasses.is_dataclass(obj) and obj.__module__ == hostmodel.__name__
    }
    assert declared <= covered, f"add a round-trip case for {declared - covered}"
    assert encode(NodeSample(node="n", time_s=1.0)) == {"node": "n", "time_s": 1.0}
