"""Hostile engine servers on 127.0.0.1 (issue 19 items 1, 3, 4, 9 and 15): a server that
trickles its answer, pages too big or too wide to read, redirects to another server, a
server that echoes the bearer token, an OpenMetrics body. Each degrades only its own row,
within a deadline, with a reason; the event loop is never the one that parses.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
from aiohttp import web

from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.model import EventKind
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import NA, EngineSample, EngineState
from sparktop.sources.engines import source as engine_module
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.engines.source import EngineSource
from sparktop.sources.exposition.page import parse_page
from sparktop.sources.exposition.text import ParseBounds
from sparktop.testing.vllm_page import FakeVllm
from tests.test_prometheus_hostile import LoopWatch


@dataclass
class Cfg:
    name: str
    url: str
    kind: str = "vllm"
    api_key_env: str | None = None


def full_page(kv: float = 0.99, waiting: int = 5) -> bytes:
    fake = FakeVllm(kv_cache_size_tokens=1_000_000)
    fake.set_gauges(running=8, waiting=waiting, kv_usage=kv)
    return fake.page()


class Trickle:
    """A raw-socket HTTP server: ``mode`` "good" answers the page at once; "headers" sends
    its status line and then one header byte every 50 ms; "body" sends valid headers and
    then the body one byte every 50 ms. No read ever waits long enough to time out."""

    def __init__(self, page: bytes) -> None:
        self.page = page
        self.mode = "good"
        self.url = ""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Trickle:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with contextlib.suppress(
            ConnectionError, asyncio.CancelledError, asyncio.IncompleteReadError
        ):
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                path = request.split(b" ", 2)[1]
                body = self.page if path == b"/metrics" else b'{"data": []}'
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n"
                head += "Content-Type: text/plain; version=0.0.4\r\n\r\n"
                if self.mode == "good" or path != b"/metrics":
                    writer.write(head.encode() + body)
                    await writer.drain()
                    continue
                if self.mode == "headers":
                    writer.write(b"HTTP/1.1 200 OK\r\n")
                    slow = b"X-Slow: " + b"x" * 10_000
                else:
                    writer.write(head.encode())
                    slow = body
                for byte in slow:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(0.05)
        writer.close()


async def test_a_port_that_answers_garbage_is_not_http_in_a_few_words() -> None:
    """Random bytes for an answer: h11 quotes them back as a Python bytes repr of hundreds of
    characters; the row says what it means instead."""

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(bytes(range(256)) * 4 + b"\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        source = EngineSource(Cfg("dsv4", f"http://127.0.0.1:{port}"), timeout_s=2)
        sample = await source.sample()
        await source.aclose()
    finally:
        server.close()
        await server.wait_closed()
    assert sample.state is EngineState.UNAVAILABLE
    assert sample.message == "not an HTTP answer (illegal status line)"


@pytest.mark.parametrize(
    ("mode", "state", "words"),
    [
        (
            "headers",
            EngineState.NOT_ANSWERING,
            "accepted the connection, no HTTP response within 1 s",
        ),
        ("body", EngineState.UNAVAILABLE, "answer not complete within 1 s"),
    ],
)
async def test_a_trickling_server_is_given_up_on_within_the_deadline(
    mode: str, state: EngineState, words: str
) -> None:
    async with Trickle(full_page()) as server:
        server.mode = mode
        source = EngineSource(Cfg("slow", server.url), timeout_s=0.5)  # deadline 1 s
        sample = await asyncio.wait_for(source.sample(), 10)  # a hang fails here, not forever
        await source.aclose()
    assert sample.state is state and words in sample.message, sample.message
    assert sample.since_s is not None


async def test_a_server_that_turns_slow_raises_the_availability_alert() -> None:
    """Its row turns into an error within the deadline and engine.down fires (it stayed
    'stale' forever before). The page's own alerts clear, saying the engine is down:
    engine.down is the one alert left for it."""
    alerts, state = AlertEngine(Thresholds(hold_s=0)), ClusterState()
    async with Trickle(full_page(kv=0.99, waiting=5)) as server:
        source = EngineSource(Cfg("dsv4", server.url), timeout_s=0.5)
        good = await source.sample()
        state.apply(good)
        alerts.update(state, good.time_s)
        assert "kv.usage" in {a.rule for a in alerts.active()}
        server.mode = "body"
        slow = await asyncio.wait_for(source.sample(), 10)
        await source.aclose()
    state.apply(slow)
    alerts.update(state, slow.time_s + 1)
    assert slow.state is EngineState.UNAVAILABLE
    down = [a for a in alerts.active() if a.rule == "engine.down"]
    assert len(down) == 1 and "answer not complete within 1 s" in down[0].message
    assert [a.rule for a in alerts.active() if a.engine == "dsv4"] == ["engine.down"]


async def test_a_stopped_server_clears_its_page_alerts_and_leaves_engine_down() -> None:
    alerts, state = AlertEngine(Thresholds(hold_s=0)), ClusterState()
    async with aiohttp_server({"/metrics": await serve_bytes(full_page(0.99, 5))}) as url:
        source = EngineSource(Cfg("dsv4", url), timeout_s=0.5)
        good = await source.sample()
    state.apply(good)
    alerts.update(state, good.time_s)
    before = {a.rule for a in alerts.active()}
    assert {"kv.usage", "queue.pool_bound"} <= before, before
    gone = await source.sample()  # the server is stopped: connection refused
    await source.aclose()
    state.apply(gone)
    events = alerts.update(state, gone.time_s + 1)
    assert gone.state is not EngineState.OK
    assert [a.rule for a in alerts.active()] == ["engine.down"]
    cleared = {e.alert.rule: e.alert.message for e in events if e.kind is EventKind.CLEARED}
    assert set(cleared) == before
    assert all(m.startswith("engine down, no data") for m in cleared.values())
    # The events pane, the alert log and replay --summary read Event.message: "cleared: "
    # once (it read "cleared: cleared: engine down").
    lines = [e.message for e in events if e.kind is EventKind.CLEARED]
    assert lines and all(m.startswith("cleared: engine down, no data (") for m in lines)
    assert not any("cleared: cleared" in e.to_json()["message"] for e in events)


# -- pages sparktop will not read whole --------------------------------------------------------


def wide_page(series: int) -> bytes:
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{i}"}} 1' for i in range(series)]
    return ("\n".join(lines) + "\n").encode()


async def serve_bytes(body: bytes, content_type: str = "text/plain; version=0.0.4") -> Callable:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, headers={"Content-Type": content_type})

    return handler


@contextlib.asynccontextmanager
async def aiohttp_server(routes: dict[str, Callable]) -> AsyncIterator[str]:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_page_with_too_many_series_is_a_row_error_parsed_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads: list[threading.Thread] = []
    real = engine_module.read_engine_body

    def spy(body: engine_module.Body) -> object:
        threads.append(threading.current_thread())
        return real(body)

    monkeypatch.setattr(engine_module, "read_engine_body", spy)
    handler = await serve_bytes(wide_page(12_000))
    async with aiohttp_server({"/metrics": handler}) as url:
        source = EngineSource(Cfg("wide", url))
        sample = await source.sample()
        await source.aclose()
    assert sample.state is EngineState.UNAVAILABLE
    # Asked once: no retry is promised (a one-shot command never asks again).
    assert sample.message == "page has 12,000 series; limit 10,000"
    assert threads and threads[0] is not threading.main_thread()


async def test_a_refused_page_is_backed_off_not_fetched_every_tick() -> None:
    """A 31 MB page of 543,617 series was fetched and refused every second (0.4 CPU s/s)."""
    hits = [0]
    serve = await serve_bytes(wide_page(12_000))

    async def handler(request: web.Request) -> web.StreamResponse:
        hits[0] += 1
        return await serve(request)

    now = [0.0]
    async with aiohttp_server({"/metrics": handler}) as url:
        source = EngineSource(Cfg("wide", url), clock=lambda: now[0])
        messages = []
        for tick in range(12):  # one poll a second
            now[0] = float(tick)
            messages.append((await source.sample()).message)
        await source.aclose()
    assert hits[0] == 3  # at 0, then after 2 and 4 s (0, 2, 6), not 12 times
    assert all(m.startswith("page has 12,000 series; limit 10,000") for m in messages)
    # The repeats name the pause, never a countdown ("in 8 s" frozen in an events log).
    assert messages[1] == "page has 12,000 series; limit 10,000; backing off up to 2 s"
    assert messages[-1].endswith("backing off up to 8 s")
    assert not any(" in " in m.split(";")[-1] for m in messages)


def _gzip_bomb() -> bytes:
    """Gzip of 64 MiB of spaces: ~64 KB on the wire, twice the 32 MiB page cap inflated."""
    return gzip.compress(b" " * (64 << 20), 9)


async def test_a_gzip_bomb_is_inflated_off_the_loop_and_refused_at_the_cap() -> None:
    """Inflating it on the event loop (httpx does) held the loop 3.4-5.3 s a scrape, so a
    healthy engine's samples arrived 3.2 s late in the exporter."""
    bomb = _gzip_bomb()

    async def handler(request: web.Request) -> web.Response:
        assert "gzip" in request.headers["Accept-Encoding"]
        return web.Response(
            body=bomb, headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"}
        )

    healthy = await serve_bytes(full_page())
    async with aiohttp_server({"/metrics": handler, "/ok/metrics": healthy}) as url:
        bad, good = EngineSource(Cfg("bomb", url)), EngineSource(Cfg("ok", url + "/ok"))
        async with LoopWatch() as watch:
            samples = await asyncio.gather(bad.sample(), bad.sample(), good.sample())
        await asyncio.gather(bad.aclose(), good.aclose())
    assert samples[0].state is EngineState.UNAVAILABLE
    assert samples[0].message.startswith(
        "page over 32 MiB once decompressed (gzip): not a /metrics page"
    )
    assert samples[2].ok
    assert watch.worst_s < 1.0, f"event loop held {watch.worst_s:.2f} s"


async def test_a_gzip_page_reads_as_the_plain_one() -> None:
    page = full_page(kv=0.5, waiting=2)

    async def handler(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip.compress(page),
            headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"},
        )

    async with aiohttp_server({"/metrics": handler}) as url:
        source = EngineSource(Cfg("gz", url))
        sample = await source.sample()
        await source.aclose()
    assert sample.ok and sample.waiting == 2 and sample.kv_usage == 0.5


def test_a_line_with_64000_labels_is_refused_not_parsed() -> None:
    labels = ",".join(f'l{i}="v"' for i in range(64_000))
    text = f'vllm:num_requests_running{{engine="0",{labels}}} 3\n'
    for page in (parse_page(text, WANTED), parse_page(text + "a b c\n", WANTED)):
        assert page.error == "line 1 has 64,001 labels; limit 128", page.parser
        assert not page.samples


def test_a_page_over_its_cpu_budget_is_refused() -> None:
    page = parse_page(wide_page(5_000).decode(), WANTED, bounds=ParseBounds(max_cpu_s=0.0))
    assert page.error == "parsing took over 0 s of CPU; page refused"


# -- redirects, the token, OpenMetrics -----------------------------------------------------------


def with_values(page: bytes, values: dict[str, str]) -> bytes:
    """``page`` with the value of every series whose line starts with a key replaced."""
    lines = []
    for line in page.decode().splitlines():
        for prefix, value in values.items():
            if line.startswith(prefix):
                line = line.rsplit(" ", 1)[0] + " " + value
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


async def sample_of(page: bytes) -> EngineSample:
    """One scrape of ``page`` served on loopback."""
    async with aiohttp_server({"/metrics": await serve_bytes(page)}) as url:
        source = EngineSource(Cfg("dsv4", url), timeout_s=2)
        try:
            return await source.sample()
        finally:
            await source.aclose()


async def one(url: str, **kwargs: object) -> EngineSample:
    source = EngineSource(Cfg("e", url), **kwargs)  # type: ignore[arg-type]
    try:
        return await asyncio.wait_for(source.sample(), 20)
    finally:
        await source.aclose()


async def test_redirects_are_followed_only_within_the_engines_origin() -> None:
    target: dict[str, str] = {}

    async def elsewhere(request: web.Request) -> web.Response:
        raise web.HTTPFound(target["url"] + "/metrics")

    async def slash(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/metrics/")

    async def itself(request: web.Request) -> web.Response:
        raise web.HTTPFound("/metrics")

    async with (
        aiohttp_server({"/metrics": await serve_bytes(full_page(kv=0.1))}) as other,
        aiohttp_server(
            {"/metrics": slash, "/metrics/": await serve_bytes(full_page(kv=0.5, waiting=0))}
        ) as own,
        aiohttp_server({"/metrics": elsewhere}) as hop,
        aiohttp_server({"/metrics": itself}) as looping,
    ):
        target["url"] = other
        ok, off, loops = await one(own), await one(hop), await one(looping)
    assert ok.state is EngineState.OK and ok.kv_usage == 0.5
    assert off.state is EngineState.UNAVAILABLE and off.kv_usage != 0.1
    assert off.message == (
        f"GET /metrics: redirected to another origin ({other}); not followed, "
        f"only redirects within {hop} are"
    )
    assert loops.message == "GET /metrics: more than 3 redirects; not followed"


TOKEN = "sekrit-token-4711"


async def test_a_server_that_echoes_the_token_never_gets_it_into_a_sample() -> None:
    async def bounce(request: web.Request) -> web.Response:
        echoed = request.headers["Authorization"].removeprefix("Bearer ")
        raise web.HTTPFound(f"http://{echoed}.invalid/metrics")

    async def models(request: web.Request) -> web.Response:
        echoed = request.headers["Authorization"].removeprefix("Bearer ")
        return web.json_response(
            {"data": [{"id": f"model-{echoed}", "parent": None, "max_model_len": 4096}]}
        )

    async with (
        aiohttp_server({"/metrics": bounce}) as bouncing,
        aiohttp_server(
            {"/metrics": await serve_bytes(full_page(kv=0.5)), "/v1/models": models}
        ) as naming,
    ):
        redirected = await one(bouncing, api_key=TOKEN)
        named = await one(naming, api_key=TOKEN)
    assert TOKEN not in redirected.message and "<redacted>.invalid" in redirected.message
    assert named.state is EngineState.OK and named.model == "model-<redacted>"


def openmetrics_page(eof: bool) -> bytes:
    from prometheus_client import CollectorRegistry, Gauge
    from prometheus_client.openmetrics.exposition import generate_latest

    registry = CollectorRegistry()
    Gauge("vllm:num_requests_running", "r", ["engine"], registry=registry).labels("0").set(3)
    body: bytes = generate_latest(registry)  # type: ignore[no-untyped-call]
    return body if eof else body.replace(b"# EOF\n", b"")


OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


async def test_an_openmetrics_body_is_read_by_the_openmetrics_parser() -> None:
    async with (
        aiohttp_server({"/metrics": await serve_bytes(openmetrics_page(True), OPENMETRICS)}) as ok,
        aiohttp_server(
            {"/metrics": await serve_bytes(openmetrics_page(False), OPENMETRICS)}
        ) as bad,
    ):
        good, broken = await one(ok), await one(bad)
    assert good.state is EngineState.OK and good.running == 3
    assert broken.state is EngineState.UNAVAILABLE
    assert broken.message.startswith("page is not valid OpenMetrics (prometheus_client: ")


async def test_an_implausible_gauge_is_na_with_the_reason_not_a_309_digit_number() -> None:
    """A gauge of -1e308 or a count of 1e300 is not a number to show (it printed as 309
    digits): n/a with what was read, in the sample, the JSON and the table."""
    from rich.console import Console

    from sparktop.report import engines as engine_report

    bad = {"vllm:num_requests_running{": "-1e308", "vllm:num_requests_waiting{": "1e300"}
    sample = await sample_of(with_values(full_page(kv=0.2, waiting=0), bad))
    assert sample.state is EngineState.DEGRADED and sample.judged, sample.message
    assert not isinstance(sample.running, float) and not isinstance(sample.waiting, float)
    assert "not a plausible value" in str(sample.running.reason)
    doc = engine_report.engine_json(sample)
    assert doc["running"] is None and "-1e+308" in doc["missing"]["running"]
    console = Console(width=200, record=True)
    for table in engine_report.engine_tables((sample,), 200):
        console.print(table.table)
    text = console.export_text()
    assert "0" * 30 not in text and "n/a" in text


async def test_impossible_limits_and_shares_are_na_with_what_was_read() -> None:
    """A KV usage of 1.5 (it showed "150 % full"), a pool label of inf (a traceback in budget
    and over the monitor), blocks × block size of 1e30 tokens and a max_model_len of 1e308
    (309 digits) are n/a, each with the value it read; none is a number and nothing raises."""
    from sparktop.report import engines as engine_report
    from sparktop.testing.http_stub import StubServer, models_route, text

    page = full_page(kv=0.2, waiting=0).decode()
    lines = []
    for line in page.splitlines():
        if line.startswith("vllm:kv_cache_usage_perc{"):
            line = line.rsplit(" ", 1)[0] + " 1.5"
        elif line.startswith("vllm:cache_config_info{"):
            line = 'vllm:cache_config_info{block_size="1e15",engine="0",num_gpu_blocks="inf"} 1'
        lines.append(line)
    routes = {
        "/metrics": text("\n".join(lines) + "\n"),
        "/v1/models": models_route(max_model_len=10**308),
    }
    async with StubServer(routes) as server:
        source = EngineSource(Cfg("dsv4", server.url), timeout_s=2)
        sample = await source.sample()
        await source.aclose()
    assert sample.state is EngineState.DEGRADED and sample.judged, sample.message
    assert (
        isinstance(sample.kv_usage, NA) and "1.5: not a plausible value" in sample.kv_usage.reason
    )
    pool = sample.kv_pool_tokens
    assert isinstance(pool, NA) and "num_gpu_blocks='inf'" in pool.reason
    assert "block_size='1e15'" in pool.reason
    assert isinstance(sample.max_model_len, NA) and "not plausible" in sample.max_model_len.reason
    doc = engine_report.engine_json(sample)
    assert doc["kv_usage_pct"] is None and doc["max_model_len_tokens"] is None


def test_a_traceback_while_the_monitor_runs_is_held_until_it_quits(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A source that raises is logged (a bug report) but never written over the screen:
    held while the UI runs, printed on exit with control characters made visible."""
    import logging

    from sparktop.safe_text import held_warnings

    with held_warnings():
        logging.getLogger("sparktop.poller").warning("source \x1b[2Jevil raised")
        assert capsys.readouterr().err == ""
    err = capsys.readouterr().err
    assert "1 warning(s) while the monitor ran" in err
    assert "source ␛[2Jevil raised" in err and "\x1b" not in err


async def test_an_engine_whose_every_load_gauge_is_refused_is_degraded_naming_them() -> None:
    """Running -3, waiting NaN and a KV usage of 1.5 on one page: each value is n/a, and the
    engine is not "ok" (it said nothing usable about load): degraded, naming each gauge and
    the value read, in the sample, the JSON, the monitor's state cell and the alerts."""
    from sparktop.alerts.context import RuleContext
    from sparktop.alerts.counters import CounterTracker
    from sparktop.alerts.rules import evaluate
    from sparktop.report import engines as engine_report
    from sparktop.ui.engine_views import engine_state
    from sparktop.ui.views import ViewConfig

    bad = {
        "vllm:num_requests_running{": "-3",
        "vllm:num_requests_waiting{": "NaN",
        "vllm:kv_cache_usage_perc{": "1.5",
    }
    sample = await sample_of(with_values(full_page(kv=0.2, waiting=0), bad))
    assert sample.state is EngineState.DEGRADED and not sample.ok and sample.answered
    for name, value in (
        ("vllm:num_requests_running", "-3"),
        ("vllm:num_requests_waiting", "nan"),
        ("vllm:kv_cache_usage_perc", "1.5"),
    ):
        assert f"{name} is {value}" in sample.message, sample.message
    assert sample.message.startswith("every load gauge refused")
    doc = engine_report.engine_json(sample)
    assert doc["state"] == "degraded" and doc["ok"] is False
    text, style = engine_state(sample, sample.time_s, ViewConfig())
    assert text.startswith("degraded") and style == "warn"
    state = ClusterState()
    state.apply(sample)
    tracker = CounterTracker(60.0)
    tracker.observe(state)
    found = {
        f.key: f
        for f in evaluate(RuleContext(state=state, thresholds=Thresholds(), counters=tracker))
    }
    assert "kv_cache_usage_perc is 1.5" in found["engine.degraded:dsv4"].message
    assert "engine.down:dsv4" not in found


async def test_one_refused_load_gauge_degrades_the_engine_and_the_rest_is_judged() -> None:
    """Only running refused (-3), KV full with requests waiting: the page is incomplete, so
    the engine is degraded (a warning naming the value read, snapshot exit 4), and what it
    did say is still judged: the full KV cache raises its critical alert."""
    from sparktop.alerts.context import RuleContext
    from sparktop.alerts.counters import CounterTracker
    from sparktop.alerts.rules import evaluate

    page = with_values(full_page(kv=0.99, waiting=5), {"vllm:num_requests_running{": "-3"})
    sample = await sample_of(page)
    assert sample.state is EngineState.DEGRADED and sample.judged
    assert isinstance(sample.running, NA) and sample.waiting == 5
    why = "vllm:num_requests_running is -3: not a plausible value (0-1,000,000)"
    assert sample.running.reason == why and f"running n/a: {why}" in sample.message
    state = ClusterState()
    state.apply(sample)
    tracker = CounterTracker(60.0)
    tracker.observe(state)
    found = {
        f.key: f
        for f in evaluate(RuleContext(state=state, thresholds=Thresholds(), counters=tracker))
    }
    assert why in found["engine.degraded:dsv4"].message
    assert any(k.startswith("kv.") for k in found), found


async def test_request_counts_past_any_server_or_fractional_are_refused() -> None:
    """1e12 running requests and 3.7 waiting (the trial's absurd page) read as n/a with the
    value read, as -5 is, not as a trillion requests or a rounded 4."""
    bad = {"vllm:num_requests_running{": "1e12", "vllm:num_requests_waiting{": "3.7"}
    sample = await sample_of(with_values(full_page(kv=0.2, waiting=0), bad))
    assert sample.state is EngineState.DEGRADED and sample.kv_usage == 0.2
    assert isinstance(sample.running, NA) and isinstance(sample.waiting, NA)
    assert sample.running.reason == (
        "vllm:num_requests_running is 1e+12: not a plausible value (0-1,000,000)"
    )
    assert (
        sample.waiting.reason == "vllm:num_requests_waiting is 3.7: not a whole number of requests"
    )


async def test_an_ssh_port_given_as_an_engine_url_is_named_not_a_timeout() -> None:
    """An SSH server (asyncssh, on loopback) sends its banner on accept and waits for the
    client's: the scrape saw no HTTP response and said "no HTTP response within 1 s". The
    port spoke first, so the reason says what it is; a silent port keeps the timeout."""
    from sparktop.sim.sshserver import start_ssh_server

    async def never(command: str) -> tuple[str, int]:
        return "", 127

    ssh = await start_ssh_server(never)
    silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    silent_port = silent.sockets[0].getsockname()[1]
    try:
        samples = []
        for url in (f"http://127.0.0.1:{ssh.port}", f"http://127.0.0.1:{silent_port}"):
            source = EngineSource(Cfg("e", url), timeout_s=0.5)
            samples.append(await source.sample())
            await source.aclose()
    finally:
        await ssh.close()
        silent.close()
        await silent.wait_closed()
    assert samples[0].state is EngineState.UNAVAILABLE
    assert samples[0].message.startswith("not an HTTP server (it sent an SSH banner: SSH-2.0-")
    assert samples[1].state is EngineState.NOT_ANSWERING
    assert "no HTTP response within" in samples[1].message


async def test_a_refused_gauge_has_one_reason_in_every_output() -> None:
    """The trial's ``dup`` page (the real page twice, running 4 then 400) and ``neg`` page
    (running -5, KV usage 7.5): each n/a gives the same reason in the sample, the JSON's
    ``missing``, the monitor's engine block and the expected row (which said "the server
    does not report running requests" and "vllm:num_requests_running is nan")."""
    from sparktop.report import engines as engine_report
    from sparktop.sweep.expected.load import window_load
    from sparktop.ui.engine_views import load_groups
    from sparktop.ui.views import ViewConfig
    from tests.real_page import REAL_LOAD_PAGE

    real = REAL_LOAD_PAGE.read_text()
    running = 'vllm:num_requests_running{engine="0",model_name="tiny-llama"} '
    assert running + "4.0" in real
    neg = "\n".join(
        line.rsplit(" ", 1)[0] + (" -5" if line.startswith(running) else " 7.5")
        if line.startswith((running, "vllm:kv_cache_usage_perc{"))
        else line
        for line in real.splitlines()
    )
    pages = {
        "dup": real + real.replace(running + "4.0", running + "400.0"),
        "neg": neg + "\n",
    }
    reasons = {
        "dup": {"running": "vllm:num_requests_running is ambiguous: repeated as 4 then 400"},
        "neg": {
            "running": "vllm:num_requests_running is -5: not a plausible value (0-1,000,000)",
            "kv_usage": "vllm:kv_cache_usage_perc is 7.5: not a plausible value",
        },
    }
    for name, page in pages.items():
        async with aiohttp_server({"/metrics": await serve_bytes(page.encode())}) as url:
            source = EngineSource(Cfg(name, url), timeout_s=2)
            sample = await source.sample()
            await source.aclose()
        assert sample.state is EngineState.DEGRADED and sample.judged, sample.message
        doc = engine_report.engine_json(sample)
        block = "".join(t for group in load_groups(sample, ViewConfig(), None) for t, _ in group)
        for field, why in reasons[name].items():
            value = getattr(sample, field)
            assert isinstance(value, NA) and value.reason == why, (name, value)
            assert doc["missing"][field] == why
            assert f"n/a ({why})" in block, block
        assert window_load(sample) == f"n/a: running {reasons[name]['running']}"
        assert "4 then 400" in sample.message if name == "dup" else "7.5" in sample.message
    assert "free n/a tok (as KV)" in block  # free tokens come from the refused KV usage


def test_free_tokens_unknown_for_the_pools_reason_say_it_once() -> None:
    """No pool on the page (the ``nan-gauge`` case): the pool cell gives its short reason;
    free tokens, unknown for that same reason, point to it rather than repeat its long text."""
    from sparktop.sources.engines.metrics import MetricsDeriver
    from sparktop.sources.engines.reading import parse_engine_page
    from sparktop.testing.shared import CASES
    from sparktop.ui.engine_views import load_groups
    from sparktop.ui.views import ViewConfig

    page = parse_engine_page((CASES / "metrics" / "nan-gauge.prom").read_text())
    sample = MetricsDeriver("e").derive(page, now_s=0.0, wall_s=0.0)
    assert isinstance(sample.kv_free_tokens, NA) and isinstance(sample.kv_pool_tokens, NA)
    block = "".join(t for group in load_groups(sample, ViewConfig(), None) for t, _ in group)
    assert "free n/a tok (as pool)" in block and block.count("no cache_config_info") == 1


async def test_a_refused_token_counter_gives_the_rows_decode_na_its_reason() -> None:
    """A negative ``generation_tokens_total`` leaves decode n/a; the row's message says why
    (as a refused load gauge's does), not only the detail screen."""
    page = with_values(full_page(kv=0.2, waiting=0), {"vllm:generation_tokens_total{": "-707"})
    sample = await sample_of(page)
    assert isinstance(sample.decode_tps, NA)
    assert sample.decode_tps.reason == "vllm:generation_tokens_total is -707: not a plausible value"
    assert f"decode n/a: {sample.decode_tps.reason}" in sample.message
    # The rest of the page is read as usual: prefill's counter was fine.
    assert "prefill n/a" not in sample.message and sample.state is EngineState.OK
