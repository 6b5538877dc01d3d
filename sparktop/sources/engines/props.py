"""``GET /props`` of a llama.cpp ``llama-server``: the limits its ``/metrics`` does not export.

``default_generation_settings.n_ctx`` (the context of one slot: the longest request, so
``max_model_len``; a top-level ``n_ctx`` is read when a build puts it there) and
``total_slots`` (``-np``: requests served at once, so ``max_num_seqs``); ``build_info``
(``b6543-1a2b3c4``) is the server's version. Never raises: a missing or garbled answer
gives NA limits with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparktop.model import NA, Num
from sparktop.sources.engines.http import MAX_MODEL_LEN, fetch_json
from sparktop.sources.engines.wire import EngineClient

MAX_PROPS_BYTES = 1024 * 1024
"""``/props`` carries the chat template (a few KiB); past this it is not a props answer."""
MAX_SLOTS = 1e6
"""More slots than any server runs: past it the answer is broken."""


@dataclass(frozen=True, slots=True)
class Props:
    """What ``/props`` said: ``limits`` by sparktop's names, ``version`` ("" when none)."""

    limits: dict[str, Num] = field(default_factory=dict)
    version: str = ""


def _number(value: object, top: float, what: str, path: str) -> Num:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if 0 < value <= top:
            return float(value)
        return NA(f"{path} says {what} {value:.3g}: not plausible")
    return NA(f"{path} has no {what}")


def read_props(answer: Any, path: str = "/props") -> Props:
    """The limits and version in one parsed ``/props`` answer (any JSON value)."""
    if not isinstance(answer, dict):
        why = NA(f"{path} answered no JSON object")
        return Props({"max_model_len": why, "max_num_seqs": why})
    settings = answer.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    n_ctx = answer.get("n_ctx") if n_ctx is None else n_ctx
    build = answer.get("build_info")
    return Props(
        {
            "max_model_len": _number(n_ctx, MAX_MODEL_LEN, "n_ctx", path),
            "max_num_seqs": _number(answer.get("total_slots"), MAX_SLOTS, "total_slots", path),
        },
        ascii(build.strip()[:60])[1:-1] if isinstance(build, str) else "",
    )


async def fetch_props(client: EngineClient, path: str = "/props") -> Props:
    """``GET path`` read up to 1 MiB and parsed by :func:`read_props`; never raises (the
    caller's deadline may cancel it)."""
    answer = await fetch_json(client, path, MAX_PROPS_BYTES, json_hint=": not llama.cpp's /props?")
    if isinstance(answer, NA):
        return Props({"max_model_len": answer, "max_num_seqs": answer})
    return read_props(answer, path)
