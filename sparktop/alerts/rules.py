"""Alert rules: pure functions from the cluster state (and its history) to findings.

A :class:`Finding` says "this condition holds now on this subject" with the numbers behind
it; :class:`~sparktop.alerts.engine.AlertEngine` turns findings that persist into alerts
(hysteresis). Rules keep no state: what they need beyond the newest samples (history,
baselines, slowdown-counter growth, the profile's expected row) comes in the
:class:`RuleContext`. Thresholds and their defaults: :mod:`sparktop.alerts.thresholds`.

Each rule is declared where it is defined with :func:`rule`: every id it emits and the
:class:`Scope` of each (what it reads, so what becomes of its alert while that node or engine
fails). :data:`SCOPES`, :data:`NODE_SCOPED`, :data:`ENGINE_SCOPED` and ``snapshot``'s
availability rules are derived from those declarations; a rule without one is refused.

Rule ids (``Finding.rule``) and default severities:

* GPU (subject ``node/gpuN``, warning): ``gpu.throttle`` (an active slowdown reason —
  thermal, power cap, HW slowdown, power brake, never idle/app-clock/display —, growing
  slowdown counters, or SM clock ``clock_drop_pct`` below the GPU's own loaded baseline),
  ``gpu.temperature`` (above ``temperature_c``), ``gpu.hidden_low_power`` (GB10 stuck in a
  low-power state with no reason bit);
* node: ``node.down`` (critical: unreachable, SSH, host-key or auth failure),
  ``node.gpu_unavailable`` (warning: the node answers, its GPUs cannot be read — no driver,
  NVML failing, nvidia-smi hung or garbled);
* host (DESIGN.md §13, :mod:`sparktop.alerts.host_rules`): ``node.memory_pressure``
  (MemAvailable, swap, PSI), ``fabric.link_down``, ``fabric.errors``, ``fabric.asymmetry``
  (RoCE), ``gpu.low_power_vs_peers`` (a busy TP rank far below its peers' power);
* engine (warning unless noted): ``engine.down`` (unreachable, metrics disabled or
  unavailable), ``engine.restarted`` (fires at once, clears after ``hold_s``),
  ``engine.stale`` (frozen gauges), ``engine.degraded`` (a load gauge on the page
  refused: NaN, negative, a share past 1, a fractional or impossible request count, a
  series repeated with another value; the gauges left are still judged), ``kv.usage``
  (critical at ``kv_critical_pct`` with requests waiting), ``queue.pool_bound`` (waiting
  with the KV cache full),
  ``queue.scheduler_bound`` (waiting with running = ``max_num_seqs``), ``kv.preemptions``
  (preemptions in the sample's rate window; clears when that rate is 0), ``kv.exhaustion``
  (time to a full pool within ``exhaustion_horizon_s``, only at usage ≥ half of
  ``kv_usage_pct`` after a rise sustained over ``slope_window_s``; clears when usage falls),
  ``engine.stalled`` (critical: requests running, no token and the KV still for
  ``stall_s`` while the page answers, :mod:`sparktop.alerts.stall_rules`),
  ``spec.acceptance`` (speculative-decoding acceptance ``spec_drop_pct`` below the engine's
  own recent baseline), ``expected.ttft`` and
  ``expected.decode`` (live TTFT p50, or per-stream decode from mean ITL, worse than the
  profile's row), ``tp.straggler`` (the member of the tensor-parallel group that holds it
  back, a warning about the node; the ``expected.*`` alert it explains turns critical and
  names it: one alert per engine and figure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sparktop.alerts import (
    engine_rules,
    expected_rules,
    gpu_rules,
    host_rules,
    spec_rules,
    stall_rules,
)
from sparktop.alerts.context import (
    Expected,
    ExpectedFn,
    Finding,
    Rule,
    RuleContext,
    Scope,
    rule,
    scopes_of,
    unknown_scopes,
)

RULES: tuple[Rule, ...] = (
    gpu_rules.RULES
    + host_rules.RULES
    + engine_rules.RULES
    + stall_rules.RULES
    + spec_rules.RULES
    + expected_rules.RULES
)
"""Every rule, in evaluation order."""

SCOPES = scopes_of(RULES)
"""Every rule id and its :class:`Scope`, as each rule declares it (:func:`rule`)."""


def ids_in(scopes: Mapping[str, Scope], *wanted: Scope) -> frozenset[str]:
    """The rule ids of ``scopes`` whose scope is one of ``wanted``."""
    return frozenset(rule_id for rule_id, scope in scopes.items() if scope in wanted)


NODE_SCOPED = ids_in(SCOPES, Scope.NODE)
"""Rules that read a node's readings (unknown while the node's poll fails)."""

ENGINE_SCOPED = ids_in(SCOPES, Scope.ENGINE, Scope.ENGINE_NODE)
"""Rules that read an engine's metrics (cleared while its scrape fails: see AlertEngine)."""


def evaluate(ctx: RuleContext, rules: Iterable[Rule] | None = None) -> list[Finding]:
    """Run every rule (default :data:`RULES`) and return the findings, one per key.

    ``TypeError`` for a rule not declared with :func:`rule`."""
    seen: dict[str, Finding] = {}
    for each in RULES if rules is None else rules:
        if not isinstance(each, Rule):
            name = getattr(each, "__qualname__", repr(each))
            raise TypeError(f"rule {name} declares no scope: define it with @rule({{id: Scope}})")
        for finding in each(ctx):
            seen.setdefault(finding.key, finding)
    return list(seen.values())


__all__ = [
    "ENGINE_SCOPED",
    "NODE_SCOPED",
    "RULES",
    "SCOPES",
    "Expected",
    "ExpectedFn",
    "Finding",
    "Rule",
    "RuleContext",
    "Scope",
    "evaluate",
    "ids_in",
    "rule",
    "scopes_of",
    "unknown_scopes",
]
