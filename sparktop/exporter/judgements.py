"""sparktop's judgements as Prometheus series (a prometheus_client collector; no I/O).

Only what sparktop derives, never the exporters' raw readings (Prometheus already has those):

- per GPU (``node``, ``gpu``, ``uuid``): ``sparktop_gpu_baseline_sm_clock_mhz`` (the loaded
  clock it is judged against: its own learnt baseline, never below the profile's),
  ``sparktop_gpu_sm_clock_ratio`` (SM clock ÷ that reference), ``sparktop_gpu_throttled`` and
  ``sparktop_gpu_hidden_low_power`` (0/1, as the alert rules judge them);
- per node: ``sparktop_node_up`` (0 while ``node.down`` is pending or active, as for
  engines below: the node cannot be reached; a node that answers without GPU data is up,
  with ``node.gpu_unavailable``), ``sparktop_node_sample_age_seconds``;
- per engine (``engine``): ``sparktop_engine_up`` (0 while the alert engine's last evaluation
  has an ``engine.down`` condition for it, pending or fired, and until that alert clears: the
  same judgement as ``sparktop_alert{rule="engine.down"}``, never 1 beside it; the raw last
  scrape is ``sparktop_source_up``); ``sparktop_engine_expected{figure}`` with
  ``_expected_low`` / ``_expected_high`` (the estimator's band) and
  ``sparktop_engine_live_expected_ratio{figure}`` for ``figure`` = ``ttft_seconds`` and
  ``decode_tokens_per_second`` (per stream; a live figure read from a histogram bucket by the
  bucket's end nearest the expected value, 1 when the bucket holds it, as the strip and the
  alert compare it); ``sparktop_engine_deficit{cause,node}`` (1 while
  live is past the deficit threshold and outside the band; ``cause``: ``straggler`` naming the
  node, ``pool_bound``, ``scheduler_bound``, ``queueing``, ``spec_acceptance`` or
  ``unexplained``: the cause the alert rules name, in their order; 0 with ``cause="none"``
  when live was compared and is no deficit; absent when it could not be compared);
  ``sparktop_engine_kv_free_tokens`` (whole tokens: the pool less KV usage × pool, or
  SGLang's own count); ``sparktop_engine_kv_exhaustion_seconds`` (while the
  KV cache grows steadily towards full; 0 when it is full; absent otherwise);
  ``sparktop_engine_queue_bound{bound}`` (1 for ``pool``, ``scheduler`` or ``none``);
- ``sparktop_alert{rule,subject,severity}`` = 1 per firing alert;
- per source (``source``, ``kind``): ``sparktop_source_up``,
  ``sparktop_source_poll_latency_seconds`` (last poll), ``sparktop_source_polls_total`` and
  ``sparktop_source_poll_failures_total``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sparktop.alerts.causes import explain
from sparktop.alerts.context import RuleContext
from sparktop.alerts.engine import AlertEngine
from sparktop.alerts.engine_rules import kv_growth
from sparktop.alerts.expected_rules import deficit
from sparktop.alerts.gpu_rules import (
    CRITICAL_NODE_STATES,
    gpu_views,
    hidden_low_power,
    throttle_evidence,
)
from sparktop.alerts.model import Alert, Pending
from sparktop.cluster import ClusterState
from sparktop.model import EngineSample, NodeSample, Sample, is_num

FIGURES = ("ttft_seconds", "decode_tokens_per_second")


@dataclass(slots=True)
class _Polls:
    kind: str
    polls: int = 0
    failures: int = 0
    latency_s: float | None = None
    ok: bool = False


@dataclass(slots=True)
class SourceStats:
    """Polls, failures and the last latency per source; feed it every sample (``observe``)."""

    by_source: dict[str, _Polls] = field(default_factory=dict)

    def observe(self, sample: Sample) -> None:
        if isinstance(sample, NodeSample):
            name, kind = sample.node, "node"
        else:
            name, kind = sample.engine, "engine"
        polls = self.by_source.setdefault(f"{kind}:{name}", _Polls(kind))
        polls.polls += 1
        polls.ok = sample.ok
        polls.failures += 0 if sample.ok else 1
        polls.latency_s = sample.latency_s


class Judgements(Collector):
    """Reads ``state`` and ``alerts`` (an :class:`AlertEngine`, or anything with ``.engine``
    being one) on every scrape; call it on the event loop that updates them."""

    def __init__(
        self,
        state: ClusterState,
        alerts: Callable[[], object],
        stats: SourceStats,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.state = state
        self.alerts = alerts
        self.stats = stats
        self.clock = clock

    def _engine(self) -> AlertEngine | None:
        current = self.alerts()
        current = getattr(current, "engine", current)
        return current if isinstance(current, AlertEngine) else None

    def collect(self) -> Iterator[Metric]:
        engine = self._engine()
        ctx = engine.context(self.state) if engine is not None else None
        yield from self._nodes(engine)
        if engine is not None and ctx is not None:
            yield from self._gpus(ctx)
            yield from self._engines(ctx, engine)
        yield from self._alerts(engine)
        yield from self._sources()

    def _nodes(self, engine: AlertEngine | None) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "sparktop_node_up",
            "0 while sparktop judges the node unreachable (node.down).",
            labels=["node"],
        )
        age = GaugeMetricFamily(
            "sparktop_node_sample_age_seconds", "Age of the node's newest reading.", labels=["node"]
        )
        now = self.clock()
        nodes = self.state.nodes
        down = (
            judged_down(engine, "node.down")
            if engine is not None
            else {name for name, s in nodes.items() if s.state in CRITICAL_NODE_STATES}
        )
        for name, sample in nodes.items():
            up.add_metric([name], 0.0 if name in down else 1.0)
            age.add_metric([name], max(0.0, now - sample.time_s))
        yield up
        yield age

    def _gpus(self, ctx: RuleContext) -> Iterator[Metric]:
        labels = ["node", "gpu", "uuid"]
        base = GaugeMetricFamily(
            "sparktop_gpu_baseline_sm_clock_mhz",
            "Loaded SM clock the GPU is judged against (own baseline, never below the profile's).",
            labels=labels,
        )
        ratio = GaugeMetricFamily(
            "sparktop_gpu_sm_clock_ratio", "SM clock divided by the reference clock.", labels=labels
        )
        throttled = GaugeMetricFamily(
            "sparktop_gpu_throttled",
            "1 when the GPU throttles (slowdown reason, counter growth or clock drop).",
            labels=labels,
        )
        low = GaugeMetricFamily(
            "sparktop_gpu_hidden_low_power",
            "1 for GB10's hidden low-power state: busy, low clock, low power, no reason bit.",
            labels=labels,
        )
        for view in gpu_views(ctx):
            key = [view.node, str(view.gpu.index), view.gpu.uuid]
            if view.baseline_mhz is not None:
                base.add_metric(key, view.baseline_mhz)
            if view.clock_ratio is not None:
                ratio.add_metric(key, view.clock_ratio)
            stuck = hidden_low_power(ctx, view)
            throttled.add_metric(key, 1.0 if not stuck and throttle_evidence(ctx, view) else 0.0)
            low.add_metric(key, 1.0 if stuck else 0.0)
        yield from (base, ratio, throttled, low)

    def _engines(self, ctx: RuleContext, engine: AlertEngine) -> Iterator[Metric]:
        def family(name: str, doc: str, *extra: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"sparktop_engine_{name}", doc, labels=["engine", *extra])

        up = family("up", "0 while sparktop judges the engine down.")
        expected = family("expected", "The profile's expected figure at the live load.", "figure")
        low = family("expected_low", "Low end of the estimator's band.", "figure")
        high = family("expected_high", "High end of the estimator's band.", "figure")
        ratio = family("live_expected_ratio", "Live figure divided by expected.", "figure")
        cause = family("deficit", "1 while live is past the deficit threshold.", "cause", "node")
        free = family("kv_free_tokens", "KV-cache tokens free now.")
        eta = family(
            "kv_exhaustion_seconds", "Seconds until the KV pool is full at the current growth."
        )
        bound = family(
            "queue_bound", "1 for what holds the queue: pool, scheduler or none.", "bound"
        )
        down = judged_down(engine, "engine.down")
        for name, s in self.state.engines.items():
            up.add_metric([name], 0.0 if name in down else 1.0)
            if not s.judged:
                continue
            if is_num(s.kv_free_tokens):
                free.add_metric([name], float(s.kv_free_tokens))
            growth = kv_growth(ctx, name)
            if is_num(s.kv_usage) and s.kv_usage >= 1.0:
                eta.add_metric([name], 0.0)  # full now: 0, not absent (absent: no steady rise)
            elif growth is not None and growth.usage < 1.0:
                eta.add_metric([name], (1.0 - growth.usage) / growth.slope)
            held = _bound(ctx, s)
            bound.add_metric([name, held], 1.0)
            exp = ctx.expected(s) if ctx.expected is not None else None
            if exp is not None:
                for fig, value, lo, hi in (
                    (FIGURES[0], exp.ttft_s, exp.ttft_low_s, exp.ttft_high_s),
                    (FIGURES[1], exp.decode_tps, exp.decode_low_tps, exp.decode_high_tps),
                ):
                    for fam, v in ((expected, value), (low, lo), (high, hi)):
                        if v is not None:
                            fam.add_metric([name, fig], v)
            d = deficit(ctx, s)
            if d is None:
                continue
            # From the live interval's end nearest expected (1 when its bucket holds it), as
            # the strip and the alert compare: never the point interpolated in a bucket.
            if d.ttft_over_pct is not None:
                ratio.add_metric([name, FIGURES[0]], 1.0 + d.ttft_over_pct / 100.0)
            if d.decode_under_pct is not None:
                ratio.add_metric([name, FIGURES[1]], 1.0 - d.decode_under_pct / 100.0)
            limit = ctx.thresholds.expected_deficit_pct
            if d.ttft_past(limit) or d.decode_past(limit):
                why, node = _cause(ctx, s, held, "decode" if d.decode_past(limit) else "ttft")
                cause.add_metric([name, why, node], 1.0)
            else:
                # Compared and no deficit: 0, so PromQL tells it from "not compared" (absent).
                cause.add_metric([name, "none", ""], 0.0)
        yield from (up, expected, low, high, ratio, cause, free, eta, bound)

    def _alerts(self, engine: AlertEngine | None) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "sparktop_alert", "1 per firing alert.", labels=["rule", "subject", "severity"]
        )
        for alert in engine.active() if engine is not None else ():
            family.add_metric([alert.rule, alert.subject, str(alert.severity)], 1.0)
        yield family

    def _sources(self) -> Iterator[Metric]:
        labels = ["source", "kind"]
        up = GaugeMetricFamily(
            "sparktop_source_up", "1 when the last poll succeeded.", labels=labels
        )
        latency = GaugeMetricFamily(
            "sparktop_source_poll_latency_seconds", "How long the last poll took.", labels=labels
        )
        polls = CounterMetricFamily("sparktop_source_polls", "Polls made.", labels=labels)
        failures = CounterMetricFamily(
            "sparktop_source_poll_failures", "Polls that failed.", labels=labels
        )
        for key, p in self.stats.by_source.items():
            name = key.partition(":")[2]
            up.add_metric([name, p.kind], 1.0 if p.ok else 0.0)
            if p.latency_s is not None:
                latency.add_metric([name, p.kind], p.latency_s)
            polls.add_metric([name, p.kind], p.polls)
            failures.add_metric([name, p.kind], p.failures)
        yield from (up, latency, polls, failures)


def judged_down(engine: AlertEngine, rule: str) -> set[str]:
    """Subjects (node or engine names) ``engine`` judges down at its last evaluation:
    ``rule`` (``node.down``, ``engine.down``) pending, or its alert active (firing, or
    recovering until its hold ends)."""
    judged: tuple[Alert | Pending, ...] = (*engine.active(), *engine.pending())
    return {a.subject for a in judged if a.rule == rule}


def _bound(ctx: RuleContext, s: EngineSample) -> str:
    """``pool`` / ``scheduler`` / ``none``, as the queue rules judge it."""
    t = ctx.thresholds
    waiting = float(s.waiting) if is_num(s.waiting) else 0.0
    if waiting <= 0:
        return "none"
    if is_num(s.kv_usage) and s.kv_usage * 100.0 >= t.kv_usage_pct:
        return "pool"
    limit = float(s.max_num_seqs) if is_num(s.max_num_seqs) else ctx.max_num_seqs.get(s.engine)
    if is_num(s.running) and limit is not None and s.running >= limit:
        return "scheduler"
    return "none"


def _cause(ctx: RuleContext, s: EngineSample, held: str, figure: str) -> tuple[str, str]:
    """The deficit's cause as the alert rules find it (:func:`~sparktop.alerts.causes.explain`)."""
    found = explain(ctx, s, figure)
    if found is None:
        return "unexplained", ""
    if found.kind == "node":
        return "straggler", found.node or ""
    if found.kind == "queueing":
        return (f"{held}_bound" if held != "none" else "queueing"), ""
    return ("pool_bound" if found.kind == "pool" else "spec_acceptance"), ""
