"""``GET /slots`` of a llama.cpp ``llama-server``: the prompt lengths its ``/metrics`` lacks.

A JSON list, one object per slot (llama-server serves it unless started with
``--no-slots``, then it answers 501). A busy slot (``"is_processing": true``) states
``n_prompt_tokens``: the tokens in its context, the prompt so far plus the tokens generated
(``next_token.n_decoded``, under ``next_token`` or its one-element list). A slot that has
decoded is past its prompt, so its prompt length is the difference; a slot still in prefill
holds part of it and is left out. The mean over the decoding slots is the sample's
``mean_prompt_tokens`` (what the expected row keys on). Never raises: a disabled, missing or
garbled answer gives NA with the reason.
"""

from __future__ import annotations

from typing import Any

from sparktop.model import NA, Num
from sparktop.sources.engines.http import MAX_MODEL_LEN, fetch_json
from sparktop.sources.engines.wire import EngineClient

MAX_SLOTS_BYTES = 4 * 1024 * 1024
"""``/slots`` is a few hundred bytes a slot (prompts are not detokenized by default)."""


def _count(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _prompt(slot: dict[str, Any]) -> float | None:
    """One busy slot's prompt length: its context less its generated tokens, once decoding."""
    nxt = slot.get("next_token")
    nxt = nxt[0] if isinstance(nxt, list) and nxt else nxt
    decoded = _count(nxt.get("n_decoded")) if isinstance(nxt, dict) else None
    held = _count(slot.get("n_prompt_tokens"))
    if not decoded or held is None or not 0 < held - decoded <= MAX_MODEL_LEN:
        return None
    return held - decoded


def read_slots(answer: Any, path: str = "/slots") -> Num:
    """The mean prompt length of the decoding slots in one parsed ``/slots`` answer, in
    tokens; NA with the reason when no slot is busy or none states a plausible length."""
    if not isinstance(answer, list):
        return NA(f"{path} answered no JSON list")
    busy = [s for s in answer if isinstance(s, dict) and s.get("is_processing") is True]
    if not busy:
        return NA(f"{path}: no busy slot")
    lengths = [n for n in map(_prompt, busy) if n is not None]
    if not lengths:
        return NA(f"{path}: no busy slot past its prompt (n_prompt_tokens, n_decoded)")
    return sum(lengths) / len(lengths)


async def fetch_slot_prompts(client: EngineClient, path: str = "/slots") -> Num:
    """``GET path`` read up to 4 MiB and parsed by :func:`read_slots`; never raises (the
    caller's deadline may cancel it)."""
    answer = await fetch_json(
        client, path, MAX_SLOTS_BYTES, status_hint=" (llama-server --no-slots?)"
    )
    return answer if isinstance(answer, NA) else read_slots(answer, path)
