"""What one engine kind declares: its metric families, PromQL, endpoints and the limits it exports.

One :class:`KindSpec` per kind lives in this package (``vllm.py``, ``sglang.py``,
``llamacpp.py``) and :data:`sparktop.sources.engines.kinds.KINDS` maps the inventory's
``kind:`` to it. Plain data only: nothing here imports another sparktop module, so every
reader (:mod:`sparktop.sources.engines.reading`, the Prometheus source, the budget's
tokenizer) builds on it without a cycle. Code elsewhere asks the spec, never compares kind
names.
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
class Models:
    """A server's ``GET`` models endpoint (OpenAI's ``/v1/models``): where, and which keys of
    its answer's ``data[]`` entries are read. The base model is the entry whose
    ``parent_field`` is null (LoRA adapters name their parent): its ``id_field`` is the served
    name, ``root_field`` the checkpoint it was loaded from and ``length_field`` its
    ``max_model_len`` (tokens)."""

    path: str = "/v1/models"
    id_field: str = "id"
    parent_field: str = "parent"
    root_field: str = "root"
    length_field: str = "max_model_len"


@dataclass(frozen=True, slots=True)
class PromQL:
    """How the Prometheus source reads a kind from the series Prometheus scraped off its
    ``/metrics``. The kind's gauges and info gauge are fetched as they are and read like a
    page (through the same tables); these are what Prometheus computes over sparktop's window.

    ``rates``: sparktop name → counter (an RE2 regex over sample names, e.g. renamed
    families), whose per-second rate is taken per rank and per server; ``quantiles``:
    sparktop name → (quantile, histogram) for ``histogram_quantile`` over bucket rates;
    ``rank_label``: the data-parallel rank label rates are summed by (vLLM ``engine``, SGLang
    ``dp_rank``). Names use the kind's ``prefix:`` and also match its ``prefix_`` spelling
    (what prometheus_client writes when Prometheus negotiates OpenMetrics)."""

    rates: Mapping[str, str]
    quantiles: Mapping[str, tuple[float, str]]
    rank_label: str = "engine"


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One engine kind. Metric tables map a sparktop slot to its sample names, newest first
    (the first one with samples wins): ``gauges``, ``counters`` and ``histograms``;
    ``labelled``: slot → (``gauges``|``counters``, sample name, label read per value), each
    value stored under ``slot/value``; ``info``: an info gauge whose labels carry the
    server's configuration (vLLM ``cache_config_info``).

    ``no_latency``: why TTFT/ITL are n/a for a kind that exports no latency histograms.
    ``recent_gauges``: the prefix-cache hit rate and speculative-decoding acceptance are
    gauges over the server's own recent steps (SGLang), read as they are rather than from
    counter deltas over the window. ``promql``: how it is read through Prometheus (None: it
    is not, only from its own ``/metrics``).
    ``version_path``: a JSON ``GET`` saying the release (``{"version": …}``);
    ``props_path``: a JSON ``GET`` with the server's limits (llama.cpp ``/props``);
    ``limits``: where each limit is read (``max_model_len`` → ``/v1/models`` or a gauge…);
    ``slots_path``: a JSON ``GET`` of the busy requests' prompt lengths (llama.cpp
    ``/slots``), read on each scrape for ``mean_prompt_tokens``;
    ``probe_path``: a ``GET`` only this kind answers with JSON, to tell which kind serves a
    URL when the inventory does not say. ``pool_from``: where the KV pool is read, in order
    (``cache_config_info``: its ``kv_cache_size_tokens`` label; ``blocks``: its
    ``num_gpu_blocks`` × ``block_size``; ``pool_gauge``: the ``pool_tokens`` gauge;
    ``used_over_usage``: ``used_tokens`` ÷ ``kv_usage``), before the inventory and profile.
    ``shortens_from``: the release (major, minor) from which the server shortens the output
    of a request over ``max_model_len`` instead of refusing it (None: not known)."""

    kind: str
    label: str
    metric_prefix: str
    tokenize: Tokenize = field(default_factory=Tokenize)
    models: Models = field(default_factory=Models)
    version_path: str = ""
    props_path: str = ""
    probe_path: str = ""
    slots_path: str = ""
    gauges: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    counters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    histograms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    labelled: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    info: str = ""
    no_latency: str = ""
    recent_gauges: bool = False
    promql: PromQL | None = None
    limits: Mapping[str, str] = field(default_factory=dict)
    pool_from: tuple[str, ...] = ()
    shortens_from: tuple[int, int] | None = None
    metrics_404: str = "{reason} ({hint})"
    """The reason shown when ``/metrics`` answers 404, from the scrape's ``reason`` and
    :attr:`metrics_hint`."""
    metrics_hint: str = ""
    """What to tell the operator when ``/metrics`` answers 404."""
    pool_unknown: str = ""
    """Why the KV pool is unknown when nothing on the page states it ("" for the default)."""
