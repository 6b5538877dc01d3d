"""The Prometheus source when Prometheus is down, slow, wrong or partial (an aiohttp stand-in
for Prometheus's HTTP API on loopback), and the inventory keys that configure it."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from sparktop.errors import UserError
from sparktop.inventory import parse_inventory
from sparktop.model import EngineState, NodeState
from sparktop.plan import Plan
from sparktop.sim.promrun import free_port
from sparktop.sources.prometheus.api import QueryResult, is_loopback_url, parse_answer
from sparktop.sources.prometheus.node import NodesReading
from sparktop.sources.prometheus.promql import Target, filters, host_part, node_query

PROM = "prometheus: {url: http://p:9090}\n"
Handler = Callable[[web.Request], web.StreamResponse]


def _inventory(url: str, *, token_env: str | None = None, timeout_s: float = 1.0) -> str:
    token = f", bearer_token_env: {token_env}" if token_env else ""
    return f"""
prometheus: {{url: "{url}", timeout_s: {timeout_s}{token}}}
nodes:
  - {{name: spark-1, source: prometheus, instance: 10.0.0.1}}
  - {{name: spark-2, source: prometheus, instance: 10.0.0.2}}
engines:
  - {{name: dsv41, source: prometheus, instance: "10.0.0.1:8000", nodes: [spark-1, spark-2]}}
"""


@asynccontextmanager
async def stand_in(handler: Handler) -> AsyncIterator[tuple[str, list[web.Request]]]:
    seen: list[web.Request] = []

    async def record(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        return await handler(request)  # type: ignore[misc]

    app = web.Application()
    app.add_routes([web.post("/api/v1/query", record)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def _poll(text: str) -> list:  # type: ignore[type-arg]
    sources = Plan.from_inventory(parse_inventory(text, "cluster.yaml")).sources()
    try:
        return list(await asyncio.gather(*(s.sample() for s in sources)))
    finally:
        await asyncio.gather(*(s.aclose() for s in sources))


async def test_prometheus_down_degrades_every_row_not_the_app() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    nodes_and_engine = await _poll(_inventory(url))
    assert [s.state for s in nodes_and_engine] == [
        NodeState.UNREACHABLE,
        NodeState.UNREACHABLE,
        EngineState.UNREACHABLE,
    ]
    assert all(url in s.message for s in nodes_and_engine)


async def test_slow_prometheus_is_bounded_by_timeout_s() -> None:
    gate = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await gate.wait()
        return web.json_response({})

    async with stand_in(hang) as (url, _):
        loop = asyncio.get_running_loop()
        started = loop.time()
        samples = await _poll(_inventory(url, timeout_s=0.5))
        gate.set()
    assert loop.time() - started < 3
    # Prometheus took the connection and said nothing: not "unreachable".
    assert all(
        "accepted the connection, no HTTP response within 0.5 s" in s.message for s in samples
    ), [s.message for s in samples]
    assert not any(s.state.value == "unreachable" for s in samples)


def test_what_orjson_refuses_is_read_as_before() -> None:
    """Answers are decoded by orjson; NaN, Infinity and numbers past a double, which it
    refuses and pydantic-core's reader takes, still read as they did (not "not a Prometheus
    answer")."""
    elements = [
        '{"metric":{"__name__":"up","instance":"a"},"value":[NaN,"1"]}',
        '{"metric":{"__name__":"up","instance":"b"},"value":[1e400,"NaN"]}',
        '{"metric":{"__name__":"up","instance":"c"},"value":[-Infinity,"+Inf"]}',
    ]
    head = '{"status":"success","data":{"resultType":"vector","result":['
    series = parse_answer(f"{head}{','.join(elements)}]}}}}".encode(), 200).series
    assert [(s.name, s.labels, str(s.value), str(s.time_s)) for s in series] == [
        ("up", {"instance": "a"}, "1.0", "nan"),
        ("up", {"instance": "b"}, "nan", "inf"),
        ("up", {"instance": "c"}, "inf", "-inf"),
    ]
    assert math.isnan(series[0].time_s)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            400,
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            "query refused (bad_data): parse error",
        ),
        (502, "<html><body>Bad gateway</body></html>", "HTTP 502, an HTML page"),
        (200, {"status": "success", "data": {"resultType": "matrix", "result": []}}, "matrix"),
        (401, {"status": "error", "error": "unauthorized"}, "check bearer_token_env"),
    ],
)
async def test_error_answers_name_the_reason(status: int, body: object, expected: str) -> None:
    async def answer(request: web.Request) -> web.Response:
        if isinstance(body, str):
            return web.Response(status=status, text=body, content_type="text/html")
        return web.json_response(body, status=status)

    async with stand_in(answer) as (url, _):
        node, _node2, engine = await _poll(_inventory(url))
    assert node.state is NodeState.ERROR and expected in node.message
    assert engine.state is EngineState.UNAVAILABLE and expected in engine.message


async def test_partial_answer_keeps_rows_and_says_so_and_token_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROM_TOKEN", "s3cret-token")
    labels = {"gpu": "0", "UUID": "GPU-1", "modelName": "NVIDIA GB10", "instance": "10.0.0.1:9400"}

    async def answer(request: web.Request) -> web.Response:
        form = await request.post()
        result = []
        if "DCGM_FI_DEV_SM_CLOCK" in str(form["query"]):
            result = [
                {"metric": {"__name__": "DCGM_FI_DEV_SM_CLOCK", **labels}, "value": [1.0, "2500"]},
                {
                    "metric": {"sparktop_series": "down", "instance": "10.0.0.2:9400"},
                    "value": [1.0, "0"],
                },
            ]
        return web.json_response(
            {
                "status": "success",
                "data": {"resultType": "vector", "result": result},
                "warnings": ["remote store eu-1 did not answer"],
            }
        )

    async with stand_in(answer) as (url, seen):
        node1, node2, engine = await _poll(_inventory(url, token_env="PROM_TOKEN"))
    assert len(seen) == 2  # one node query, one engine query for the whole inventory
    assert all(r.headers["Authorization"] == "Bearer s3cret-token" for r in seen)
    assert node1.ok and node1.gpus[0].sm_clock_mhz == 2500.0
    assert "partial answer: remote store eu-1 did not answer" in node1.message
    temp = node1.gpus[0].temperature_c
    assert "DCGM_FI_DEV_GPU_TEMP" in temp.reason and "10\\\\.0\\\\.0\\\\.1" in temp.reason
    assert node2.state is NodeState.UNREACHABLE and "up=0" in node2.message
    assert engine.state is EngineState.UNAVAILABLE and "found nothing" in engine.message
    for sample in (node1, node2, engine):
        assert "s3cret" not in json.dumps(str(sample))


async def test_a_cancelled_source_leaves_the_shared_query_to_the_others() -> None:
    arrived, gate = asyncio.Event(), asyncio.Event()
    labels = {"gpu": "0", "UUID": "GPU-2", "modelName": "NVIDIA GB10", "instance": "10.0.0.2:9400"}

    async def answer(request: web.Request) -> web.Response:
        arrived.set()
        await gate.wait()
        result = [{"metric": {"__name__": "DCGM_FI_DEV_SM_CLOCK", **labels}, "value": [1, "2500"]}]
        body = {"status": "success", "data": {"resultType": "vector", "result": result}}
        return web.json_response(body)

    async with stand_in(answer) as (url, seen):
        inventory = parse_inventory(_inventory(url), "cluster.yaml")
        node1, node2, engine = Plan.from_inventory(inventory).sources()
        first = asyncio.ensure_future(node1.sample())
        second = asyncio.ensure_future(node2.sample())
        await arrived.wait()  # the node query is at Prometheus: both sources wait on it
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        gate.set()
        sample = await second
        await asyncio.gather(*(s.aclose() for s in (node1, node2, engine)))
    assert first.cancelled()
    assert len(seen) == 1  # one query for both nodes, not cancelled with the first
    assert sample.ok and sample.gpus[0].sm_clock_mhz == 2500.0
    assert seen[0].headers["Accept-Encoding"] == "identity"  # a Prometheus on this machine


def test_only_a_prometheus_on_this_machine_is_asked_not_to_compress() -> None:
    here = ("http://127.0.0.1:9090", "http://[::1]:9090", "http://localhost", "http://127.3.0.1")
    assert all(is_loopback_url(url) for url in here)
    assert not any(is_loopback_url(url) for url in ("http://10.0.0.1:9090", "https://prom.lan/"))


def test_instance_matching_and_one_regex_for_all_instances() -> None:
    assert host_part("10.0.0.1:9400") == "10.0.0.1"
    assert host_part("[::1]:9100") == "::1"
    assert host_part("spark-1") == "spark-1"
    node = Target("spark-1", "10.0.0.1")
    assert node.matches({"instance": "10.0.0.1:9400"}) and node.matches({"instance": "10.0.0.1"})
    assert not node.matches({"instance": "10.0.0.10:9400"})
    engine = Target("e", "10.0.0.1:8000")
    assert engine.matches({"instance": "10.0.0.1:8000"})
    assert not engine.matches({"instance": "10.0.0.1:8001"})
    by_label = Target("n", None, (("Hostname", "spark-3"),))
    assert by_label.matches({"Hostname": "spark-3", "instance": "x"})
    targets = [Target(f"n{i}", f"10.0.0.{i}") for i in range(256)]
    assert len(filters(targets)) == 1
    assert node_query(targets).count(" or ") == node_query(targets[:2]).count(" or ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "nodes:\n  - {name: a, source: prometheus, instance: x}\n",
            "needs a top-level 'prometheus:'",
        ),
        (
            "prometheus: {url: http://p:9090}\nnodes:\n  - {name: a, source: prometheus}\n",
            "needs 'instance:' or 'match:'",
        ),
        (
            "prometheus: {url: http://p:9090, timout_s: 2}\nnodes:\n  - {name: a, host: h}\n",
            "unknown key 'timout_s' (did you mean 'timeout_s'?)",
        ),
        (
            PROM + "nodes:\n  - {name: a, source: prometheus, instanse: x}\n",
            "unknown key 'instanse' (did you mean 'instance'?)",
        ),
        ("nodes:\n  - {name: a, host: h, instance: x}\n", "need 'source: prometheus'"),
        (
            PROM + "nodes:\n  - {name: a, source: prometheus, host: h, instance: h}\n",
            "takes 'instance:', not 'host:'",
        ),
        ("nodes:\n  - {name: a, host: h}\nengines:\n  - {name: e}\n", "url: field required"),
    ],
)
def test_inventory_errors(text: str, message: str) -> None:
    with pytest.raises(UserError, match=r"cluster\.yaml:") as info:
        parse_inventory(text, "cluster.yaml")
    assert message in str(info.value)


def test_ssh_and_prometheus_nodes_mix() -> None:
    inventory = parse_inventory(
        "prometheus: {url: http://p:9090}\nnodes:\n  - {name: a, host: h}\n"
        "  - {name: b, source: prometheus, match: {Hostname: b}}\n",
        "cluster.yaml",
    )
    sources = Plan.from_inventory(inventory).sources()
    assert [type(s).__name__ for s in sources] == ["SshSource", "PromNodeSource"]


def _node_answer(at: float, clock: str, latency_s: float, temp: str = "41") -> QueryResult:
    gpu = {"gpu": "0", "instance": "10.0.0.1:9400"}
    result = [
        {
            "metric": {"__name__": "DCGM_FI_DEV_SM_CLOCK", "UUID": "GPU-1", **gpu},
            "value": [at, clock],
        },
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **gpu}, "value": [at, temp]},
        {"metric": {"sparktop_series": "gpu_sample_time", **gpu}, "value": [at, "1700000000.5"]},
        {
            "metric": {"__name__": "node_memory_MemTotal_bytes", "instance": "10.0.0.1:9100"},
            "value": [at, str(128 * 2**30)],
        },
    ]
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return parse_answer(json.dumps(body).encode(), 200, latency_s)


@pytest.mark.parametrize("temp", ["41", "NaN"])
async def test_a_node_whose_series_did_not_move_reads_as_a_fresh_source_would(temp: str) -> None:
    """Prometheus scrapes every few seconds and is asked every tick: the same series again
    (only the query's evaluation time moved) give the sample a new source builds from them,
    with this tick's round trip and the samples' own time, so the row ages; what was built
    for them is reused (a NaN never equals itself: that node is built again)."""
    inventory = parse_inventory(_inventory("http://127.0.0.1:9"), "cluster.yaml")
    plans = [Plan.from_inventory(inventory).sources() for _ in range(2)]
    source, fresh = plans[0][0], plans[1][0]
    try:
        first = source.sample_from(NodesReading(1.0, _node_answer(10.0, "2500", 0.01, temp)))
        again = _node_answer(11.0, "2500", 0.03, temp)
        repeat = source.sample_from(NodesReading(2.0, again))
        assert repeat == fresh.sample_from(NodesReading(2.0, again))
        assert repeat.ok and repeat.latency_s == 0.03 and first.latency_s == 0.01
        assert repeat.time_s == first.time_s == 1700000000.5
        assert repeat.gpus[0].sm_clock_mhz == 2500.0
        assert (repeat.gpus is first.gpus) is (temp != "NaN")
        moved = source.sample_from(NodesReading(3.0, _node_answer(12.0, "1800", 0.02, temp)))
        assert moved.gpus[0].sm_clock_mhz == 1800.0 and moved.latency_s == 0.02
        assert moved == fresh.sample_from(NodesReading(3.0, _node_answer(12.0, "1800", 0.02, temp)))
    finally:
        for sources in plans:
            await asyncio.gather(*(s.aclose() for s in sources))
