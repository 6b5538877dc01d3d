"""``sparktop exporter`` facing hostile text and hostile clients (issue 30): control characters
from a node reach ``/metrics`` escaped, and a client that connects and never finishes its
request is closed."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
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


def _scrape(judgements: Judgements, engine: str) -> tuple[float, bool]:
    """(``sparktop_engine_up``, whether ``sparktop_alert{rule="engine.down"}`` is served) for
    ``engine`` in one collection, as one scrape of /metrics reads them."""
    families = {f.name: f for f in judgements.collect()}
    (up,) = [
        s.value for s in families["sparktop_engine_up"].samples if s.labels["engine"] == engine
    ]
    alerted = any(
        s.labels["rule"] == "engine.down" and s.labels["subject"] == engine
        for s in families["sparktop_alert"].samples
    )
    return up, alerted


def test_engine_up_and_its_engine_down_alert_agree_at_every_scrape() -> None:
    """A hostile neighbour slowed a healthy engine's scrapes so that some failed: its
    ``engine.down`` fired after ``hold_s`` of failures and, as each new failure came within
    ``hold_s`` of the last, stayed up (recovering, re-armed) for ~2 min while
    ``sparktop_engine_up`` read 1 from the newest sample: two sources (the newest sample;
    the alert engine's last evaluation, with its hold) read at one scrape. Both now come from
    the alert engine's last evaluation: up is 0 while the condition is pending or its alert
    is active, so 1 never stands beside the alert."""
    from sparktop.alerts.thresholds import Thresholds
    from sparktop.model import EngineState
    from tests.alert_samples import engine, engine_down

    hold = 10.0
    alerts, state = AlertEngine(Thresholds(hold_s=hold)), ClusterState()
    judgements = Judgements(state, lambda: alerts, SourceStats(), clock=lambda: t)
    seen: list[tuple[float, float, bool, bool]] = []  # (t, up, alert served, pending)

    def scrape(at: float) -> None:
        pending = any(p.rule == "engine.down" for p in alerts.pending())
        seen.append((at, *_scrape(judgements, "hostile-neighbour"), pending))

    def poll(sample: object, at: float) -> None:
        state.apply(sample)  # type: ignore[arg-type]
        scrape(at)  # a scrape between the sample and the rules' next run
        alerts.update(state, at)
        scrape(at)

    t = 0.0
    poll(engine("hostile-neighbour", t), t)
    # Fails long enough to fire, then flaps: answers, fails again within hold_s, answers...
    for t, ok in [(1.0, False), (6.0, False), (12.0, False), (13.0, True), (16.0, False),
                  (18.0, True), (25.0, True), (29.0, True)]:  # fmt: skip
        poll(engine("hostile-neighbour", t) if ok else engine_down("hostile-neighbour", t), t)
    t = 40.0
    alerts.update(state, t)  # answered since 18 s: the alert clears after hold_s
    scrape(t)

    assert any(alerted for _, _, alerted, _ in seen), seen  # it did fire
    for at, up, alerted, pending in seen:
        assert not (up == 1.0 and alerted), f"engine_up 1 beside engine.down at t={at}: {seen}"
        assert (up == 0.0) == (alerted or pending), (at, seen)  # one judgement, not two
    assert seen[-1][1:] == (1.0, False, False)  # cleared: up again, no alert
    assert state.engines["hostile-neighbour"].state is EngineState.OK


def test_node_up_and_its_node_down_alert_agree_too() -> None:
    """The same for a node whose polls fail now and then: ``sparktop_node_up`` is 0 while
    ``node.down`` is pending or active (it read the newest poll beside the held alert)."""
    from sparktop.alerts.thresholds import Thresholds
    from tests.alert_samples import failed, node

    alerts, state = AlertEngine(Thresholds(hold_s=10.0)), ClusterState()
    judgements = Judgements(state, lambda: alerts, SourceStats(), clock=lambda: 0.0)
    readings = []
    for t, ok in [(0.0, True), (1.0, False), (12.0, False), (13.0, True), (20.0, True),
                  (24.0, True)]:  # fmt: skip
        state.apply(node("spark-1", t) if ok else failed("spark-1", t))
        alerts.update(state, t)
        families = {f.name: f for f in judgements.collect()}
        (up,) = [s.value for s in families["sparktop_node_up"].samples]
        alerted = any(s.labels["rule"] == "node.down" for s in families["sparktop_alert"].samples)
        pending = any(p.rule == "node.down" for p in alerts.pending())
        readings.append((t, up, alerted))
        assert (up == 0.0) == (alerted or pending), readings
    assert [r[1:] for r in readings] == [(1.0, False), (0.0, False), (0.0, True), (0.0, True),
                                         (0.0, True), (1.0, False)]  # fmt: skip


def test_a_node_that_answers_without_gpu_data_is_up() -> None:
    """nvidia-smi failing (NVML) or hung, no driver: SSH answers, so ``sparktop_node_up`` is 1
    beside a ``node.gpu_unavailable`` warning; only a node that cannot be reached reads 0."""
    from sparktop.alerts.thresholds import Thresholds
    from sparktop.model import NodeState
    from tests.alert_samples import failed

    reachable = (NodeState.GPU_UNAVAILABLE, NodeState.NOT_ANSWERING, NodeState.NO_DRIVER,
                 NodeState.DRIVER_MISMATCH, NodeState.NO_GPU, NodeState.GARBLED)  # fmt: skip
    for state_now in (*reachable, NodeState.UNREACHABLE, NodeState.AUTH):
        alerts, state = AlertEngine(Thresholds(hold_s=0.0)), ClusterState()
        judgements = Judgements(state, lambda a=alerts: a, SourceStats(), clock=lambda: 0.0)
        state.apply(failed("spark-1", 1.0, state_now))
        alerts.update(state, 1.0)
        families = {f.name: f for f in judgements.collect()}
        (up,) = [s.value for s in families["sparktop_node_up"].samples]
        served = {
            (s.labels["rule"], s.labels["severity"]) for s in families["sparktop_alert"].samples
        }
        if state_now in reachable:
            assert (up, served) == (1.0, {("node.gpu_unavailable", "warning")}), state_now
        else:
            assert (up, served) == (0.0, {("node.down", "critical")}), state_now
    # Without an alert engine the node's own state decides, the same way.
    bare = ClusterState()
    bare.apply(failed("spark-1", 1.0, NodeState.GPU_UNAVAILABLE))
    bare.apply(failed("spark-2", 1.0))
    families = {f.name: f for f in Judgements(bare, lambda: None, SourceStats()).collect()}
    ups = {s.labels["node"]: s.value for s in families["sparktop_node_up"].samples}
    assert ups == {"spark-1": 1.0, "spark-2": 0.0}


async def test_bad_requests_are_one_short_line_each_rate_limited_never_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before, each over-long header or garbled request line printed aiohttp's traceback
    (``LineTooLong``, ``BadHttpMessage``): anyone reaching the port could flood stderr."""
    endpoint = MetricsEndpoint(f"127.0.0.1:{free_port()}")
    endpoint.register(Judgements(_state(), lambda: None, SourceStats()))
    await endpoint.start()
    bad = [
        b"GET /metrics HTTP/1.1\r\nX-Long: " + b"a" * 20_000 + b"\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nBad Header\x01: x\r\n\r\n",
    ] * 5
    try:
        for payload in bad:
            reader, writer = await asyncio.open_connection("127.0.0.1", endpoint.port)
            writer.write(payload)
            await writer.drain()
            assert (await asyncio.wait_for(reader.read(), 10)).startswith(b"HTTP/1.0 400")
            writer.close()
        async with httpx.AsyncClient(trust_env=False, timeout=5) as client:
            assert (await client.get(endpoint.url)).status_code == 200  # still serving
    finally:
        await endpoint.close()
    err = capsys.readouterr().err
    assert "Traceback" not in err and 'File "' not in err
    lines = err.splitlines()
    assert len(lines) == 1, lines  # ten bad requests within the 10 s: one line
    assert lines[0].startswith("sparktop exporter: bad request from 127.0.0.1: LineTooLong (400")
    assert len(lines[0]) < 260


def test_the_next_line_after_a_quiet_spell_counts_the_ones_not_shown() -> None:
    import io
    import logging

    from sparktop.exporter.request_log import OneLine, request_logger

    now = [0.0]
    out = io.StringIO()
    logger = request_logger(OneLine(out, every_s=10, clock=lambda: now[0]))
    for _ in range(4):
        logger.error("Error handling request from %s", "10.0.0.9")
    now[0] = 11.0
    logger.error("Error handling request from %s", "10.0.0.9")
    logger.debug("Error handling request from %s", "10.0.0.9")  # aiohttp's noise level
    assert out.getvalue().splitlines() == [
        "sparktop exporter: bad request from 10.0.0.9",
        "sparktop exporter: bad request from 10.0.0.9 (3 more since the last line)",
    ]
    assert logging.getLogger("sparktop.exporter.requests").propagate is False


def test_kv_free_tokens_are_whole_tokens() -> None:
    """The real vLLM 0.32 page's KV usage is a float fraction of a 524,288-token pool: free
    tokens were served as ``522751.6249084249``. Used tokens (usage × pool) are whole tokens,
    so free is too, in the sample and on /metrics."""
    from sparktop.sources.engines.metrics import MetricsDeriver
    from sparktop.sources.engines.reading import parse_engine_page
    from tests.real_page import REAL_LOAD_PAGE

    page = parse_engine_page(REAL_LOAD_PAGE.read_text())
    sample = MetricsDeriver("real").derive(page, now_s=0.0, wall_s=time.time())
    assert sample.kv_pool_tokens == 524_288 and isinstance(sample.kv_usage, float)
    assert not (sample.kv_usage * 524_288).is_integer()  # the fraction is not whole tokens
    state = ClusterState()
    state.apply(sample)
    families = {f.name: f for f in Judgements(state, AlertEngine, SourceStats()).collect()}
    (free,) = families["sparktop_engine_kv_free_tokens"].samples
    assert free.value == sample.kv_free_tokens == 524_288 - round(sample.kv_usage * 524_288)
    assert float(free.value).is_integer()
