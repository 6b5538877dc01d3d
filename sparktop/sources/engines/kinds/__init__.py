"""The engine kinds sparktop reads, one module each: :data:`KINDS` maps the inventory's
``kind:`` to its :class:`KindSpec` (metric names, tokenize/models/props endpoints, limits).

A new kind is a module here plus its entry in :data:`KINDS`; ``tests/test_engine_kinds.py``
checks that the inventory accepts exactly these kinds.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparktop.sources.engines.kinds import llamacpp, sglang, vllm
from sparktop.sources.engines.kinds.spec import KindSpec, Tokenize

KINDS: Mapping[str, KindSpec] = {s.kind: s for s in (vllm.SPEC, sglang.SPEC, llamacpp.SPEC)}
"""Every engine kind, by the inventory's ``kind:`` value."""


def spec_for(kind: str) -> KindSpec:
    """The spec of ``kind``; vLLM's for a kind not registered (the inventory's default)."""
    return KINDS.get(kind, vllm.SPEC)


__all__ = ["KINDS", "KindSpec", "Tokenize", "spec_for"]
