"""The live figure defined like each profile column it is compared with.

- ``ttft_s`` (the sweep's TTFT: ``concurrency`` prompts sent together, none waiting for a
  sequence slot) ↔ live TTFT p50 (``vllm:time_to_first_token_seconds`` bucket deltas) while
  nothing waited in the window; once requests queued, the TTFT they saw includes the wait,
  so the like figure is the p50 of ``vllm:request_prefill_time_seconds`` (scheduled → first
  token, TTFT without the queue) when the server exports it, else the TTFT p50 is compared
  with a note that it includes queueing (and the deficit's cause is the queue);
- ``decode_tps`` (a per-request mean) ↔ 1 / mean ITL (``inter_token_latency_seconds`` Δsum /
  Δcount, exact per token), else 1 / mean per-request TPOT
  (``request_time_per_output_token_seconds``). Both have the same expectation when requests
  have equal outputs (a request's tokens are counted once either way: Σ weights / Σ weights ×
  rate), and the expected row weighs its cells so (:mod:`sparktop.sweep.expected.matched`). ITL
  first: it is observed per token as it is generated, so it follows the window's load, where TPOT is
  observed at the finish and spans the request's whole decode (on the simulator it reads 3–5 %
  below 1 / ITL at a steady load, its scheduling steps counted in).
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktop.alerts.engine_rules import windowed
from sparktop.model import EngineSample, Quantile, is_num
from sparktop.sweep.expected.matched import window_load


@dataclass(frozen=True, slots=True)
class LiveFigure:
    """A live value (None: none comparable), the statistic it is (``p50``, ``p50 w/o queue``,
    ``1/mean TPOT``, ``1/mean ITL``) and a note on what it includes ("" when like).
    ``low`` / ``high``: the interval the value is known to lie in (a quantile's histogram
    bucket; None: the value is exact, a Δsum / Δcount mean)."""

    value: float | None
    label: str
    note: str = ""
    low: float | None = None
    high: float | None = None

    @property
    def interval(self) -> tuple[float, float] | None:
        """``(low, high)``, or None for an exact value (or no value)."""
        if self.value is None or self.low is None or self.high is None:
            return None
        return (self.low, self.high)


def live_itl_s(s: EngineSample) -> float | None:
    """Per-token decode latency over the window (s): the mean, else a p50 beyond the last
    bucket edge (a lower bound); None when unknown or only lifetime figures exist."""
    if is_num(s.itl_mean_s) and s.itl_mean_s > 0 and windowed(s, "itl_mean_s"):
        return float(s.itl_mean_s)
    q = s.itl_p50
    if isinstance(q, Quantile) and q.bound == ">" and q.value_s > 0 and windowed(s, "itl_p50"):
        return q.value_s
    return None


QUEUE_SHARE = 0.1
"""Mean queue time (``vllm:request_queue_time_seconds`` over the window) at or above this
share of the TTFT p50 counts as queueing even when no scrape caught a request waiting."""


def waiting_peak(s: EngineSample) -> float:
    """The most requests a scrape of the window caught waiting (or now, without a window)."""
    load = window_load(s)
    peak = load.waiting_peak if not isinstance(load, str) else 0.0
    return max(peak, float(s.waiting) if is_num(s.waiting) else 0.0)


def waited(s: EngineSample) -> float:
    """The most requests waiting at any scrape of the window (or now, without a window);
    1 when none was caught waiting but the window's mean queue time is a share of its TTFT
    (requests that waited between two scrapes)."""
    seen = waiting_peak(s)
    if seen > 0:
        return seen
    queue, ttft = s.queue_time_mean_s, s.ttft_p50
    if (
        is_num(queue)
        and windowed(s, "queue_time_mean_s")
        and isinstance(ttft, Quantile)
        and ttft.value_s > 0
        and queue >= QUEUE_SHARE * ttft.value_s
    ):
        return 1.0
    return 0.0


def _p50(q: object, s: EngineSample, name: str, label: str, note: str = "") -> LiveFigure:
    """A windowed p50 with the bucket it fell in. "<x" only bounds a latency from above: it
    can never show a deficit (no value)."""
    if isinstance(q, Quantile) and q.bound != "<" and windowed(s, name):
        low, high = q.interval
        if low == high:
            return LiveFigure(q.value_s, label, note)
        return LiveFigure(q.value_s, label, note, low, high)
    return LiveFigure(None, label, note)


def live_ttft(s: EngineSample) -> LiveFigure:
    """Live TTFT like the profile's ``ttft_s`` (see the module docstring)."""
    queued = waited(s)
    if queued > 0:
        prefill = _p50(s.prefill_time_p50, s, "prefill_time_p50", "p50 w/o queue")
        if prefill.value is not None:
            return prefill
        note = f"includes queueing (up to {queued:.0f} waiting in the window)"
        return _p50(s.ttft_p50, s, "ttft_p50", "p50", note)
    return _p50(s.ttft_p50, s, "ttft_p50", "p50")


def live_decode(s: EngineSample) -> LiveFigure:
    """Live per-stream decode like the profile's per-request ``decode_tps``: exact (a mean
    from Δsum / Δcount), or at most 1 / the last ITL edge when only a p50 beyond it is known."""
    itl = live_itl_s(s)
    if itl:
        if not (is_num(s.itl_mean_s) and s.itl_mean_s > 0 and windowed(s, "itl_mean_s")):
            return LiveFigure(1.0 / itl, "1/ITL p50", "", 0.0, 1.0 / itl)
        return LiveFigure(1.0 / itl, "1/mean ITL")
    tpot = s.tpot_mean_s
    if is_num(tpot) and tpot > 0 and windowed(s, "tpot_mean_s"):
        return LiveFigure(1.0 / tpot, "1/mean TPOT")
    return LiveFigure(None, "1/mean ITL")
