"""A loopback stand-in for llama.cpp's ``llama-server`` serving its REAL captured pages.

``/metrics`` is ``fixtures/real/llama-server-tiny-{idle,load}.prom`` verbatim (switch with
:attr:`LlamaServer.page`); ``/props``, ``/v1/models``, ``/slots`` and ``POST /tokenize``
answer in the shapes ``tools/server/README.md`` documents, with the start-up facts of the
captured run (``-c 4096 -np 2``: two slots of 2,048 tokens). ``/tokenize`` counts one token
per whitespace-separated word of ``{"content": …}`` and answers ``{"tokens": []}`` to
vLLM's ``{"prompt": …}``, as the real server did. ``/version`` is 404 (llama.cpp has none).
For tests that run their own event loop (the CLI) or Textual's: a stdlib server in a thread.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from sparktop.testing.http_stub import serve_threaded
from sparktop.testing.shared import FIXTURES

REAL = FIXTURES / "real"
N_CTX_SLOT = 2048
"""``-c 4096 -np 2``: each of the two slots holds 2,048 tokens."""
TOTAL_SLOTS = 2
MODEL_ID = "tiny-llama-f32.gguf"
BUILD_INFO = "b11434-0a1b2c3"


REAL_PAGES = {"idle": "llama-server-tiny-idle.prom", "load": "llama-server-tiny-load.prom"}
"""The captured pages by state (named whole, so a search for a fixture finds its users)."""


def real_page(state: str) -> str:
    """The captured ``/metrics`` page of ``state`` (``idle`` or ``load``), verbatim; a
    ``KeyError`` for another state."""
    return (REAL / REAL_PAGES[state]).read_text(encoding="utf-8")


def _slot(i: int, busy: bool) -> dict[str, Any]:
    return {
        "id": i,
        "id_task": 7 + i if busy else -1,
        "n_ctx": N_CTX_SLOT,
        "speculative": False,
        "is_processing": busy,
        **(
            {"n_prompt_tokens": 188, "n_prompt_tokens_processed": 176, "n_prompt_tokens_cache": 0}
            if busy
            else {}
        ),
        "params": {"n_predict": -1, "seed": 4294967295, "temperature": 0.8, "stream": True},
        "next_token": {
            "has_next_token": busy,
            "has_new_line": False,
            "n_remain": -1,
            "n_decoded": 12 if busy else 0,
        },
    }


PROPS: dict[str, Any] = {
    "default_generation_settings": {**_slot(0, False), "prompt": ""},
    "total_slots": TOTAL_SLOTS,
    "model_path": f"/models/{MODEL_ID}",
    "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
    "chat_template_caps": {},
    "modalities": {"vision": False, "audio": False},
    "build_info": BUILD_INFO,
    "is_sleeping": False,
}
MODELS: dict[str, Any] = {
    "object": "list",
    "data": [
        {
            "id": MODEL_ID,
            "object": "model",
            "created": 1764892800,
            "owned_by": "llamacpp",
            "meta": {
                "vocab_type": 2,
                "n_vocab": 4096,
                "n_ctx_train": 2048,
                "n_embd": 256,
                "n_params": 2360000,
                "size": 9441280,
            },
        }
    ],
}


def token_ids(text: str) -> list[int]:
    """The stub's tokenizer: one id per whitespace-separated word."""
    return [1000 + len(word) for word in text.split()]


@dataclass
class LlamaServer:
    """The running stub: its base URL, the page it serves, and the tokenize bodies it got."""

    url: str = ""
    page: str = "idle"
    tokenize_bodies: list[dict[str, Any]] = field(default_factory=list)
    slots: str = "ok"
    """How ``/slots`` answers: ``ok``, ``disabled`` (501, as ``--no-slots``) or ``garbled``."""


@contextlib.contextmanager
def serve_llamacpp(page: str = "idle") -> Iterator[LlamaServer]:
    """Run the stub on 127.0.0.1 (a free port) serving ``page`` first; yields its state."""
    state = LlamaServer(page=page)

    class _Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _json(self, doc: object, status: int = 200) -> None:
            self._send(status, json.dumps(doc).encode(), "application/json; charset=utf-8")

        def do_GET(self) -> None:
            if self.path == "/metrics":
                body = real_page(state.page).encode()
                self._send(200, body, "text/plain; version=0.0.4")
            elif self.path == "/props":
                self._json(PROPS)
            elif self.path in ("/v1/models", "/models"):
                self._json(MODELS)
            elif self.path == "/slots" and state.slots == "disabled":
                error = {"code": 501, "message": "This server does not support slots endpoint."}
                self._json({"error": {**error, "type": "not_supported_error"}}, 501)
            elif self.path == "/slots" and state.slots == "garbled":
                self._send(200, b'[{"id": 0, "is_proc', "application/json")
            elif self.path == "/slots":
                self._json([_slot(i, state.page == "load") for i in range(TOTAL_SLOTS)])
            else:
                self._json(
                    {
                        "error": {
                            "code": 404,
                            "message": "File Not Found",
                            "type": "not_found_error",
                        }
                    },
                    404,
                )

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            if self.path != "/tokenize":
                self._json({"error": {"code": 404, "message": "File Not Found"}}, 404)
                return
            state.tokenize_bodies.append(body)
            content = body.get("content") if isinstance(body, dict) else None
            self._json({"tokens": token_ids(content) if isinstance(content, str) else []})

        def log_message(self, *args: object) -> None:
            pass

    with serve_threaded(_Handler) as url:
        state.url = url
        yield state
