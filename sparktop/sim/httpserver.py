"""The HTTP face of a simulated vLLM engine (aiohttp, loopback).

Routes as vLLM's OpenAI-compatible server has them: ``GET /metrics`` (Prometheus text, or
OpenMetrics when the ``Accept`` header asks), ``/health``, ``/version``, ``/v1/models``,
``POST /tokenize`` (root path), ``POST /v1/completions`` and ``/v1/chat/completions``
(JSON, or SSE with ``"stream": true``), errors as vLLM 0.32's JSON error envelope. Length
limits as 0.32 applies them: a prompt over ``max_model_len`` or ``max_tokens`` over it is
refused (400, vLLM's messages); a prompt + ``max_tokens`` over it is accepted and the
output shortened to the room left. While the
engine is restarting every route answers 503. Timing comes from the engine model: the first
streamed chunk leaves at the request's TTFT, the next ones at its decode pace.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from sparktop.sim.clock import SimClock
from sparktop.sim.engine import EngineModel, Phase, SimRequest
from sparktop.sim.metrics import EngineCollector, engine_registry
from sparktop.sim.model import STEP_S

VERSION = "0.32.0+sparktop.sim"
"""What ``/version`` answers: the release whose request handling the simulator follows (a
prompt + ``max_tokens`` over ``max_model_len`` shortened, not refused); the budget keys its
verdict on it (:mod:`sparktop.sweep.budget.ceiling`)."""
SIM_TIME_HEADER = "X-Sparktop-Sim-Time"
"""Response header on ``/metrics``: the simulated second the page describes (tests use it)."""
_WORDS = (" the", " cluster", " token", " cache", " decode", " spark", " node", " model", ".")
_TOKEN_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|\w{1,6}|[^\w\s]")
"""Simulated tokenizer: one token per CJK character, per ≤6-letter word piece, per symbol."""


def count_tokens(text: str) -> int:
    """Token count of the simulated tokenizer (deterministic; not any real model's)."""
    return len(_TOKEN_RE.findall(text))


def _error(
    status: int,
    message: str,
    kind: str = "BadRequestError",
    param: str | None = None,
    value: int | None = None,
) -> web.Response:
    """vLLM 0.32's error envelope: ``{"error": {message, type, param, code}}``, the message
    ending ``(parameter=…, value=…)`` when a parameter is at fault."""
    if param is not None:
        message = f"{message} (parameter={param}, value={value})"
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return web.json_response(body, status=status)


class EngineServer:
    """Serves one :class:`EngineModel`. ``refresh`` brings the cluster up to now and returns
    the simulated time the model is at."""

    def __init__(self, engine: EngineModel, clock: SimClock, refresh: Callable[[], float]) -> None:
        self.engine = engine
        self.clock = clock
        self.refresh = refresh
        self.registry = engine_registry(EngineCollector(engine, clock.epoch_s))
        self.created = int(time.time())
        self.app = web.Application(middlewares=[self._down_middleware])
        self.app.add_routes(
            [
                web.get("/metrics", self.metrics),
                web.get("/health", self.health),
                web.get("/version", self.version),
                web.get("/v1/models", self.models),
                web.post("/tokenize", self.tokenize),
                web.post("/v1/completions", self.completions),
                web.post("/v1/chat/completions", self.completions),
            ]
        )
        self._runner: web.AppRunner | None = None
        self.host = "127.0.0.1"
        self.port = 0

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.host = host
        self.port = int(self._runner.addresses[0][1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- routes ----------------------------------------------------------------------------

    @web.middleware
    async def _down_middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.refresh()
        if not self.engine.is_up(self.clock.now()):
            return _error(503, "engine is starting up", "ServiceUnavailableError")
        response: web.StreamResponse = await handler(request)
        return response

    async def metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        model_time = self.refresh()
        body = encoder(self.registry)
        headers = {"Content-Type": content_type, SIM_TIME_HEADER: f"{model_time:.3f}"}
        return web.Response(body=body, headers=headers)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    async def models(self, request: web.Request) -> web.Response:
        e = self.engine
        card = {
            "id": e.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": e.model_name,
            "parent": None,
            "max_model_len": e.limits.max_model_len,
        }
        return web.json_response({"object": "list", "data": [card]})

    async def _json(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        return body

    def _prompt_tokens(self, body: dict[str, Any]) -> int | None:
        if "messages" in body:
            messages = body["messages"]
            if not isinstance(messages, list):
                return None
            text = "".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
            return count_tokens(text) + 4 * len(messages) + 2
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            return count_tokens(prompt)
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
            return len(prompt)  # token ids, as vLLM accepts them
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            return count_tokens(prompt[0])
        return None

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        count = self._prompt_tokens(body)
        if count is None:
            return _error(400, "expected 'prompt' (text) or 'messages'")
        return web.json_response(
            {
                "count": count,
                "max_model_len": self.engine.limits.max_model_len,
                "tokens": [1000 + i % 30000 for i in range(count)],
                "token_strs": None,
            }
        )

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        chat = request.path.endswith("/chat/completions")
        prompt = self._prompt_tokens(body)
        if prompt is None:
            return _error(400, "expected 'messages'" if chat else "expected 'prompt'")
        limits = self.engine.limits
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = limits.output_tokens if chat else 16
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return _error(400, "max_tokens must be a positive integer")
        if max_tokens > limits.max_model_len:
            return _error(
                400,
                f"max_tokens={max_tokens} cannot be greater than max_model_len="
                f"{limits.max_model_len}. Please request fewer output tokens.",
                param="max_tokens",
                value=max_tokens,
            )
        if prompt > limits.max_model_len:
            return _error(
                400,
                f"This model's maximum context length is {limits.max_model_len} tokens. However, "
                f"your prompt contains {prompt} input tokens, which exceeds this limit even "
                "without any output tokens. Please reduce the length of the input prompt.",
                param="input_tokens",
                value=prompt,
            )
        # vLLM 0.32 accepts a prompt + max_tokens over max_model_len and shortens the output
        # to what the context has room for (finish_reason "length").
        max_tokens = min(max_tokens, limits.max_model_len - prompt)
        if max_tokens < 1:
            return _error(400, "max_tokens must be at least 1, got 0.", param="max_tokens", value=0)
        req = self.engine.new_request(self.clock.now(), prompt, max_tokens, tag="http")
        req.event = asyncio.Event()
        try:
            if body.get("stream"):
                return await self._stream(request, req, chat, body)
            while req.phase is not Phase.DONE:
                await self._progress(req)
            return web.json_response(self._final(req, chat, body))
        finally:
            self.engine.abort(req)

    async def _progress(self, req: SimRequest) -> None:
        """Wait until the engine has news for ``req`` (tokens, or the end).

        While a client waits the model is advanced at every simulated step boundary, not
        only on the runner's tick, so the tokens leave at the step they were made in and a
        client's TTFT and decode rate are as fine as the model's step (0.1 simulated s) at
        any ``--speed``.
        """
        event = req.event
        assert event is not None
        while not event.is_set():
            now = self.clock.now()
            boundary = (int(now / STEP_S + 1e-9) + 1) * STEP_S
            # A paused clock does not move: look again at a relaxed pace.
            delay = 0.05 if self.clock.paused else self.clock.wall_s(boundary - now) + 1e-4
            try:
                await asyncio.wait_for(event.wait(), timeout=delay)
            except TimeoutError:
                self.refresh()
        event.clear()

    def _final(self, req: SimRequest, chat: bool, body: dict[str, Any]) -> dict[str, Any]:
        text = "".join(_WORDS[i % len(_WORDS)] for i in range(req.generated))
        choice: dict[str, Any] = {"index": 0, "finish_reason": req.finish_reason}
        if chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        return {
            "id": f"cmpl-{req.id}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or self.engine.model_name,
            "choices": [choice],
            "usage": self._usage(req),
        }

    @staticmethod
    def _usage(req: SimRequest) -> dict[str, int]:
        return {
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.generated,
            "total_tokens": req.prompt_tokens + req.generated,
        }

    async def _stream(
        self, request: web.Request, req: SimRequest, chat: bool, body: dict[str, Any]
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        base = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{req.id}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or self.engine.model_name,
        }

        async def send(choice: dict[str, Any], **extra: Any) -> None:
            data = json.dumps({**base, "choices": [choice], **extra})
            await response.write(f"data: {data}\n\n".encode())

        if chat:
            await send({"index": 0, "delta": {"role": "assistant", "content": ""}})
        sent = 0
        while True:
            await self._progress(req)
            done = req.phase is Phase.DONE
            new = req.generated - sent
            if new > 0:
                text = "".join(_WORDS[(sent + i) % len(_WORDS)] for i in range(new))
                part = {"delta": {"content": text}} if chat else {"text": text}
                last = {"finish_reason": req.finish_reason} if done else {"finish_reason": None}
                await send({"index": 0, **part, **last})
                sent = req.generated
            elif done:
                await send({"index": 0, "delta": {}, "finish_reason": req.finish_reason})
            if done:
                break
        options = body.get("stream_options") or {}
        if isinstance(options, dict) and options.get("include_usage"):
            usage = json.dumps({**base, "choices": [], "usage": self._usage(req)})
            await response.write(f"data: {usage}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
