"""What one engine kind declares: its metric families, endpoints and the limits it exports.

One :class:`KindSpec` per kind lives in this package (``vllm.py``, ``sglang.py``,
``llamacpp.py``) and :data:`sparktop.sources.engines.kinds.KINDS` maps the inventory's ``kind:``
to it. Plain data only: nothing here imports another sparktop module, so the readers
(:mod:`sparktop.sources.engines.reading`, the budget's tokenizer) can build on it without a cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Tokenize:
    """A server's ``POST`` tokenize endpoint: where, what it takes, what it answers.

    ``text_field``: the request's key for the text (vLLM ``prompt``, llama.cpp ``content``).
    ``count_field``: the answer's key for a count ("" when it gives none); ``tokens_field``:
    its key for the token ids (a list, counted when there is no count)."""

    path: str = "/tokenize"
    text_field: str = "prompt"
    count_field: str = "count"
    tokens_field: str = "tokens"
    special_field: str = "add_special_tokens"
    """The request's key for "add BOS and other special tokens" (llama.cpp: ``add_special``)."""

    def request(self, text: str, *, special: bool | None = None) -> dict[str, object]:
        """The JSON body asking for ``text``'s tokens (``special``: None leaves the default)."""
        body: dict[str, object] = {self.text_field: text}
        if special is not None:
            body[self.special_field] = special
        return body


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One engine kind. Metric tables map a sparktop slot to its sample names, newest first
    (the first one with samples wins).

    ``gauges``/``counters``/``histograms``: for kinds whose tables still live in
    :mod:`sparktop.sources.engines.reading` (vLLM, SGLang) these are empty and ``tables_in``
    says so.
    ``no_latency``: why TTFT/ITL are n/a for a kind that exports no latency histograms.
    ``props_path``: a JSON ``GET`` with the server's limits (llama.cpp ``/props``);
    ``limits``: where each limit is read (``max_model_len`` → ``/v1/models`` or a gauge…);
    ``probe_path``: a ``GET`` only this kind answers with JSON, to tell which kind serves a
    URL when the inventory does not say."""

    kind: str
    label: str
    metric_prefix: str
    tokenize: Tokenize = field(default_factory=Tokenize)
    models_path: str = "/v1/models"
    version_path: str = ""
    props_path: str = ""
    probe_path: str = ""
    gauges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    counters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    histograms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    no_latency: str = ""
    limits: Mapping[str, str] = field(default_factory=dict)
    tables_in: str = ""
    metrics_hint: str = ""
    """What to tell the operator when ``/metrics`` answers 404."""
    pool_unknown: str = ""
    """Why the KV pool is unknown when nothing on the page states it ("" for the default)."""
