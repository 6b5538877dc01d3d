"""A ``/metrics`` page of vLLM, SGLang or llama.cpp → per-rank readings, through the tables
its kind declares (:mod:`sparktop.sources.engines.kinds`).

Aliases are listed new-name-first and the first one with samples wins (``kv_cache_usage_perc`` |
``gpu_cache_usage_perc``, ``inter_token_latency_seconds`` | ``time_per_output_token_seconds``,
``prefix_cache_*`` | ``gpu_prefix_cache_*``). Series are grouped by data-parallel rank (vLLM's
``engine`` label, SGLang's ``dp_rank``); other labels (``model_name``, ``finished_reason``,
``tp_rank``…) are summed over within a rank, except KV usage, which takes the max. A gauge
or counter without a rank label is the whole server's (vLLM 0.32's
``admission_rejections_total{model_name, reason}``): on a page of several ranks it is kept
apart (``PageReading.server``) and counted once in the engine's totals, never under rank 0.

A few families are read *per label value* (``labelled``): ``num_requests_waiting_by_reason``
by ``reason`` (``capacity``, ``deferred``), ``prompt_tokens_by_source`` by ``source``
(``local_compute``, ``local_cache_hit``, ``external_kv_transfer``), ``request_success`` by
``finished_reason``, ``admission_rejections`` by ``reason`` and
``spec_decode_num_accepted_tokens_per_pos`` by ``position``; each value is stored under
``key/value`` (e.g. ``prompt_by_source/local_compute``) in the rank's gauges or counters, so
the window diffs them like any other counter.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from sparktop.model import NA, Num
from sparktop.safe_text import clip_identity
from sparktop.sources.engines.histread import RANK_LABELS, WHOLE_SERVER, Hist, rank_of, read_hist
from sparktop.sources.engines.kinds import DEFAULT, KINDS, KindSpec, spec_for
from sparktop.sources.exposition.page import PromPage, PromSample, parse_page

SUM_COUNT_ONLY = frozenset({"iteration_tokens"})
"""Histograms read only for Δsum/Δcount (their buckets are never parsed). The prompt-length
buckets are read: the expected row weighs the profile by the prompt lengths that finished."""


def wanted(spec: KindSpec) -> frozenset[str]:
    """Every normalised sample name ``spec``'s tables read (for :func:`parse_page`)."""
    names = {n for aliases in spec.gauges.values() for n in aliases}
    names |= {n for aliases in spec.counters.values() for n in aliases}
    names |= {name for _slot, name, _label in spec.labelled.values()}
    for key, aliases in spec.histograms.items():
        suffixes = ("_sum", "_count") if key in SUM_COUNT_ONLY else ("_bucket", "_sum", "_count")
        names |= {a + s for a in aliases for s in suffixes}
    if spec.info:
        names.add(spec.info)
    return frozenset(names)


WANTED: frozenset[str] = frozenset().union(*(wanted(s) for s in KINDS.values()))
"""Every sample name any kind reads: the filter for :func:`parse_page`."""
_KIND_NAMES = {kind: wanted(spec) for kind, spec in KINDS.items()}

_SUFFIXES = ("", "_bucket", "_sum", "_count")


def _alias_groups() -> list[tuple[str, ...]]:
    groups: list[tuple[str, ...]] = []
    for spec in KINDS.values():
        for table in (spec.gauges, spec.counters, spec.histograms):
            groups += [aliases for aliases in table.values() if len(aliases) > 1]
    return groups


ALIAS_GROUPS: tuple[tuple[str, ...], ...] = tuple(_alias_groups())


def older_aliases(present: Set[str]) -> set[str]:
    """Sample names of old aliases whose newer name is on the page (not worth parsing)."""
    drop: set[str] = set()
    for aliases in ALIAS_GROUPS:
        found = [a for a in aliases if any(a + s in present for s in _SUFFIXES)]
        for old in found[1:]:
            drop.update(old + s for s in _SUFFIXES)
    return drop


def parse_engine_page(text: str, *, openmetrics: bool = False) -> PromPage:
    """Parse only what any kind reads, skipping old aliases shadowed by new names."""
    return parse_page(text, WANTED, older_aliases, openmetrics=openmetrics)


MAX_GAUGES = frozenset(
    {
        "kv_usage",
        "hit_rate",
        "pool_tokens",
        "max_model_len",
        "max_num_seqs",
        "max_num_batched_tokens",
        "spec_accept_rate",
        "spec_accept_length",
    }
)
"""Gauges that are per-rank properties: the max over a rank's series, not the sum."""


@dataclass(slots=True)
class RankReading:
    """One rank's values on one page; NA keeps why a value is missing."""

    gauges: dict[str, Num] = field(default_factory=dict)
    counters: dict[str, Num] = field(default_factory=dict)
    hists: dict[str, Hist | NA] = field(default_factory=dict)
    info: dict[str, str] | None = None


@dataclass(slots=True)
class PageReading:
    """A page read through one kind's tables: ranks by label value, plus what was found at all."""

    kind: str
    ranks: dict[str, RankReading]
    model: str = ""
    samples: int = 0
    declared_empty: tuple[str, ...] = ()
    shared_info: dict[str, str] | None = None
    gauges_read: dict[str, str] = field(default_factory=dict)
    """Gauge slot → the metric read for it (the gauges the page has)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Gauge slot → why its first refused sample was refused (``vllm:… is nan``)."""
    server: RankReading | None = None
    """Gauges and counters without a rank label on a page whose others have one: the whole
    server's (:data:`~sparktop.sources.engines.histread.WHOLE_SERVER`), kept out of ``ranks``."""

    def rank(self, key: str) -> RankReading:
        """``ranks[key]``, or the whole server's readings for
        :data:`~sparktop.sources.engines.histread.WHOLE_SERVER`."""
        if key == WHOLE_SERVER and self.server is not None:
            return self.server
        return self.ranks[key]

    def holders(self, ranks: list[str]) -> list[str]:
        """``ranks``, plus :data:`~sparktop.sources.engines.histread.WHOLE_SERVER` when the page has
        whole-server samples: where a labelled family may be found."""
        return [*ranks, WHOLE_SERVER] if self.server is not None else ranks


def _pick(
    page: PromPage, aliases: tuple[str, ...], suffix: str = ""
) -> tuple[str, tuple[PromSample, ...]]:
    for name in aliases:
        samples = page.get(name + suffix)
        if samples:
            return name, samples
    return aliases[0], ()


def _nan(name: str, value: float, ambiguous: str | None = None) -> NA:
    if ambiguous is not None:
        return NA(f"{name} is ambiguous: repeated as {ambiguous}")
    return NA(f"{name} is {value}")


MAX_PLAUSIBLE = 1e15
"""No gauge or counter these servers export comes near this (a year at 10M tok/s is 3e14);
one past it, or below 0 (they are counts, totals and fractions), is a broken page."""


FRACTIONS = frozenset({"kv_usage"})
"""Slots that are a share (0-1): the KV cache usage of vLLM and SGLang."""

REQUEST_COUNTS = frozenset({"running", "waiting"})
"""Slots that count requests: whole numbers up to :data:`MAX_REQUESTS`."""

MAX_REQUESTS = 1e6
"""More requests than any one server holds at once: vLLM's ``max_num_seqs`` is at most a few
thousand, and a million waiting is a million open HTTP requests on one server."""


def _implausible(name: str, value: float, key: str) -> NA | None:
    if key in REQUEST_COUNTS:
        if not 0.0 <= value <= MAX_REQUESTS:
            return NA(f"{name} is {value:.3g}: not a plausible value (0-{MAX_REQUESTS:,.0f})")
        if not value.is_integer():
            return NA(f"{name} is {value:.10g}: not a whole number of requests")
        return None
    top = 1.0 if key in FRACTIONS else MAX_PLAUSIBLE
    if 0.0 <= value <= top:
        return None
    return NA(f"{name} is {value:.3g}: not a plausible value")


AmbiguousKeys = Mapping[tuple[str, frozenset[tuple[str, str]]], str]
"""(normalised name, label items) → ``"4 then 400"``: series repeated with another value."""


def _read_scalar(
    readings: dict[str, RankReading],
    slot: str,
    key: str,
    name: str,
    samples: tuple[PromSample, ...],
    use_max: bool,
    ambiguous: AmbiguousKeys,
) -> None:
    for s in samples:
        rank = readings.setdefault(rank_of(s.labels), RankReading())
        store: dict[str, Num] = getattr(rank, slot)
        old = store.get(key)
        if isinstance(old, NA):
            continue
        if not s.finite:
            why = ambiguous.get((s.name, frozenset(s.labels.items()))) if ambiguous else None
            store[key] = _nan(name, s.value, why)
        elif (bad := _implausible(name, s.value, key)) is not None:  # NA is falsy
            store[key] = bad
        elif old is None:
            store[key] = s.value
        else:
            store[key] = max(old, s.value) if use_max else old + s.value


def _read_labelled(
    readings: dict[str, RankReading],
    slot: str,
    key: str,
    samples: tuple[PromSample, ...],
    label: str,
) -> None:
    """One value per (rank, label value), summed over the other labels, under ``key/value``.
    A sample without the label is kept under ``key/`` (never dropped into another value)."""
    for s in samples:
        rank = readings.setdefault(rank_of(s.labels), RankReading())
        store: dict[str, Num] = getattr(rank, slot)
        sub = f"{key}/{s.labels.get(label, '')}"
        old = store.get(sub)
        if isinstance(old, NA):
            continue
        if not s.finite:
            store[sub] = _nan(key, s.value)
        else:
            store[sub] = s.value if old is None else old + s.value


def detect_kind(page: PromPage, hint: str = DEFAULT.kind) -> str:
    """The kind (a key of :data:`~sparktop.sources.engines.kinds.KINDS`) with samples on the
    page; ``hint`` breaks ties (the default kind's for an unknown ``hint``)."""
    has = {kind: any(map(page.samples.get, names)) for kind, names in _KIND_NAMES.items()}
    if has.get(hint) or not any(has.values()):
        return spec_for(hint).kind
    return next(kind for kind, present in has.items() if present)


TOKEN_RATES = {"prompt_tokens": "prefill", "generation_tokens": "decode"}
"""The token counters behind the row's rates, by the rate's name on the row."""


def refused_token_counters(reading: PageReading) -> str:
    """``decode n/a: vllm:generation_tokens_total is -707: not a plausible value`` for each
    token counter on the page that was refused (NaN, negative, past any real count), so the
    row's ``n/a`` carries its reason; an ambiguous one is left to the page's note on repeated
    series; "" when none was."""
    said = []
    for key, rate in TOKEN_RATES.items():
        why = next(
            (v.reason for r in reading.ranks.values() if isinstance(v := r.counters.get(key), NA)),
            "",
        )
        if why and " is ambiguous: " not in why:
            said.append(f"{rate} n/a: {why}")
    return "; ".join(said)


def kind_mismatch(page: PromPage, declared: str) -> str:
    """Why a page cannot be read as the ``declared`` kind (an inventory's ``kind:``,
    ``--kind``): ``declared kind llamacpp but the page is vLLM's`` when it has none of that
    kind's samples and another kind's; "" when it has some, or no engine's at all."""
    has = {kind: any(map(page.samples.get, names)) for kind, names in _KIND_NAMES.items()}
    if has.get(declared):
        return ""
    found = [KINDS[kind].label for kind, present in has.items() if present]
    if not found:
        return ""
    return f"declared kind {declared} but the page is {' and '.join(found)}'s"


def read_page(page: PromPage, kind: str) -> PageReading:
    """Group one page's engine samples by rank through the tables of ``kind``."""
    spec = spec_for(kind)
    readings: dict[str, RankReading] = {}
    model = ""
    count = 0
    empty: list[str] = []
    gauges_read: dict[str, str] = {}
    refused: dict[str, str] = {}
    for slot, table in (("gauges", spec.gauges), ("counters", spec.counters)):
        for key, aliases in table.items():
            name, samples = _pick(page, aliases)
            if not samples:
                empty.extend(a for a in aliases if a in page.declared)
                continue
            count += len(samples)
            model = model or clip_identity(
                samples[0].labels.get("model_name", "") or samples[0].labels.get("name", "")
            )
            use_max = slot == "gauges" and key in MAX_GAUGES
            _read_scalar(readings, slot, key, name, samples, use_max, page.conflict_keys)
            if slot == "gauges":
                gauges_read[key] = name
                bad = next(
                    (v for r in readings.values() if isinstance(v := r.gauges.get(key), NA)), None
                )
                if bad is not None:
                    refused[key] = bad.reason
    for key, (slot, name, label) in spec.labelled.items():
        samples = page.get(name)
        if not samples:
            if name in page.declared or name.removesuffix("_total") in page.declared:
                empty.append(name)
            continue
        # not counted in ``samples``: a page with only these (vLLM 0.10.0's request_success)
        # has none of the families an engine row needs
        _read_labelled(readings, slot, key, samples, label)
    for key, aliases in spec.histograms.items():
        only = key in SUM_COUNT_ONLY
        name, samples = _pick(page, aliases, "_count")
        if not samples:
            empty.extend(a for a in aliases if a in page.declared)
            continue
        count += len(samples)
        for rank, hist in read_hist(page, name, only).items():
            readings.setdefault(rank, RankReading()).hists[key] = hist
    shared: dict[str, str] | None = None
    if spec.info:
        for s in page.get(spec.info):
            count += 1
            if any(s.labels.get(k) for k in RANK_LABELS):
                readings.setdefault(rank_of(s.labels), RankReading()).info = dict(s.labels)
            else:
                shared = dict(s.labels)
    server = _settle_whole_server(readings)
    return PageReading(
        kind, readings, model, count, tuple(empty), shared, gauges_read, refused, server
    )


def _settle_whole_server(readings: dict[str, RankReading]) -> RankReading | None:
    """Unlabelled gauges and counters: the one rank's when the page has at most one (no rank
    label: rank ``"0"``; one engine: the whole server is that engine), else the whole
    server's, returned apart (never filed under a rank: with data parallelism rank 0 is one
    engine of several)."""
    whole = readings.pop(WHOLE_SERVER, None)
    if whole is None or len(readings) > 1:
        return whole
    one = readings.setdefault(next(iter(readings), "0"), RankReading())
    for slot in ("gauges", "counters", "hists"):
        store: dict[str, object] = getattr(one, slot)
        for key, value in getattr(whole, slot).items():
            store.setdefault(key, value)  # a labelled series of the same name wins
    one.info = one.info or whole.info
    return None
