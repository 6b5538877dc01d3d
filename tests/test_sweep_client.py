"""The sweep's request timing and cell arithmetic: a loopback server that streams what it is
told to, including errors and garbage, and cells computed by hand."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tracemalloc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from aiohttp import ClientConnectionResetError, web

from sparktop.sources.engines.kinds import Tokenize
from sparktop.sweep.runner.bench_client import (
    LineTooLong,
    RequestResult,
    capped_lines,
    stream_completion,
)
from sparktop.sweep.runner.sweep_cells import CellRuns, cell_figures, no_figures_reason, run_figures


@asynccontextmanager
async def server(handler: Callable[..., object]) -> AsyncIterator[httpx.AsyncClient]:
    app = web.Application()
    app.router.add_post("/v1/completions", handler)  # type: ignore[arg-type]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield client
    finally:
        await runner.cleanup()


def chunk(doc: object) -> bytes:
    return f"data: {json.dumps(doc)}\n\n".encode()


async def streaming(request: web.Request, parts: list[bytes]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for part in parts:
        await response.write(part)
    await response.write_eof()
    return response


async def test_ttft_is_the_first_content_token_and_usage_gives_the_counts() -> None:
    seen: list[dict[str, object]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(await request.json())
        parts = [
            chunk({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            chunk({"choices": [{"index": 0, "text": ""}]}),
            chunk({"choices": [{"index": 0, "text": " one"}]}),
            chunk({"choices": [{"index": 0, "text": " two three"}]}),
            chunk({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}),
            b"data: [DONE]\n\n",
        ]
        return await streaming(request, parts)

    async with server(handler) as client:
        result = await stream_completion(client, "m", [1, 2, 3], 3, sent_prompt_tokens=3)
    assert result.ok and result.usage_reported
    assert (result.prompt_tokens, result.output_tokens) == (7, 3)
    assert 0 < result.ttft_s <= result.e2e_s and result.decode_s >= 0
    body = seen[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["prompt"] == [1, 2, 3] and body["max_tokens"] == 3 and body["ignore_eos"] is True


async def test_failures_are_results_with_one_printable_line() -> None:
    replies = iter(
        [
            web.json_response({"message": "bad \x1b]0;owned\x07 prompt"}, status=400),
            [b"data: {not json\n\n"],
            [chunk({"choices": [{"index": 0, "text": ""}]}), b"data: [DONE]\n\n"],
            [chunk({"error": {"message": "engine died"}})],
        ]
    )

    async def handler(request: web.Request) -> web.StreamResponse:
        reply = next(replies)
        if isinstance(reply, web.Response):
            return reply
        return await streaming(request, reply)

    async with server(handler) as client:
        results = [
            await stream_completion(client, "m", "x", 4, sent_prompt_tokens=1) for _ in range(4)
        ]
    async with httpx.AsyncClient(base_url="http://127.0.0.1:9") as nobody:
        dead = await stream_completion(nobody, "m", "x", 4, sent_prompt_tokens=1)
    assert not any(r.ok for r in [*results, dead])
    assert results[0].error.startswith("HTTP 400: bad ") and "\x1b" not in results[0].error
    assert "garbled" in results[1].error
    assert "without a token" in results[2].error
    assert "engine died" in results[3].error
    assert dead.error == "connection refused"
    assert all(r.error.isprintable() for r in [*results, dead])


def test_cell_figures_follow_the_seed_definitions_and_skip_failures() -> None:
    a = RequestResult(True, 1000, 11, ttft_s=1.0, decode_s=2.0, e2e_s=3.0)
    b = RequestResult(True, 1000, 11, ttft_s=2.0, decode_s=2.0, e2e_s=4.0)
    failed = RequestResult(False, error="HTTP 500")
    run = run_figures([a, b, failed], wall_s=4.1)
    assert run is not None
    assert run["ttft_s"] == 1.5
    assert run["prefill_tps"] == (1000 / 1.0 + 1000 / 2.0) / 2
    assert run["decode_tps"] == 10 / 2.0
    assert run["aggregate_prefill_tps"] == 2000 / 2.0
    assert run["aggregate_tps"] == 22 / (4.0 - 2.0)  # last token − max TTFT
    assert run["aggregate_e2e_tps"] == 22 / 4.1
    slow = RequestResult(True, 1000, 11, ttft_s=3.0, decode_s=4.0, e2e_s=7.0)
    cell = CellRuns("1K", 1024, 2, ((a, b, failed), (slow, slow), (a, a)), (4.1, 7.0, 3.0))
    figures = cell_figures(cell)
    assert figures is not None and cell.failed == 1 and cell.requests == 7
    assert figures["ttft_s"] == 1.5  # median of 1.5, 3.0, 1.0
    assert cell_figures(CellRuns("1K", 1024, 1, ((failed,),), (1.0,))) is None


def test_a_request_read_back_from_the_runs_file_gives_the_same_figures() -> None:
    # A resumed sweep derives its kept cells from this record, so the record must give the
    # very figures the first run derived (stopwatch times carry more than 6 decimals).
    results = [
        RequestResult(True, 1024, 32, ttft_s=0.123456789, decode_s=0.587654321, e2e_s=0.71111),
        RequestResult(True, 1024, 32, ttft_s=0.1234564, decode_s=0.5876549, e2e_s=0.7111113),
    ]
    back = [RequestResult.from_json(json.loads(json.dumps(r.as_json()))) for r in results]
    assert back == results
    assert run_figures(back, 0.8) == run_figures(results, 0.8)


async def test_a_stream_that_never_ends_is_cut_at_the_request_deadline() -> None:
    """Issue 30 case 3: the timeout was per read, so a stream sending a token every second
    ran past 150 s under ``--timeout 20``."""

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError, ClientConnectionResetError):
            while True:
                await response.write(chunk({"choices": [{"index": 0, "text": " tok"}]}))
                await asyncio.sleep(0.05)
        return response

    async with server(endless) as client:
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await stream_completion(client, "m", "x", 4, sent_prompt_tokens=1, deadline_s=1.0)
        elapsed_s = loop.time() - started
    assert not result.ok
    assert result.error == "no complete answer within the 1 s deadline (--timeout)"
    assert elapsed_s < 3, elapsed_s


async def test_an_oversized_stream_line_is_refused_while_read() -> None:
    """``sweep`` grew to 280-373 MB on a giant line before refusing it."""
    sent = [0]

    async def giant(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError, ClientConnectionResetError):
            await response.write(b'data: {"choices": [{"text": "')
            for _ in range(256):  # 256 MiB, no newline
                await response.write(b"x" * (1 << 20))
                sent[0] += 1
        return response

    async with server(giant) as client:
        tracemalloc.start()
        try:
            result = await stream_completion(client, "m", "x", 4, sent_prompt_tokens=1)
            _now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert not result.ok and result.error == "a stream line over 1 MiB: not a completion stream"
    assert peak < 32 << 20, f"peak {peak >> 20} MiB"
    assert sent[0] < 256


def test_capped_lines_splits_like_sse_and_refuses_past_the_limit() -> None:
    async def lines(parts: list[bytes], limit: int = 8) -> list[str]:
        async def gen() -> AsyncIterator[bytes]:
            for part in parts:
                yield part

        return [line async for line in capped_lines(gen(), limit)]

    assert asyncio.run(lines([b"ab\r\ncd", b"e\n\nf"])) == ["ab", "cde", "", "f"]
    assert asyncio.run(lines([b"12345678\n"])) == ["12345678"]
    for parts in ([b"12345", b"6789"], [b"123456789\n"], [b"ok\n1234", b"56789\n"]):
        with pytest.raises(LineTooLong):
            asyncio.run(lines(parts))


async def test_discovery_is_bounded_per_request_not_per_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``sweep``'s client reads with ``--timeout`` (1,800 s) per read: a server trickling
    ``/v1/models`` held the sweep before it began. Each discovery request has a deadline."""
    from sparktop.errors import RuntimeFailure
    from sparktop.sweep.runner import sweep_run

    monkeypatch.setattr(sweep_run, "DISCOVERY_STEP_S", 0.5)

    async def drip(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError, ClientConnectionResetError):
            for byte in b'{"data": [{"id": "m", "parent": null}]}':
                await response.write(bytes([byte]))
                await asyncio.sleep(0.2)
        return response

    app = web.Application()
    app.router.add_get("/v1/models", drip)
    app.router.add_get("/version", drip)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with sweep_run.client_for(url, {}, 1800.0) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(RuntimeFailure, match="no complete answer to GET /v1/models"):
                await sweep_run.discover(client, None, None)
            version = await sweep_run._version(client)
            elapsed_s = loop.time() - started
    finally:
        await runner.cleanup()
    assert version == "n/a (no /version)"
    assert elapsed_s < 4, elapsed_s


async def test_a_trickling_tokenize_is_cut_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparktop.errors import RuntimeFailure
    from sparktop.sweep.runner import bench_prompts

    monkeypatch.setattr(bench_prompts, "TOKENIZE_DEADLINE_S", 0.5)

    async def drip(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        with contextlib.suppress(ConnectionError, ClientConnectionResetError):
            for byte in b'{"tokens": [1, 2, 3], "count": 3}':
                await response.write(bytes([byte]))
                await asyncio.sleep(0.2)
        return response

    app = web.Application()
    app.router.add_post("/tokenize", drip)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        async with httpx.AsyncClient(base_url=url, timeout=1800) as client:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(RuntimeFailure, match=r"no complete answer within 0\.5 s"):
                await bench_prompts._tokenize_ids(client, "hello", False, Tokenize())
            elapsed_s = loop.time() - started
    finally:
        await runner.cleanup()
    assert elapsed_s < 3, elapsed_s


async def test_an_html_error_page_shows_its_status_and_reason_not_the_markup() -> None:
    # What python -m http.server answers a POST: an HTML page under 501.
    page = (
        '<!DOCTYPE HTML>\n<html lang="en">\n<head>\n<title>Error response</title>\n</head>\n'
        "<body><h1>Error response</h1><p>Error code: 501</p></body>\n</html>\n"
    )
    replies = iter(
        [
            web.Response(status=501, text=page, content_type="text/html"),
            web.Response(status=503, text="upstream\n\x1b[31mbusy\x1b[0m " + "x" * 500),
        ]
    )

    async def handler(request: web.Request) -> web.Response:
        return next(replies)

    async with server(handler) as client:
        html, text = [
            await stream_completion(client, "m", "x", 4, sent_prompt_tokens=1) for _ in range(2)
        ]
    assert html.error == "HTTP 501: Not Implemented"
    assert text.error.startswith("HTTP 503: upstream ") and "busy" in text.error
    assert "\x1b" not in text.error and "\n" not in text.error and len(text.error) <= 200


def test_a_cell_without_decode_says_why_and_not_that_every_run_failed() -> None:
    """A fresh-eyes trial: every request of a cell succeeded but its 16 tokens came in one
    burst (decode_s 0): the sweep said "no figures (every run failed)" in the profile's
    notes and "no figures (), 0 failed" on screen."""
    burst = RequestResult(ok=True, prompt_tokens=2048, output_tokens=16, ttft_s=2.96, e2e_s=2.96)
    cell = CellRuns("2K", 2048, 1, ((burst,),), (2.96,))
    assert cell_figures(cell) is None
    reason = no_figures_reason(cell)
    assert "decode_tps" in reason and "one burst" in reason and "not a failure" in reason
    failed = RequestResult(ok=False, error="HTTP 500")
    dead = CellRuns("2K", 2048, 1, ((failed,),), (1.0,))
    assert no_figures_reason(dead) == "every request failed (HTTP 500)"
