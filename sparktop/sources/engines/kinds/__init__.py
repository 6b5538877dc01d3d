"""The engine kinds sparktop reads, one module each: :data:`KINDS` maps the inventory's
``kind:`` to its :class:`KindSpec` (metric names and aliases, PromQL, tokenize/models/props
endpoints, hints, KV-pool rule, limits).

A new kind is a module here plus its entry in :data:`KINDS`; ``tests/test_engine_kinds.py``
checks that the inventory accepts exactly these kinds. Code outside this package asks a
spec (:func:`spec_for`), never compares kind names.
"""

from __future__ import annotations

from collections.abc import Mapping

from sparktop.sources.engines.kinds import llamacpp, sglang, vllm
from sparktop.sources.engines.kinds.spec import KindSpec, Models, PromQL, Tokenize

KINDS: Mapping[str, KindSpec] = {s.kind: s for s in (vllm.SPEC, sglang.SPEC, llamacpp.SPEC)}
"""Every engine kind, by the inventory's ``kind:`` value."""

DEFAULT: KindSpec = vllm.SPEC
"""The inventory's default kind, and the shapes assumed for a server of unknown kind."""


def spec_for(kind: str) -> KindSpec:
    """The spec of ``kind``; :data:`DEFAULT`'s for a kind not registered."""
    return KINDS.get(kind, DEFAULT)


def through_prometheus() -> tuple[KindSpec, ...]:
    """The kinds the Prometheus source reads (those declaring :class:`PromQL`)."""
    return tuple(s for s in KINDS.values() if s.promql is not None)


__all__ = [
    "DEFAULT",
    "KINDS",
    "KindSpec",
    "Models",
    "PromQL",
    "Tokenize",
    "spec_for",
    "through_prometheus",
]
