"""The expected row over the live figures' own window: same span, same load, same statistic.

Live TTFT p50 and 1 / mean ITL are window figures (bucket and sum/count deltas over the last
``window_s``); comparing them with the profile's row for the *instant* running count and mean
prompt raises a deviation on every load change that lasts until the window has turned over.
So the expected figure is built from the window's load, as the live statistic is built from
its observations (method: ``sparktop/sweep/README.md``, "The expected row"):

- the load: the time each running count held over the window (``EngineSample.load_dist``);
- TTFT's population: the requests whose first token came in the window, as vLLM observes
  TTFT at the first token (``EngineSample.first_tokens``: each scrape interval's
  Δ``prompt_tokens_total`` / Δ TTFT ``_count``, with the peak running count up to it), each
  group a cell at its own prompt and running count, weighted by its requests; TTFT p50 →
  the weighted median of those cells;
- decode's population: the requests observed decoding, i.e. those that started decoding in
  the window (the same groups) and those that finished in it (``prompt_tokens_dist``: the
  ``request_prompt_tokens`` bucket deltas, each bucket at its geometric middle, scaled so
  their mean is the window's Δsum / Δcount), not the finished ones only: after a change from
  4K to 200K prompts, the 200K requests decode at their rate whatever finished before them;
- per-stream decode → the mean ITL's own weighting: each (running count, prompt) cell by the
  tokens it decodes (seconds × running × its decode rate), i.e. the weighted mean of decode
  with weights seconds × running × requests; aggregate → the time-weighted mean. Each band
  end is combined the same way as the value.

A window without first-token groups (a server without ``prompt_tokens_total``) falls back
to the finished prompts for TTFT too, scaled to the first tokens' mean prompt, each cell
spread over its prompt bucket as the live p50 reads a bucket
(:mod:`sparktop.sweep.expected.mixture`).
The figures are a mixture over the window's load, not the profile's cell at its mean:
:meth:`Load.describe` gives the load's range with its mean.

Pure; no Textual. Without a window (first scrape, a source without gauge history) the load
is the instant one, and :attr:`Load.window_s` is None.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from sparktop.model import NA, EngineSample, is_num
from sparktop.safe_text import printable
from sparktop.sources.engines.kinds import KINDS
from sparktop.sweep.estimator.estimator import Basis, Estimate, Estimated, estimate
from sparktop.sweep.expected.load import (
    EDGE_SPREAD,
    LOADS_KEPT,
    MIN_LOADED_S,
    MIN_WINDOW_S,
    Load,
    too_little_load,
    window_load,
    wmean,
)
from sparktop.sweep.expected.mixture import Span, span_median, spans_at
from sparktop.sweep.profiles.profile import Profile

EstimateFn = Callable[[float, int], Estimate]
"""``(prompt_tokens, concurrency) -> Estimate`` bound to one profile."""

_RANK = {
    Basis.EXACT: 0,
    Basis.INTERPOLATED: 1,
    Basis.FITTED: 2,
    Basis.EXTRAPOLATED: 3,
    Basis.NO_DATA: 4,
}


GRID_STEPS_PER_DOUBLING = 32
"""Window cells are estimated at prompts on a log grid this fine (steps of 2.2 %, at most
1.1 % off: TTFT and decode move less than that): the bucket representatives shift with every
finished request, and a grid keeps them on cells already estimated (a window of 6 running
counts × 5 buckets costs ~24 ms estimated afresh, under 1 ms from the cache)."""


ESTIMATES_KEPT = 1024
"""Estimated cells kept per profile: ~20 windows' worth of (running count, prompt) cells, so
a load seen in the last minutes is not estimated again. An estimate holds ~40 Python
objects: 4,096 kept were still filling after 100 minutes of the accelerated hour (3,378
then), a third of its Python blocks' growth once every other buffer was full."""


def cached_estimator(profile: Profile) -> EstimateFn:
    """``estimate`` bound to ``profile``, memoised on a log grid of prompt lengths (see
    :data:`GRID_STEPS_PER_DOUBLING`); exact for whole token counts on the profile's rows."""
    rows = {float(r.prompt_tokens) for r in profile.rows}

    @functools.lru_cache(maxsize=ESTIMATES_KEPT)
    def cell(prompt: float, concurrency: int) -> Estimate:
        return estimate(profile, prompt, concurrency)

    def call(prompt: float, concurrency: int) -> Estimate:
        whole = float(round(prompt)) if math.isfinite(prompt) else prompt
        on_row = whole in rows and abs(prompt - whole) < 1e-6
        return cell(whole if on_row else on_grid(prompt), concurrency)

    return call


def on_grid(x: float) -> float:
    """``x`` moved to the nearest point of the log grid (itself when not a positive number)."""
    if x <= 0 or not math.isfinite(x):
        return x
    k = round(math.log2(x) * GRID_STEPS_PER_DOUBLING)
    return float(2.0 ** (k / GRID_STEPS_PER_DOUBLING))


@dataclass(frozen=True, slots=True)
class WindowExpected:
    """The profile's figures for a window's load, combined as the live statistics are.

    Same units and :class:`Estimated` shape as
    :class:`~sparktop.sweep.estimator.estimator.Estimate`; ``how`` says how many cells were combined
    and how.
    """

    load: Load
    ttft_s: Estimated
    decode_tps: Estimated
    aggregate_tps: Estimated
    aggregate_kind: str
    model_note: str = ""
    """Set when the profile names a model and the engine serves one it does not name
    (:func:`model_mismatch`): the figures are another model's."""


Cell = tuple[Estimated, float]
Spread = tuple[float, float]
"""A TTFT cell's span as factors of its value: ``(lowest, highest)`` of its bucket's requests."""


def _no_data(reason: str) -> Estimated:
    return Estimated(NA(reason), f"no data: {reason}", Basis.NO_DATA, NA(reason), NA(reason))


def _halves(v: float, spread: Spread, w: float) -> list[Span]:
    """A cell of value ``v`` as two spans of half its weight, below and above ``v``: its own
    median stays ``v`` (a lone cell is its own estimate) while its requests spread."""
    return [(v * spread[0], v, w / 2.0), (v, v * spread[1], w / 2.0)]


def _combine(
    cells: list[Cell], how: str, median: bool, spreads: Sequence[Spread] = ()
) -> Estimated:
    """Weighted median (TTFT p50) or weighted mean of the cells' values and band ends.

    ``spreads`` (median only, one per cell): each cell spread over its bucket's span, as the
    live p50 reads a histogram bucket (:mod:`sparktop.sweep.expected.mixture`); the basis is
    then the least exact of the cells that hold the median, whose band is the one the figure
    gets."""
    kept = [(i, fig, w) for i, (fig, w) in enumerate(cells) if w > 0]
    if not kept:
        return _no_data("no load in the window")
    values: list[float] = []
    for _, fig, _ in kept:
        if not is_num(fig.value):
            return fig
        values.append(fig.value)
    if len(kept) == 1:
        return kept[0][1]
    spread = [spreads[i] if i < len(spreads) else (1.0, 1.0) for i, _, _ in kept]

    def pick(attr: str) -> float | NA:
        ends: list[tuple[float, float]] = []
        for _, fig, w in kept:
            v = getattr(fig, attr)
            if not is_num(v):
                return v if isinstance(v, NA) else NA("no band")
            ends.append((v, w))
        if not median:
            return wmean(ends)
        return span_median([h for (v, w), f in zip(ends, spread, strict=True)
                            for h in _halves(v, f, w)])  # fmt: skip

    value = pick("value")
    assert is_num(value)
    figs = [fig for _, fig, _ in kept]
    if median and spreads:
        spans = [
            (v * f[0], v * f[1], w) for v, (_, _, w), f in zip(values, kept, spread, strict=True)
        ]
        figs = [kept[i][1] for i in spans_at(spans, value)] or figs
    basis = max((fig.basis for fig in figs), key=_RANK.__getitem__)
    distinct = {fig.how for _, fig, _ in kept}
    note = f"{how} of {len(kept)} cells" + (f" ({distinct.pop()})" if len(distinct) == 1 else "")
    return Estimated(value, note, basis, pick("low"), pick("high"))


_OUTSIDE = re.compile(r"concurrency [\d,]+ is outside the measured columns \((.*?)\)(.*)$")
"""The estimator's reason for a count off the profile's columns
(:mod:`sparktop.sweep.estimator.surface`)."""


def _at(load: Load, running: int, fig: Estimated, any_count_has_data: bool = True) -> Estimated:
    """``fig``, its reason tied to the header's statistic when one running count of the
    window has no data: the header gives the mean and range, the reason the count in it
    (``running reached 31 in this window (mean 15.9, range 5–32): concurrency 31 is …``)."""
    if is_num(fig.value) or len(load.running) < 2:
        return fig
    counts = [c for c, _ in load.running]
    mean = f"{load.mean_running:.1f}".removesuffix(".0")
    reason = fig.value.reason if isinstance(fig.value, NA) else "no data"
    if not any_count_has_data:
        # No count of the window has data: the reason is the estimator's own, unless it
        # names one count of the window, which would contradict the header's range (``mix
        # of running 3–4 … concurrency 3 is outside the measured columns (1, 2)``).
        outside = _OUTSIDE.match(reason)
        if outside is None:
            return fig
        return _no_data(
            f"running {min(counts)}–{max(counts)} in this window (mean {mean}) is outside "
            f"the measured columns ({outside.group(1)}){outside.group(2)}"
        )
    return _no_data(
        f"running reached {running} in this window (mean {mean}, range "
        f"{min(counts)}–{max(counts)}): {reason}"
    )


def _spread(estimator: EstimateFn, fig: Estimated, span: tuple[float, float], c: int) -> Spread:
    """The TTFT at the two ends of a cell's prompt span, as factors of the cell's own TTFT
    (an end without data, or a cell without a value: no spread on that side)."""
    if not is_num(fig.value) or fig.value <= 0:
        return (1.0, 1.0)
    ends = []
    for p in span:
        v = estimator(p, c).ttft_s.value
        ends.append(v / fig.value if is_num(v) and v > 0 else 1.0)
    return (min(ends[0], 1.0), max(ends[1], 1.0))


def expected_for(estimator: EstimateFn, load: Load, aggregate_kind: str) -> WindowExpected:
    """Estimate every cell of ``load`` and combine them (see the module docstring)."""
    ttft: list[Cell] = []
    decode: list[Cell] = []
    aggregate: list[Cell] = []
    kinds = {aggregate_kind} if aggregate_kind else set()
    counts = [c for c, _ in load.running]
    # Each cell is asked for again by the other counts' checks and the TTFT spreads: look
    # it up once (the estimator rounds the prompt onto its grid at every call).
    looked_up: dict[tuple[float, int], Estimate] = {}

    def cell(p: float, c: int) -> Estimate:
        est = looked_up.get((p, c))
        if est is None:
            est = looked_up[p, c] = estimator(p, c)
        return est

    def tied(fig: Estimated, p: float, c: int, metric: str) -> Estimated:
        """``fig`` (count ``c`` at prompt ``p``) as :func:`_at` says it. A cell without data
        names the highest count of the window without data at ``p`` (``c`` itself when no
        count of the window lacks it): each figure's first such cell named its own count
        (TTFT ``running reached 32``, decode ``29``), so one cause read as several."""
        if is_num(fig.value):
            return fig
        missing = [k for k in counts if not is_num(getattr(cell(p, k), metric).value)]
        named = max(missing, default=c)
        if named != c:
            fig = getattr(cell(p, named), metric)
        return _at(load, named, fig, any_count_has_data=len(missing) < len(counts))

    spreads: list[Spread] = []
    for p, n, c in load.ttft_cells:
        ttft.append((tied(cell(p, c).ttft_s, p, c, "ttft_s"), n))
    for c, seconds in load.running:
        for i, (p, n) in enumerate(() if load.ttft_cells else load.ttft_prompts):
            fig = cell(p, c).ttft_s
            ttft.append((tied(fig, p, c, "ttft_s"), seconds * n))
            if i < len(load.ttft_spans):
                spreads.append(_spread(cell, fig, load.ttft_spans[i], c))
        for p, n in load.prompts:
            est = cell(p, c)
            kinds.add(est.aggregate_kind)
            decode.append((tied(est.decode_tps, p, c, "decode_tps"), seconds * c * n))
            aggregate.append((tied(est.aggregate_tps, p, c, "aggregate_tps"), seconds * n))
    return WindowExpected(
        load,
        _combine(ttft, "weighted median", median=True, spreads=spreads),
        _combine(decode, "token-weighted mean", median=False),
        _combine(aggregate, "time-weighted mean", median=False),
        aggregate_kind or next(iter(kinds), ""),
    )


def window_expected(
    estimator: EstimateFn, sample: EngineSample, aggregate_kind: str = ""
) -> WindowExpected | str:
    """The expected figures for ``sample``'s window, or why there are none (one line)."""
    load = window_load(sample)
    if isinstance(load, str):
        return load
    return expected_for(estimator, load, aggregate_kind)


def _model_key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def model_mismatch(profile_model: str, served: str, root: str = "") -> str:
    """Why ``served`` (``EngineSample.model``: ``vllm:cache_config_info`` / ``/v1/models``)
    looks like another model than the profile measured (``Profile.model``, free text such as
    ``DeepSeek V4.1 Flash 1017 (checkpoint …)``), or "" when it may be the same one or
    either is unknown. Compared: the last path part of each name (the profile's up to its first
    " ("), letters and digits only; the same model when one is found in the other
    (``deepseek-ai/DeepSeek-V4.1-Flash-1017`` → ``deepseekv41flash1017``, in ``DeepSeek V4.1
    Flash 1017 (checkpoint …)``; ``meta-llama/Llama-3.3-70B-Instruct`` holds ``Llama 3.3
    70B``). An alias (``--served-model-name``) that names neither reads as another model:
    shown as a note, never a reason to drop the comparison, unless ``root`` (``/v1/models``
    ``root``: the checkpoint behind the alias) names the profile's model: then it is the
    same one, no note."""
    shown = profile_model.split(" (")[0].strip()
    if not shown or not served.strip():
        return ""
    profile_key = _model_key(shown.rsplit("/", 1)[-1])
    for name in (served, root):
        key = _model_key(name.strip().rstrip("/").rsplit("/", 1)[-1])
        if profile_key and key and (key in profile_key or profile_key in key):
            return ""
    # The server's names as every output shows them (the engine header's printable())
    also = f" (checkpoint {_cut(printable(root.strip()))})" if root.strip() else ""
    served_shown = _cut(printable(served.strip()))
    return f"the profile measured {_cut(printable(shown))}; this engine serves {served_shown}{also}"


def engine_mismatch(profile_engine: str, kind: str) -> str:
    """Why a profile measured on another engine than ``kind`` (``EngineSample.kind``) cannot
    give this engine an expected row, or "" when it may be the same engine or the profile does
    not say. ``profile_engine`` is the profile's free-text ``engine`` (``vLLM Kraken build,
    …``; a sweep writes ``<engine> server version …``); it names an engine when exactly one
    kind's label (``vLLM``, ``SGLang``, ``llama.cpp``) is in it."""
    text = profile_engine.lower()
    named = [spec for spec in KINDS.values() if spec.label.lower() in text]
    if len(named) != 1 or named[0].kind == kind:
        return ""
    this = KINDS[kind].label if kind in KINDS else _cut(kind)
    return f"the profile measured a {named[0].label} engine; this engine is {this}"


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "EDGE_SPREAD",
    "LOADS_KEPT",
    "MIN_LOADED_S",
    "MIN_WINDOW_S",
    "Load",
    "MatchedExpected",
    "WindowExpected",
    "cached_estimator",
    "engine_mismatch",
    "expected_for",
    "model_mismatch",
    "too_little_load",
    "window_expected",
    "window_load",
]


RowFn = Callable[[EngineSample], "WindowExpected | str"]
"""A sample's window-matched expected row, or why there is none (:class:`MatchedExpected`)."""


class MatchedExpected:
    """One profile's window-matched expected row, computed once per engine sample.

    The monitor's expected strip and the alert rules both ask for the row of each engine's
    latest sample every tick; calling this object with a sample returns
    :func:`window_expected` for it, computed on the first call and kept (with the sample,
    so its identity cannot be reused) until that engine's next sample: one entry per
    engine. ``estimator`` defaults to :func:`cached_estimator` of ``profile``.
    ``computed`` counts the rows actually estimated.
    """

    def __init__(self, profile: Profile, estimator: EstimateFn | None = None) -> None:
        self.profile = profile
        self.estimator = estimator if estimator is not None else cached_estimator(profile)
        self.computed = 0
        self._last: dict[str, tuple[EngineSample, WindowExpected | str]] = {}
        self._notes: dict[str, str] = {}

    def model_note(self, sample: EngineSample) -> str:
        """:func:`engine_mismatch` of the profile's engine and ``sample``'s kind, else
        :func:`model_mismatch` of the profile's model and the one ``sample``'s engine serves,
        worked out once per kind and served name."""
        key = f"{sample.kind}\n{sample.model}\n{sample.model_root}"
        note = self._notes.get(key)
        if note is None:
            if len(self._notes) >= 64:  # names come from servers: bound it
                self._notes.clear()
            note = engine_mismatch(self.profile.engine, sample.kind) or model_mismatch(
                self.profile.model, sample.model, sample.model_root
            )
            self._notes[key] = note
        return note

    def __call__(self, sample: EngineSample) -> WindowExpected | str:
        held = self._last.get(sample.engine)
        if held is not None and held[0] is sample:
            return held[1]
        if other := engine_mismatch(self.profile.engine, sample.kind):
            # Another engine's figures say nothing of this one's: no row to compare with.
            self._last[sample.engine] = (sample, f"no expected row: {other}")
            return f"no expected row: {other}"
        got = window_expected(self.estimator, sample, self.profile.aggregate_kind)
        note = self.model_note(sample)
        if note:  # from the names alone: said also while there is no load to compare
            got = f"{got} ({note})" if isinstance(got, str) else replace(got, model_note=note)
        self.computed += 1
        self._last[sample.engine] = (sample, got)
        return got
