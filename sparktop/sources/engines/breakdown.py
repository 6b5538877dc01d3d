"""The request breakdown of one window: where a request's time went (queue, prefill, decode,
end to end, per-request TPOT), where its prompt tokens came from, how requests finished, how
many were refused at admission, and speculative decoding per draft position.

Every figure is over the same window as the rest of the sample (Δ of counters and histogram
buckets against the window's base scrape, via :class:`~sparktop.sources.engines.window.Window`),
over the server's lifetime on the first scrape. A family the server does not export is NA naming
the metric (``vllm:request_queue_time_seconds not exported by this server``): vLLM added
them over releases (``prompt_tokens_by_source`` and ``num_requests_waiting_by_reason`` in
the V1 engine, ``request_time_per_output_token_seconds`` in 0.11, ``admission_rejections``
after 0.29), and SGLang has only some of them.

Sources (vLLM ``vllm/v1/metrics/loggers.py``; SGLang ``sglang/srt/metrics/collector.py``):

- ``queue``: ``vllm:request_queue_time_seconds`` (WAITING phase) | ``sglang:queue_time_seconds``;
  ``prefill_time``, ``decode_time``: ``vllm:request_{prefill,decode}_time_seconds``;
  ``e2e``: ``…e2e_request_latency_seconds``; ``tpot``:
  ``vllm:request_time_per_output_token_seconds`` (one observation per request: its decode
  time ÷ its output tokens − 1, the per-request decode the profile's pp/tg columns mean).
  All are observed when a request *finishes*, so the queue + prefill split covers the
  requests finished in the window, where TTFT covers the first tokens produced in it.
- ``prompt_by_source/<source>``: ``vllm:prompt_tokens_by_source_total{source}``;
  ``local_compute`` is the prefill work actually done (cache hits excluded).
- ``waiting_by_reason/<reason>``: ``vllm:num_requests_waiting_by_reason{reason}``
  (``capacity``: no room in the KV pool; ``deferred``: held back by the scheduler).
- ``finished/<reason>``: ``vllm:request_success_total{finished_reason}`` (``stop``,
  ``length``, ``abort``, ``error``…).
- ``admission_rejections/<reason>``: ``vllm:admission_rejections_total{reason}``.
- ``spec_accepted_pos/<k>``: ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position}``
  ÷ Δ``spec_decode_num_drafts``: the share of drafts whose k-th token was accepted.
  SGLang's ``spec_accept_rate``/``spec_accept_length`` are gauges (read as they stand).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypedDict

from sparktop.model import NA, Num, Quantile, is_num
from sparktop.sources.engines.kinds import spec_for
from sparktop.sources.engines.window import (
    NOT_EXPORTED,
    Window,
    combine,
    mean,
    merge,
    quantile,
    ratio,
)

PHASES = ("queue", "prefill_time", "decode_time", "e2e", "tpot")
"""Histogram keys of the per-request phases, in the order a request lives them."""

PHASE_FIELDS = {
    "queue": "queue_time",
    "prefill_time": "prefill_time",
    "decode_time": "decode_time",
    "e2e": "e2e_latency",
    "tpot": "tpot",
}
"""Histogram key → EngineSample field stem (``<stem>_p50``, ``<stem>_mean_s``)."""


class Breakdown(TypedDict, total=False):
    """The EngineSample fields this module computes (names as on EngineSample)."""

    queue_time_p50: Quantile | NA
    queue_time_mean_s: Num
    prefill_time_p50: Quantile | NA
    prefill_time_mean_s: Num
    decode_time_p50: Quantile | NA
    decode_time_mean_s: Num
    e2e_latency_p50: Quantile | NA
    e2e_latency_mean_s: Num
    tpot_p50: Quantile | NA
    tpot_mean_s: Num
    prefill_computed_tps: Num
    prompt_tps_by_source: Mapping[str, float]
    waiting_capacity: Num
    waiting_deferred: Num
    requests_finished_per_s: Num
    requests_aborted_per_s: Num
    requests_errored_per_s: Num
    admission_rejections_per_s: Num
    spec_accept_by_position: tuple[float, ...]
    retracted_reqs: Num


def metric_name(kind: str, key: str) -> str:
    """The family a key is read from in ``kind``'s tables (the first alias), or ""."""
    spec = spec_for(kind)
    for table in (spec.gauges, spec.counters, spec.histograms):
        if key in table:
            return table[key][0]
    if key in spec.labelled:
        return spec.labelled[key][1]
    return ""


def named(value: Num | Quantile, kind: str, key: str) -> Num | Quantile:
    """``value`` with a bare "not exported" NA turned into one naming the metric."""
    if isinstance(value, NA) and value.reason == NOT_EXPORTED:
        name = metric_name(kind, key)
        if not name:
            return NA(f"{kind} exports no equivalent")
        return NA(f"{name} not exported by this server")
    return value


def _subkeys(win: Window, ranks: list[str], slot: str, key: str) -> set[str]:
    """Label values of a labelled family seen on any rank of this page, or on the whole
    server's samples (a family without a rank label)."""
    prefix = key + "/"
    found: set[str] = set()
    for r in win.reading.holders(ranks):
        store = getattr(win.reading.rank(r), slot)
        found.update(k[len(prefix) :] for k in store if k.startswith(prefix))
    return found


def _labelled_rate(win: Window, ranks: list[str], key: str, value: str) -> Num:
    """One label value's rate summed over the ranks (and the whole server) that carry the
    family: a family without a rank label is the whole server's once, not rank 0's, and a
    rank that does not carry the family is not "not exported"."""
    sub = f"{key}/{value}"
    prefix = key + "/"
    holders = [
        r for r in win.reading.holders(ranks) if any(k.startswith(prefix) for k in _store(win, r))
    ]
    return combine({r: win.rate(r, sub) for r in holders or ranks})


def _store(win: Window, rank: str) -> dict[str, Num]:
    reading = win.reading.rank(rank)
    return {**reading.counters, **reading.gauges}


def _present_rate(win: Window, ranks: list[str], key: str, value: str, values: set[str]) -> Num:
    """Rate of one label value; NA naming the label when the family has no such series."""
    kind = win.reading.kind
    if not values:
        return named(NA(NOT_EXPORTED), kind, key)  # type: ignore[return-value]
    if value not in values:
        label = spec_for(kind).labelled[key][2]
        return NA(f'{metric_name(kind, key)} has no {label}="{value}" series')
    return _labelled_rate(win, ranks, key, value)


def _sum_rates(win: Window, ranks: list[str], key: str, values: set[str]) -> Num:
    kind = win.reading.kind
    if not values:
        return named(NA(NOT_EXPORTED), kind, key)  # type: ignore[return-value]
    total = 0.0
    for v in sorted(values):
        rate = _labelled_rate(win, ranks, key, v)
        if isinstance(rate, NA):
            return rate
        total += rate
    return total


def _gauge(win: Window, ranks: list[str], key: str) -> Num:
    """A (labelled or plain) gauge summed over ranks."""
    return combine({r: win.reading.ranks[r].gauges.get(key, NA(NOT_EXPORTED)) for r in ranks})


def _spec_positions(win: Window, ranks: list[str]) -> tuple[float, ...]:
    positions = _subkeys(win, ranks, "counters", "spec_accepted_pos")
    if not positions:
        return ()
    if positions != {str(k) for k in range(len(positions))}:
        return ()  # a gap (a cut page): index k must mean position k, or nothing is shown
    drafts = combine({r: win.delta(r, "spec_drafts") for r in ranks})
    out: list[float] = []
    for pos in (str(k) for k in range(len(positions))):
        accepted = combine({r: win.delta(r, f"spec_accepted_pos/{pos}") for r in ranks})
        share = ratio(accepted, drafts, "no drafts")
        if not is_num(share):
            return ()  # a ratio that cannot be formed for one position: show none
        out.append(share)
    return tuple(out)


PHASE_VALUES = frozenset(
    f"{stem}_{end}" for stem in PHASE_FIELDS.values() for end in ("p50", "mean_s")
)
"""The fields :func:`phases` computes."""


def phases(win: Window, ranks: list[str]) -> dict[str, object]:
    """The per-request phases of ``win`` over ``ranks``: each phase's median and mean."""
    kind = win.reading.kind
    fields: dict[str, object] = {}
    for key in PHASES:
        merged = merge(win.hist(r, key) for r in win.reading.holders(ranks))
        stem = PHASE_FIELDS[key]
        fields[f"{stem}_p50"] = named(quantile(0.5, merged, win.empty), kind, key)
        fields[f"{stem}_mean_s"] = named(mean(merged, win.empty), kind, key)
    return fields


def breakdown(win: Window, ranks: list[str]) -> Breakdown:
    """The request breakdown of ``win`` over ``ranks`` (see the module docstring)."""
    kind = win.reading.kind
    out: Breakdown = {}
    fields = phases(win, ranks)
    sources = _subkeys(win, ranks, "counters", "prompt_by_source")
    fields["prefill_computed_tps"] = _present_rate(
        win, ranks, "prompt_by_source", "local_compute", sources
    )
    by_source = {s: _labelled_rate(win, ranks, "prompt_by_source", s) for s in sorted(sources)}
    fields["prompt_tps_by_source"] = MappingProxyType(
        {s: float(v) for s, v in by_source.items() if is_num(v)}
    )
    reasons = _subkeys(win, ranks, "gauges", "waiting_by_reason")
    for reason in ("capacity", "deferred"):
        value: Num
        if not reasons:
            value = named(NA(NOT_EXPORTED), kind, "waiting_by_reason")  # type: ignore[assignment]
        elif reason not in reasons:
            # the gauge is set per reason the scheduler knows; an absent one counts none
            value = NA(f'no reason="{reason}" series')
        else:
            value = _gauge(win, ranks, f"waiting_by_reason/{reason}")
        fields[f"waiting_{reason}"] = value
    finished = _subkeys(win, ranks, "counters", "finished")
    fields["requests_finished_per_s"] = _sum_rates(win, ranks, "finished", finished)
    fields["requests_aborted_per_s"] = _present_rate(win, ranks, "finished", "abort", finished)
    fields["requests_errored_per_s"] = _present_rate(win, ranks, "finished", "error", finished)
    rejections = _subkeys(win, ranks, "counters", "admission_rejections")
    fields["admission_rejections_per_s"] = _sum_rates(
        win, ranks, "admission_rejections", rejections
    )
    fields["spec_accept_by_position"] = _spec_positions(win, ranks)
    fields["retracted_reqs"] = named(_gauge(win, ranks, "retracted"), kind, "retracted")
    out.update(fields)  # type: ignore[typeddict-item]
    return out
