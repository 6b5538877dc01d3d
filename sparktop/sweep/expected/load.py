"""The load a live window's figures were measured under (:class:`Load`), read from an
:class:`~sparktop.model.EngineSample`: the time each running count held, the prompts of the
requests that got their first token and that finished in the window. What the expected row
is computed for (:mod:`sparktop.sweep.expected.matched`). Pure; no Textual.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sparktop.model import NA, EngineSample, is_num


@dataclass(frozen=True, slots=True)
class Load:
    """The load a sample's window figures were measured under.

    ``running``: ``(requests running, seconds)`` for every count ≥ 1 that held in the window;
    ``prompts`` / ``ttft_prompts``: ``(prompt tokens, requests)`` of the requests that
    finished / got their first token in it; ``ttft_spans``: the prompt span ``(low, high)``
    each ``ttft_prompts`` entry stands for (its histogram bucket; empty: points);
    ``waiting_peak`` the most requests waiting at any scrape in it; ``window_s`` the span
    (None: an instant reading, no window yet).
    """

    running: tuple[tuple[int, float], ...]
    prompts: tuple[tuple[float, float], ...]
    ttft_prompts: tuple[tuple[float, float], ...]
    window_s: float | None
    waiting_peak: float = 0.0
    finished: float = 0.0
    ttft_spans: tuple[tuple[float, float], ...] = ()
    ttft_cells: tuple[tuple[float, float, int], ...] = ()
    """``(prompt tokens, requests, running)`` of the requests whose first token came in the
    window, each group with the peak running count up to it (its prefill's company, see
    :func:`sparktop.sources.engines.window.first_tokens`); when set, the TTFT cells are these, not
    every running count of the window × ``ttft_prompts``."""

    @property
    def mean_running(self) -> float:
        return wmean(self.running)

    @property
    def mean_prompt(self) -> float:
        return wmean(self.prompts)

    @property
    def window_text(self) -> str:
        """``"last 30 s"``, or ``"load at this scrape"`` without a window's load history."""
        if self.window_s is None:
            return "load at this scrape"
        return f"last {self.window_s:.0f} s"

    def describe(self) -> str:
        """``"running 4–6 (mean 4.6) × 1,004–14,955 prompt tokens (mean 6,784), last 30 s"``:
        the range of the window's load with its mean (the expected figures are a mixture over
        it, not the profile's cell at the mean); one count or size reads as itself."""
        counts = [c for c, _ in self.running]
        mean = f"{self.mean_running:.1f}".removesuffix(".0")
        run = f"running {mean}"
        if len(set(counts)) > 1:
            run = f"running {min(counts)}–{max(counts)} (mean {mean})"
        sizes = [p for p, _ in self.prompts]
        prompt = f"{self.mean_prompt:,.0f} prompt tokens"
        if len(sizes) > 1 and round(min(sizes)) != round(max(sizes)):
            prompt = (
                f"{min(sizes):,.0f}–{max(sizes):,.0f} prompt tokens (mean {self.mean_prompt:,.0f})"
            )
        return f"{run} × {prompt}, {self.window_text}"

    @property
    def mixed(self) -> bool:
        """More than one running count or prompt size: the figures are a mixture."""
        return len({c for c, _ in self.running}) > 1 or len({round(p) for p, _ in self.prompts}) > 1


def wmean(pairs: Sequence[tuple[float, float]]) -> float:
    """The ``(value, weight)`` pairs' weighted mean (0 without weight)."""
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total > 0 else 0.0


def _windowed(sample: EngineSample, name: str) -> bool:
    return sample.window_s is not None and name not in sample.since_start


def _shape(
    buckets: Sequence[tuple[float, float, float]], mean: float
) -> tuple[tuple[float, float], ...]:
    """Each bucket ``(low, high]`` at its geometric middle, all scaled so the weighted mean is
    ``mean`` (the exact Δsum / Δcount); one point at ``mean`` without buckets."""
    return tuple((mid, n) for mid, _, _, n in _scaled(buckets, mean))


def _spans(
    buckets: Sequence[tuple[float, float, float]], mean: float
) -> tuple[tuple[float, float], ...]:
    """The prompt span ``(low, high)`` of each bucket of :func:`_shape`, scaled by the same
    factor (the first and the ``+Inf`` bucket: a factor 1.5 either side of the middle);
    empty without buckets."""
    if not buckets:
        return ()
    return tuple((low, high) for _, low, high, _ in _scaled(buckets, mean))


def _scaled(
    buckets: Sequence[tuple[float, float, float]], mean: float
) -> tuple[tuple[float, float, float, float], ...]:
    """``(middle, low, high, requests)`` of every bucket, scaled to ``mean``."""
    cells: list[tuple[float, float, float, float]] = []
    for low, high, n in buckets:
        if math.isinf(high):
            mid = max(low, 1.0) * 2.0
            ends = (mid / EDGE_SPREAD, mid * EDGE_SPREAD)
        elif low <= 0:
            mid = high / 2.0 if high > 1 else high
            ends = (mid / EDGE_SPREAD, min(high, mid * EDGE_SPREAD))
        else:
            mid = math.sqrt(low * high)
            ends = (low, high)
        cells.append((mid, ends[0], ends[1], n))
    base = wmean([(m, n) for m, _, _, n in cells])
    if not cells or base <= 0:
        return ((mean, mean, mean, 1.0),)
    k = mean / base
    return tuple((max(1.0, m * k), max(1.0, lo * k), max(1.0, hi * k), n) for m, lo, hi, n in cells)


EDGE_SPREAD = 1.5
"""How far either side of its middle an open-ended bucket's requests are read to spread."""


MIN_WINDOW_S = 5.0
"""The shortest window compared with the profile: over one or two scrapes a p50 is a
handful of requests and the load a point, and ``snapshot`` judges without a hold time."""


MIN_LOADED_S = 5.0
"""The least time with requests running that a window must hold to be compared: one short
request on an idle engine is a second or two of load, its TTFT one observation and its decode
a few tokens, a sample of nothing the profile's cells describe (same bound as
:data:`MIN_WINDOW_S`, for the same reason)."""


def busy(sample: EngineSample) -> bool:
    """Whether ``sample``'s engine has work: requests ran for at least :data:`MIN_LOADED_S`
    of its window (``load_dist``; half of a window shorter than twice that, as the first
    scrapes' is); without a window (first scrape, a source without gauge history), whether
    they run at this scrape. Not the gauge alone: vLLM sets ``num_requests_running`` from
    the step that just ended, so an engine serving requests back to back reads 0 between
    batches, and a rule asking the gauge restarts its hold there (the expected row judges
    the window's load for the same reason)."""
    if not sample.judged or not is_num(sample.running):
        return False
    held = [(r, t) for r, _, t in sample.load_dist if t > 0]
    if sample.window_s is not None and held:
        loaded_s = sum(t for r, t in held if round(r) >= 1)
        return loaded_s > 0 and loaded_s >= min(MIN_LOADED_S, sample.window_s / 2)
    return sample.running >= 1


def too_little_load(finished: float, loaded_s: float, window_s: float) -> str:
    """``"too little load to compare: 1 request finished, requests running 2 s of the last
    30 s (compared from 5 s)"``: what the window held, in requests and seconds."""
    n = round(finished)
    requests = f"{n:,} request{'' if n == 1 else 's'} finished"
    return (
        f"too little load to compare: {requests}, requests running {loaded_s:.0f} s of the "
        f"last {window_s:.0f} s (compared from {MIN_LOADED_S:g} s)"
    )


LOADS_KEPT = 64
"""Engines whose last sample's load :func:`window_load` keeps (it starts over past this)."""

_last_loads: dict[str, tuple[EngineSample, Load | str]] = {}


def window_load(sample: EngineSample) -> Load | str:
    """The load of ``sample``'s window, or why there is none to compare (one line).

    Kept for each engine's latest sample (samples are frozen; the identity is checked): the
    expected row and every live figure that reads the waiting peak (the alert rules' and the
    expected strip's, each tick) ask for the same sample's load."""
    held = _last_loads.get(sample.engine)
    if held is not None and held[0] is sample:
        return held[1]
    load = _window_load(sample)
    if len(_last_loads) >= LOADS_KEPT:
        _last_loads.clear()
    _last_loads[sample.engine] = (sample, load)
    return load


BINS_PER_DOUBLING = 8
"""First-token groups whose prompts lie within one bin (9 % wide) at one running count are
one cell: a window of 30 one-second groups is a handful of cells, so the row costs about
what it did before the groups (the TTFT and decode rates move a few % over such a bin)."""


def binned(groups: Sequence[tuple[float, float, float]]) -> tuple[tuple[float, float, int], ...]:
    """``(prompt, requests, running)`` first-token groups merged per (log-prompt bin, running
    count), each bin at its requests' mean prompt; in first-seen order."""
    bins: dict[tuple[int, int], list[float]] = {}
    for prompt, n, running in groups:
        if n <= 0 or prompt < 1:
            continue
        key = (round(math.log2(prompt) * BINS_PER_DOUBLING), max(1, round(running)))
        held = bins.setdefault(key, [0.0, 0.0])
        held[0] += prompt * n
        held[1] += n
    return tuple((tokens / n, n, c) for (_, c), (tokens, n) in bins.items())


def _window_load(sample: EngineSample) -> Load | str:
    if not sample.judged:
        return "no live values to compare"
    if not is_num(sample.running):  # unknown, not idle: its own reason, as every output says
        why = sample.running.reason if isinstance(sample.running, NA) else ""
        return f"n/a: running {why or 'not reported'}"
    prompt = sample.mean_prompt_tokens
    if sample.window_s is not None and not _windowed(sample, "mean_prompt_tokens"):
        prompt = NA("none finished in the window (the server's lifetime mean only)")
    cells = binned(sample.first_tokens)
    firsts = [(p, n) for p, n, _ in cells]
    windowed = sample.window_s is not None and (
        _windowed(sample, "mean_prompt_tokens") or bool(firsts)
    )
    if not is_num(prompt) and not (windowed and firsts):
        if sample.running < 1:
            return "idle: no running requests to compare"
        return "waiting for finished requests or first tokens (prompt lengths unknown)"
    window = sample.window_s if windowed else None
    if window is not None and window < MIN_WINDOW_S:
        return (
            f"window {window:.0f} s: compared once it spans {MIN_WINDOW_S:g} s "
            "(a few scrapes are not a load; snapshot: --window 10 or more)"
        )
    held = [(r, w, t) for r, w, t in sample.load_dist if t > 0]
    if window is not None and held:
        counts: dict[int, float] = {}
        for r, _, t in held:
            if round(r) >= 1:
                counts[round(r)] = counts.get(round(r), 0.0) + t
        running = tuple(sorted(counts.items()))
        waiting_peak = max(w for _, w, _ in held)
        buckets = sample.prompt_tokens_dist if is_num(prompt) else ()
    else:
        if not is_num(prompt):
            return "waiting for finished requests (mean prompt length unknown)"
        window = None
        running = ((round(sample.running), 1.0),) if sample.running >= 1 else ()
        waiting_peak = float(sample.waiting) if is_num(sample.waiting) else 0.0
        buckets = ()
        firsts = []
    if not running:
        return "idle: no running requests to compare"
    finished = sum(n for _, _, n in buckets)
    loaded_s = sum(t for _, t in running)
    if window is not None and loaded_s < MIN_LOADED_S:
        return too_little_load(finished, loaded_s, window)
    done = _shape(buckets, float(prompt)) if is_num(prompt) else ()
    if firsts:
        # TTFT is observed at the first token: its population is the requests whose first
        # token came in the window, each scrape interval's at its own mean prompt. Decode is
        # observed while requests run: those that started decoding in the window and those
        # that finished in it (a 200K request that started after a change from 4K prompts
        # decodes at the 200K rate, whatever finished before it).
        return Load(
            running, (*done, *firsts), tuple(firsts), window, waiting_peak, finished, (), cells
        )
    if not is_num(prompt):
        return "waiting for finished requests (mean prompt length unknown)"
    first = sample.first_token_prompt_tokens
    ttft_mean = float(first) if window is not None and is_num(first) and first >= 1 else prompt
    ttft_prompts = _shape(buckets, float(ttft_mean))
    spans = _spans(buckets, float(ttft_mean))
    return Load(running, done, ttft_prompts, window, waiting_peak, finished, spans)
