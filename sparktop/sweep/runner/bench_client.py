"""One streamed completion, timed the way a sweep reports it (``sparktop sweep``).

``POST {url}/v1/completions`` with ``"stream": true`` (and ``stream_options.include_usage``,
which vLLM and SGLang answer with a last chunk carrying ``usage``). Timings are wall-clock
seconds from the moment the request is sent:

- ``ttft_s``: the first chunk whose ``choices[0].text`` is not empty (a first chunk with only
  a role or an empty text is not a token);
- ``decode_s``: from that first content token to the last one;
- ``e2e_s``: until the stream ends (``[DONE]`` or the connection closes after the last chunk);
- ``itl_s``: the server's own mean inter-token latency over the request's run, set by the
  sweep when the server's histogram saw exactly that run's tokens
  (:mod:`sparktop.sweep.runner.server_itl`); decode is then 1 / it, as the monitor reads it live.

Token counts come from ``usage`` when the server sends it, else prompt = what was sent and
output = content chunks (one token each on vLLM; marked ``usage_reported=False``).
A request that fails (HTTP error, broken or garbled stream, no token) is a result with
``ok=False`` and a one-line ``error``; it is counted, never averaged in. So is one past its
deadline (the whole request, not one read: a stream that never ends is cut there) and one
whose stream sends a line over :data:`MAX_LINE_BYTES` (refused while it is read, never held).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from sparktop.safe_text import printable
from sparktop.sweep.tokens.exact_tokens import connect_reason

MAX_LINE_BYTES = 1 << 20
"""An SSE line longer than this is not a completion chunk (a hostile or broken server)."""


def clean(text: str, limit: int = 160) -> str:
    """Server text as one short line: whitespace folded, every control, bidi or zero-width
    character made a visible symbol (:func:`sparktop.safe_text.printable`), cut to ``limit``."""
    folded = printable(" ".join(text.split()))
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One request's measurements. Times in s, token counts in tokens; on failure ``ok`` is
    False, ``error`` says why and the figures are 0."""

    ok: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float = 0.0
    decode_s: float = 0.0
    e2e_s: float = 0.0
    usage_reported: bool = False
    error: str = ""
    itl_s: float = 0.0
    """The server's mean inter-token latency over this request's run (s; 0: not known)."""

    @property
    def prefill_tps(self) -> float:
        """Prompt tokens ÷ TTFT, tok/s (0 when unknown)."""
        return self.prompt_tokens / self.ttft_s if self.ok and self.ttft_s > 0 else 0.0

    @property
    def decode_tps(self) -> float:
        """1 / the server's mean inter-token latency when known (:attr:`itl_s`), else output
        tokens after the first ÷ time after the first as the client saw them, tok/s (0 with
        one token). The client's clock reads a stream that arrived in one burst (a busy
        frontend, a fast small model) as thousands of tok/s; the server's is what the
        monitor compares with."""
        if not self.ok or self.output_tokens < 2:
            return 0.0
        if self.itl_s > 0:
            return 1.0 / self.itl_s
        if self.decode_s <= 0:
            return 0.0
        return (self.output_tokens - 1) / self.decode_s

    def as_json(self) -> dict[str, Any]:
        """The runs file's record: times unrounded, so a resumed sweep derives the kept cells'
        rows from exactly the numbers the first run derived them from."""
        return {
            "ok": self.ok,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "ttft_s": self.ttft_s,
            "decode_s": self.decode_s,
            "e2e_s": self.e2e_s,
            "usage_reported": self.usage_reported,
            "error": self.error,
            "itl_s": self.itl_s,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RequestResult:
        return cls(
            ok=bool(doc["ok"]),
            prompt_tokens=int(doc["prompt_tokens"]),
            output_tokens=int(doc["output_tokens"]),
            ttft_s=float(doc["ttft_s"]),
            decode_s=float(doc["decode_s"]),
            e2e_s=float(doc["e2e_s"]),
            usage_reported=bool(doc["usage_reported"]),
            error=str(doc["error"]),
            itl_s=float(doc.get("itl_s", 0.0)),
        )


def _failed(error: str, start: float) -> RequestResult:
    return RequestResult(ok=False, e2e_s=time.perf_counter() - start, error=clean(error))


def _chunk_text(doc: Any) -> str:
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    text = choices[0].get("text")
    if text is None:  # a chat-style chunk
        delta = choices[0].get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
    return text if isinstance(text, str) else ""


def _usage(doc: Any) -> tuple[int, int] | None:
    usage = doc.get("usage") if isinstance(doc, dict) else None
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int) and prompt > 0 and completion > 0:
        return prompt, completion
    return None


class LineTooLong(Exception):
    """A stream line over :data:`MAX_LINE_BYTES`."""


async def capped_lines(
    chunks: AsyncIterator[bytes], limit: int = MAX_LINE_BYTES
) -> AsyncIterator[str]:
    """The lines of a byte stream (LF or CRLF; decoded as UTF-8, errors replaced), each
    refused with :class:`LineTooLong` as soon as it passes ``limit`` bytes unfinished."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        if b"\n" not in chunk:
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                raise LineTooLong
            continue
        first, *lines, rest = chunk.split(b"\n")
        parts.append(first)
        for line in (b"".join(parts), *lines):
            if len(line) > limit:
                raise LineTooLong
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        parts, size = [rest], len(rest)
    if size:
        yield b"".join(parts).rstrip(b"\r").decode("utf-8", "replace")


def request_body(
    model: str, prompt: list[int] | str, max_tokens: int, *, ignore_eos: bool = True
) -> dict[str, Any]:
    """The completion request: greedy, exactly ``max_tokens`` out where the server honours
    ``ignore_eos`` (vLLM, SGLang), usage in the stream."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True
    return body


async def stream_completion(
    client: httpx.AsyncClient,
    model: str,
    prompt: list[int] | str,
    max_tokens: int,
    *,
    sent_prompt_tokens: int,
    deadline_s: float | None = None,
) -> RequestResult:
    """Send one streamed completion and time it; never raises for a server's fault.

    ``sent_prompt_tokens`` is what the prompt holds by our count (used when the server
    reports no ``usage``). ``deadline_s`` bounds the whole request (default: the client's
    read timeout)."""
    body = request_body(model, prompt, max_tokens)
    start = time.perf_counter()
    deadline = deadline_s if deadline_s is not None else client.timeout.read
    timings = _Timings()
    try:
        async with asyncio.timeout(deadline):
            failed = await _stream(client, body, start, timings)
    except TimeoutError:
        return _failed(f"no complete answer within the {deadline:g} s deadline (--timeout)", start)
    except LineTooLong:
        return _failed("a stream line over 1 MiB: not a completion stream", start)
    except httpx.TimeoutException:
        return _failed("timed out", start)
    except httpx.HTTPError as exc:
        return _failed(connect_reason(exc), start)
    if failed is not None:
        return failed
    end = time.perf_counter()
    first, last, chunks, usage = timings.first, timings.last, timings.chunks, timings.usage
    if not chunks:
        return _failed("the stream ended without a token", start)
    prompt_tokens, output_tokens = usage or (sent_prompt_tokens, chunks)
    return RequestResult(
        ok=True,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        ttft_s=first - start,
        decode_s=last - first,
        e2e_s=end - start,
        usage_reported=usage is not None,
    )


@dataclass(slots=True)
class _Timings:
    """What a stream gave so far: first and last content token (perf_counter s), content
    chunks, the server's usage."""

    first: float = 0.0
    last: float = 0.0
    chunks: int = 0
    usage: tuple[int, int] | None = None


ERROR_TEXT_CHARS = 200
"""A server's plain-text error is shown up to this long (one line)."""


def _error_message(response: httpx.Response, text: str) -> str:
    """What a failed completion said, printable and one short line: the JSON error's
    ``message``, else a short plain-text body, else (an HTML page, an empty body) the
    status's reason phrase."""
    with contextlib.suppress(ValueError, AttributeError):
        doc = json.loads(text)
        # vLLM >= 0.32 nests it: {"error": {"message": ...}}; older ones did not
        inner = doc.get("error")
        text = str((inner if isinstance(inner, dict) else doc).get("message", text))
    text = " ".join(text.split())
    html = "html" in response.headers.get("content-type", "") or text.startswith("<")
    if html or not text:
        return printable(response.reason_phrase[:60]) or "no message"
    short = text[:ERROR_TEXT_CHARS] + ("…" if len(text) > ERROR_TEXT_CHARS else "")
    return printable(short)


async def _stream(
    client: httpx.AsyncClient, body: dict[str, Any], start: float, timings: _Timings
) -> RequestResult | None:
    """Read one completion stream into ``timings``; a failed result, or None when it ended."""
    async with client.stream("POST", "/v1/completions", json=body) as response:
        if response.status_code != 200:
            raw = b""
            async for piece in response.aiter_bytes():  # the start is the message
                raw += piece
                if len(raw) >= 2000:
                    break
            message = _error_message(response, raw[:2000].decode("utf-8", "replace"))
            return _failed(f"HTTP {response.status_code}: {message}", start)
        async for line in capped_lines(response.aiter_bytes()):
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                doc = json.loads(data)
            except ValueError:
                return _failed(f"garbled stream chunk: {data[:80]}", start)
            if isinstance(doc, dict) and "error" in doc:
                return _failed(f"error in the stream: {doc['error']}", start)
            timings.usage = _usage(doc) or timings.usage
            if _chunk_text(doc):
                now = time.perf_counter()
                timings.chunks += 1
                timings.first = timings.first or now
                timings.last = now
    return None
