"""Prompts of an exact token length for a sweep, each starting with a unique nonce.

A unique nonce at the very start makes every KV block's prefix hash differ from every other
request's, so the server's prefix cache never serves part of a measurement. Three ways to get
the length right, best first:

- ``/tokenize``: the server's own tokenizer (vLLM, SGLang: ``POST {url}/tokenize``). The filler
  text is tokenized once, the nonce per request, and the request sends the token ids (the
  OpenAI API's "array of tokens" prompt), cut to the exact length;
- ``tokenizer.json``: the same with a local copy of the model's tokenizer (``--tokenizer``);
- approximate: text sized at 4 characters a token (the budget's estimate). The lengths the
  server reports in ``usage`` are then what the profile records, and the profile says so.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sparktop.errors import RuntimeFailure
from sparktop.jsontext import loads
from sparktop.sources.engines.kinds import Tokenize
from sparktop.sweep.tokens.exact_tokens import connect_reason, detect_kind, open_tokenizer

TOKENIZE_DEADLINE_S = 60.0
"""One ``POST /tokenize`` as a whole (the sweep's client reads with ``--timeout`` per read)."""
MAX_TOKENIZE_BYTES = 64 * 1024 * 1024
"""A tokenized 1M-token prompt is ~8 MB of JSON."""
CHARS_PER_TOKEN = 4.0
"""Characters per token of the approximate prompts (the budget's default estimate)."""

_WORD_TEXT = (
    "spark cluster node token cache decode prefill batch model tensor memory clock power "
    "thermal stream request latency budget queue engine serving sweep profile context rate "
    "window signal kernel fabric switch cable rank group shard weight layer head value key "
    "pool block page scheduler chunk limit sequence output input prompt answer reason check"
)
_WORDS = tuple(_WORD_TEXT.split())

FILLER_WORDS = 4096
"""Words of filler text tokenized once; its token ids are repeated to any length."""


def filler_text(words: int = FILLER_WORDS, seed: int = 0) -> str:
    """Deterministic prose-like filler (no repeating period a tokenizer could fold)."""
    rng = random.Random(seed)
    out = []
    for i in range(words):
        out.append(rng.choice(_WORDS))
        if i % 13 == 12:
            out[-1] += "."
    return " ".join(out)


@dataclass(frozen=True, slots=True)
class Prompt:
    """What to send (token ids, or text when lengths are approximate) and its length by our
    count, tokens."""

    body: list[int] | str
    tokens: int


Encode = Callable[[str, bool], Awaitable[list[int]]]
"""``(text, add_special_tokens) -> token ids``."""


class PromptMaker:
    """Builds nonce-first prompts. ``method`` is ``/tokenize``, ``tokenizer.json`` or
    ``approximate``; ``exact`` is False only for the last. Make one with :meth:`create`."""

    def __init__(self, method: str, encode: Encode | None, filler: list[int]) -> None:
        self.method = method
        self.exact = encode is not None
        self._encode = encode
        self._filler = filler

    @classmethod
    async def create(cls, method: str, encode: Encode | None) -> PromptMaker:
        """Tokenize the filler once. RuntimeFailure when it tokenizes to almost nothing."""
        filler: list[int] = []
        if encode is not None:
            filler = await encode(filler_text(), False)
            if len(filler) < 16:
                raise RuntimeFailure(f"{method}: the filler text tokenized to almost nothing")
        return cls(method, encode, filler)

    async def make(self, tokens: int, nonce: str) -> Prompt:
        """A prompt of ``tokens`` tokens (exactly, unless approximate) starting with ``nonce``."""
        head = f"[{nonce}] "
        if self._encode is None:
            chars = max(0, int(tokens * CHARS_PER_TOKEN) - len(head))
            text = filler_text(chars // 5 + 8)[:chars]
            return Prompt(head + text, tokens)
        ids = (await self._encode(head, True))[:tokens]
        need = tokens - len(ids)
        repeats = need // len(self._filler) + 1
        ids = ids + (self._filler * repeats)[:need]
        return Prompt(ids, len(ids))


async def _tokenize_ids(
    client: httpx.AsyncClient, text: str, special: bool, shape: Tokenize
) -> list[int]:
    body = shape.request(text, special=special)
    parts: list[bytes] = []
    size = 0
    try:
        async with (
            asyncio.timeout(TOKENIZE_DEADLINE_S),
            client.stream("POST", shape.path, json=body) as response,
        ):
            if response.status_code != 200:
                raise RuntimeFailure(f"/tokenize answered HTTP {response.status_code}")
            async for chunk in response.aiter_bytes():
                parts.append(chunk)
                size += len(chunk)
                if size > MAX_TOKENIZE_BYTES:
                    raise RuntimeFailure("/tokenize answered over 64 MiB: not token ids")
    except TimeoutError:
        raise RuntimeFailure(
            f"/tokenize gave no complete answer within {TOKENIZE_DEADLINE_S:g} s"
        ) from None
    except httpx.HTTPError as exc:
        raise RuntimeFailure(f"/tokenize failed: {connect_reason(exc)}") from None
    try:
        data: Any = loads(b"".join(parts))
        ids = data[shape.tokens_field]
    except (ValueError, KeyError, TypeError):
        raise RuntimeFailure("/tokenize returned no token ids") from None
    if ids == [] and text.strip():
        raise RuntimeFailure(
            f"the server's /tokenize returned no tokens for {len(text):,} characters: "
            "wrong request shape?"
        )
    if not isinstance(ids, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids
    ):
        raise RuntimeFailure("/tokenize returned token ids that are not integers")
    return ids


async def endpoint_maker(client: httpx.AsyncClient) -> PromptMaker | str:
    """A maker on the server's ``/tokenize`` (through ``client``), in the request shape of
    the kind that answers (:func:`~sparktop.sweep.tokens.exact_tokens.detect_kind`: llama.cpp's
    ``{"content"}``, else vLLM's ``{"prompt"}``), or why not (one line) when the server has
    none (404/405/501) or returns no token ids."""
    try:
        async with asyncio.timeout(TOKENIZE_DEADLINE_S):
            shape = (await detect_kind(client)).tokenize
        async with (
            asyncio.timeout(TOKENIZE_DEADLINE_S),
            client.stream("POST", shape.path, json=shape.request("probe")) as probe,
        ):
            status = probe.status_code  # the answer itself is not needed
    except TimeoutError:
        return f"/tokenize did not answer within {TOKENIZE_DEADLINE_S:g} s"
    except httpx.HTTPError as exc:
        return f"/tokenize unreachable ({connect_reason(exc)})"
    if status != 200:
        return f"the server has no /tokenize (HTTP {status})"

    async def encode(text: str, special: bool) -> list[int]:
        return await _tokenize_ids(client, text, special, shape)

    try:
        return await PromptMaker.create("/tokenize", encode)
    except RuntimeFailure as exc:
        return str(exc)


async def tokenizer_maker(path: str | Path) -> PromptMaker:
    """A maker on a local ``tokenizer.json`` (HF ``tokenizers``). UserError when unusable."""
    tokenizer = open_tokenizer(path)

    async def encode(text: str, special: bool) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=special).ids)

    return await PromptMaker.create("tokenizer.json", encode)


async def approximate_maker() -> PromptMaker:
    """Text prompts sized at :data:`CHARS_PER_TOKEN` characters a token."""
    return await PromptMaker.create("approximate", None)
