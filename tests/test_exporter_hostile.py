"""``sparktop exporter`` facing hostile text and hostile clients (issue 30): control characters
from a node reach ``/metrics`` escaped, and a client that connects and never finishes its
request is closed."""

from __future__ import annotations

import asyncio
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sparktop.alerts.engine import AlertEngine
from sparktop.cluster import ClusterState
from sparktop.exporter.judgements import Judgements, SourceStats
from sparktop.exporter.server import MetricsEndpoint
from sparktop.model import GpuSample, NodeSample, NodeState
from sparktop.sim.promrun import free_port

HOSTILE_UUID = "GPU-\x1b]0;owned\x07-\x1b[2J\x1b]52;c;ZWNobyBoaQ==\x07"
"""An OSC title, a screen clear and an OSC 52 clipboard write: 4 ESC, 2 BEL (more with the
node's name below)."""


def _state() -> ClusterState:
    state = ClusterState()
    gpu = GpuSample(index=0, uuid=HOSTILE_UUID, name="NVIDIA GB10\x07", sm_clock_mhz=2500.0)
    node = "spark-\x1b[31m1"
    state.apply(NodeSample(node=node, time_s=time.time(), state=NodeState.OK, gpus=(gpu,)))
    return state


async def test_control_characters_from_a_node_are_escaped_in_metrics() -> None:
    state = _state()
    endpoint = MetricsEndpoint(f"127.0.0.1:{free_port()}")
    endpoint.register(Judgements(state, lambda: AlertEngine(), SourceStats()))
    await endpoint.start()
    try:
        async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
            page = (await client.get(endpoint.url)).content
    finally:
        await endpoint.close()
    # before: 4 ESC and 4 BEL went out raw, and `curl …/metrics` in a terminal ran them
    assert b"\x1b" not in page and b"\x07" not in page
    assert not any(byte < 0x20 and byte != 0x0A for byte in page)
    families = {f.name: f for f in text_string_to_metric_families(page.decode())}
    (up,) = families["sparktop_node_up"].samples
    assert up.labels["node"] == "spark-\u241b[31m1"  # ESC shown as its control picture
    uuids = {s.labels.get("uuid") for f in families.values() for s in f.samples} - {None}
    assert uuids == {"GPU-\u241b]0;owned\u2407-\u241b[2J\u241b]52;c;ZWNobyBoaQ==\u2407"}


async def test_a_slowloris_client_is_closed_and_others_are_served() -> None:
    """Before, 400 sockets sending a header byte now and then were held for 40 s (and
    aiohttp's default is an hour)."""
    endpoint = MetricsEndpoint(f"127.0.0.1:{free_port()}", client_timeout_s=0.5)
    endpoint.register(Judgements(_state(), lambda: None, SourceStats()))
    await endpoint.start()
    try:
        opened = [await asyncio.open_connection("127.0.0.1", endpoint.port) for _ in range(20)]
        for _reader, writer in opened:
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never the blank line
            await writer.drain()
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
            assert (await client.get(endpoint.url)).status_code == 200
        for reader, _writer in opened:
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the server
        closed_after_s = loop.time() - started
        for _reader, writer in opened:
            writer.close()
    finally:
        await endpoint.close()
    assert closed_after_s < 3, closed_after_s
