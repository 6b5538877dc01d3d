"""EngineSource against real HTTP servers on 127.0.0.1: a vLLM-shaped page whose counters and
histograms advance between scrapes, and servers that hang, fail, answer HTML or cut the body.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktop.model import NA, EngineSample, EngineState, Quantile, Sample
from sparktop.poller import Poller
from sparktop.sources.engines.source import EngineSource, scrape_once
from sparktop.sources.engines.wire import ConnectError, EngineClient
from sparktop.testing.http_stub import Reply, Route, StubServer, models_route
from sparktop.testing.vllm_page import FakeVllm, Load


@dataclass
class Cfg:
    name: str
    url: str
    kind: str = "vllm"
    api_key_env: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    kv_pool_tokens: int | None = None


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def vllm_routes(fake: FakeVllm) -> dict[str, Route]:
    return {"/metrics": lambda: Reply(body=fake.page()), "/v1/models": models_route()}


async def test_rates_and_quantiles_match_what_the_server_generated() -> None:
    fake = FakeVllm(engines=2, kv_cache_size_tokens=1_245_000)
    ttft, itl = (0.1, 1.0), (0.01, 0.025)
    fake.load["0"] = Load(
        4700, 65.2, 0.25, 3, ttft_range_s=ttft, itl_range_s=itl, prompt_tokens=8192
    )
    fake.load["1"] = Load(874.8, 34.7, 0, 1, ttft_range_s=ttft, itl_range_s=itl, prompt_tokens=2048)
    fake.set_gauges("0", running=4, waiting=1, kv_usage=0.81)
    fake.set_gauges("1", running=3, waiting=0, kv_usage=0.47)
    fake.advance(600)  # history before the window
    clock = FakeClock()
    async with StubServer(vllm_routes(fake)) as server:
        source = EngineSource(Cfg("dsv4", server.url, max_num_seqs=8), clock=clock)
        try:
            await source.sample()
            for _ in range(3):
                clock.now += 5
                fake.advance(5)
                s = await source.sample()
        finally:
            await source.aclose()
        assert server.connections == 1  # one keep-alive connection for every request
        assert server.count("/v1/models") == 1  # max_model_len once per connection
    assert s.state is EngineState.OK and s.window_s == 15
    assert (s.running, s.waiting, s.kv_usage, s.max_num_seqs) == (7, 1, 0.81, 8)
    assert (s.kv_pool_tokens, s.kv_pool_source) == (2_490_000, "cache_config_info")
    assert s.kv_free_tokens == pytest.approx(1_245_000 * (0.19 + 0.53))
    assert s.prefill_tps == pytest.approx(4700 + 874.8, rel=0.05)
    assert s.decode_tps == pytest.approx(65.2 + 34.7, rel=0.05)
    assert s.preemptions_per_s == pytest.approx(0.25, rel=0.05)
    # observations spread evenly over (0.1, 1.0]: p50 0.55 s, p95 0.955 s; ITL over (10, 25] ms
    assert isinstance(s.ttft_p50, Quantile) and s.ttft_p50.value_s == pytest.approx(0.55, rel=0.05)
    assert isinstance(s.ttft_p95, Quantile) and s.ttft_p95.value_s == pytest.approx(0.955, rel=0.05)
    assert isinstance(s.itl_p50, Quantile) and s.itl_p50.value_s == pytest.approx(0.0175, rel=0.05)
    assert s.mean_prompt_tokens == pytest.approx((3 * 8192 + 2048) / 4, rel=0.05)
    assert (s.max_model_len, s.model) == (1_048_576, "dsv4-flash")


async def test_bearer_token_accept_header_and_redirect(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("SPARKTOP_TEST_KEY", "s3cr3t-token")
    fake = FakeVllm()
    fake.set_gauges(running=1, waiting=0, kv_usage=0.1)
    routes: dict[str, Route] = {
        "/metrics": lambda: Reply(307, headers={"Location": "/metrics/"}),
        "/metrics/": lambda: Reply(body=fake.page()),
        "/v1/models": models_route(),
    }
    async with StubServer(routes) as server:
        source = EngineSource(Cfg("e", server.url, api_key_env="SPARKTOP_TEST_KEY"))
        s = await source.sample()
        await source.aclose()
    assert s.state is EngineState.OK and s.running == 1
    path, headers = server.requests[1]
    assert path == "/metrics/"
    assert headers["authorization"] == "Bearer s3cr3t-token"
    assert headers["accept"].startswith("text/plain")
    assert "s3cr3t" not in repr(s) and "s3cr3t" not in caplog.text


async def test_openmetrics_page_served_as_openmetrics() -> None:
    fake = FakeVllm()
    fake.set_gauges(running=2, waiting=3, kv_usage=0.25)
    ctype = "application/openmetrics-text; version=1.0.0; charset=utf-8"
    routes: dict[str, Route] = {
        "/metrics": lambda: Reply(body=fake.page(openmetrics=True), content_type=ctype)
    }
    async with StubServer(routes) as server:
        s = await scrape_once(server.url)
    assert (s.state, s.running, s.waiting, s.kv_usage) == (EngineState.OK, 2, 3, 0.25)
    assert isinstance(s.max_model_len, NA) and "404" in s.max_model_len.reason


def constant(reply: Reply) -> Route:
    return lambda: reply


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_each_failure_degrades_only_that_engine() -> None:
    fake = FakeVllm()
    fake.set_gauges(running=2, waiting=0, kv_usage=0.3)
    page = fake.page()
    behaviours = {
        "hang": Reply(mode="hang"),
        "http500": Reply(500, b"Internal Server Error"),
        "html": Reply(
            body=b"<!doctype html><html><body>Login</body></html>", content_type="text/html"
        ),
        "cut": Reply(body=page, mode="cut"),
        "sglang404": Reply(404, b"Not Found"),
    }
    servers = [StubServer({"/metrics": constant(r)}) for r in behaviours.values()]
    healthy = StubServer(vllm_routes(fake))
    for server in [*servers, healthy]:
        await server.__aenter__()
    try:
        sources = [
            EngineSource(
                Cfg(name, server.url, kind="sglang" if "sglang" in name else "vllm"), timeout_s=1.0
            )
            for name, server in zip(behaviours, servers, strict=True)
        ]
        sources.append(
            EngineSource(Cfg("refused", f"http://127.0.0.1:{free_port()}"), timeout_s=1.0)
        )
        sources.append(EngineSource(Cfg("healthy", healthy.url)))
        got: list[Sample] = []
        poller = Poller(sources, 1.0, got.append)
        samples = {s.engine: s for s in await poller.poll_once() if isinstance(s, EngineSample)}
        await poller.aclose()
    finally:
        for server in [*servers, healthy]:
            await server.__aexit__()
    expect = {
        # per-step or whole-scrape deadline; it took the connection: not "unreachable"
        "hang": (EngineState.NOT_ANSWERING, "accepted the connection, no HTTP response within"),
        "http500": (EngineState.UNAVAILABLE, "HTTP 500"),
        "html": (EngineState.UNAVAILABLE, "not a metrics page (text/html)"),
        "cut": (EngineState.UNAVAILABLE, "body cut off"),
        "sglang404": (EngineState.METRICS_DISABLED, "start SGLang with --enable-metrics"),
        "refused": (EngineState.UNREACHABLE, "connection refused"),  # as the nodes say it
        "healthy": (EngineState.OK, ""),
    }
    for name, (state, words) in expect.items():
        s = samples[name]
        assert s.state is state, (name, s.state, s.message)
        assert words in s.message, (name, s.message)
        assert (s.since_s is None) == (state is EngineState.OK)
    assert samples["healthy"].running == 2 and len(got) == 7
    for name in ("hang", "http500", "html", "cut", "refused"):
        assert isinstance(samples[name].running, NA)


async def test_server_restart_between_scrapes() -> None:
    fake = FakeVllm()
    fake.load["0"] = Load(prefill_tps=1000, decode_tps=50)
    fake.advance(100)
    clock = FakeClock()
    async with StubServer(vllm_routes(fake)) as server:
        source = EngineSource(Cfg("e", server.url), clock=clock)
        await source.sample()
        fresh = FakeVllm()
        fresh.load["0"] = Load(prefill_tps=1000, decode_tps=50)
        fresh.advance(1)
        server.routes["/metrics"] = lambda: Reply(body=fresh.page())
        clock.now += 2
        restarted = await source.sample()
        clock.now += 2
        fresh.advance(2)
        after = await source.sample()
        await source.aclose()
        assert server.count("/v1/models") == 2  # asked again after the restart
    assert restarted.restarted and isinstance(restarted.decode_tps, NA)
    assert not after.restarted and after.decode_tps == pytest.approx(50)


async def test_metrics_404_on_vllm_and_recovery_clears_since() -> None:
    fake = FakeVllm()
    fake.set_gauges(running=1, waiting=0, kv_usage=0.1)
    async with StubServer({"/metrics": lambda: Reply(404)}) as server:
        source = EngineSource(Cfg("e", server.url))
        down = await source.sample()
        server.routes["/metrics"] = lambda: Reply(body=fake.page())
        up = await source.sample()
        await source.aclose()
    assert down.state is EngineState.METRICS_DISABLED and "404" in down.message
    # vLLM always serves /metrics: the hint is about the URL, never SGLang's flag.
    assert "SGLang" not in down.message and "enable-metrics" not in down.message
    assert "vLLM always serves it: is the URL the server's base URL?" in down.message
    assert down.since_s is not None
    assert up.state is EngineState.OK and up.since_s is None


@pytest.mark.parametrize(
    ("named_on", "key_env", "said"),
    [
        ("endpoint", None, "wants a bearer token: export VAR=<token> and add --api-key-env VAR"),
        ("endpoint", "NOPE_NOT_SET", "environment variable NOPE_NOT_SET (--api-key-env) is not"),
        ("local", None, "run with --endpoint http://127.0.0.1:"),
    ],
)
async def test_an_engine_named_on_the_command_line_is_told_the_flag_not_the_key(
    monkeypatch: pytest.MonkeyPatch, named_on: str, key_env: str | None, said: str
) -> None:
    """``--endpoint`` (or the server found on the usual port) has no inventory to set
    ``api_key_env:`` in: the 401 names ``--api-key-env``."""
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    async with StubServer({"/metrics": lambda: Reply(401)}) as server:
        source = EngineSource(Cfg("e", server.url, api_key_env=key_env), named_on=named_on)
        s = await source.sample()
        await source.aclose()
    assert s.message.startswith("HTTP 401: ") and said in s.message, s.message
    assert "api_key_env:" not in s.message and "(api_key_env)" not in s.message


@pytest.mark.parametrize(
    ("key_env", "value", "said"),
    [
        ("NOPE_NOT_SET", None, "environment variable NOPE_NOT_SET (api_key_env) is not set"),
        ("SPARKTOP_TEST_KEY", "wrong", "refused the token in SPARKTOP_TEST_KEY"),
        (None, None, "set api_key_env: VAR on the engine"),
    ],
)
async def test_a_refused_token_names_its_variable_or_how_to_set_one(
    monkeypatch: pytest.MonkeyPatch, key_env: str | None, value: str | None, said: str
) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    if value is not None:
        monkeypatch.setenv(str(key_env), value)
    async with StubServer({"/metrics": lambda: Reply(401)}) as server:
        source = EngineSource(Cfg("e", server.url, api_key_env=key_env))
        s = await source.sample()
        await source.aclose()
    assert s.state is EngineState.UNAVAILABLE
    assert s.message.startswith("HTTP 401: ") and said in s.message, s.message


async def test_a_plain_http_engine_makes_no_tls_context() -> None:
    """An ``http`` origin never negotiates TLS (redirects stay within it, scheme included):
    its client builds no ``ssl.SSLContext`` (OpenSSL's setup, ~0.45 MB) and loads no CA."""
    routes: dict[str, Route] = {
        "/metrics": lambda: Reply(body=FakeVllm().page()),
        "/v1/models": models_route(),
    }
    async with StubServer(routes) as server:
        source = EngineSource(Cfg("e", server.url))
        s = await source.sample()
        client = source._client
        await source.aclose()
    assert s.ok, s.message
    assert client is not None and client._tls is None


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself (no CA vouches for it) and its key."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


async def test_an_https_engine_is_verified_against_certifis_bundle_and_fails_closed(
    tmp_path: Path,
) -> None:
    """``https`` verifies the server's certificate and name against certifi's CA bundle (as
    httpx did): a self-signed certificate is refused, the scrape says why and sends nothing."""
    cert, key = _self_signed(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    asked: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, ssl.SSLError):
            asked.append(await reader.read(1024))
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    try:
        source = EngineSource(Cfg("e", f"https://127.0.0.1:{port}"))
        s = await source.sample()
        await source.aclose()
        client = EngineClient(f"https://127.0.0.1:{port}", timeout_s=5.0)
        with pytest.raises(ConnectError) as refused:
            async with client.stream(client.url("/metrics")):
                pass
        await client.aclose()
    finally:
        server.close()
        await server.wait_closed()
    assert s.state is EngineState.UNREACHABLE and "certificate verify failed" in s.message, s
    assert not any(asked)  # no request went out over the unverified connection
    assert isinstance(refused.value.__cause__, ssl.SSLCertVerificationError)
    tls = client._tls
    assert tls is not None and tls.verify_mode is ssl.CERT_REQUIRED and tls.check_hostname
    assert tls.cert_store_stats()["x509_ca"] > 0  # certifi's bundle


async def test_a_body_cut_off_says_how_much_of_it_came_in_whole_words() -> None:
    """h11's hang-up words, not clipped mid-word, and the byte count said once."""
    page = FakeVllm().page()
    async with StubServer({"/metrics": constant(Reply(body=page, mode="cut"))}) as server:
        s = await scrape_once(server.url)
    half = len(page) // 2
    assert s.state is EngineState.UNAVAILABLE
    assert s.message == (
        f"body cut off after {half} of {len(page)} bytes "
        "(peer closed connection without sending complete message body)"
    )


def test_a_long_protocol_error_is_cut_at_a_word() -> None:
    from sparktop.sources.engines.http import protocol_reason
    from sparktop.sources.engines.wire import ProtocolError

    reason = protocol_reason(ProtocolError("illegal header line " + "wordy " * 30 + ": b'\\x00'"))
    assert reason.startswith("not an HTTP answer (illegal header line wordy")
    assert reason.endswith(" wordy…)") and len(reason) <= 80 + len("not an HTTP answer ()")
