"""``engine.stalled``: requests running, no token for ``stall_s``, while the server answers.

The deadlock reported on DGX Spark clusters (eugr/spark-vllm-docker#260): the GPUs busy at
~96 % and 16–27 W, tokens frozen while requests are running, ``/health`` green. The test is
the one users describe: running > 0 and neither ``vllm:generation_tokens_total`` nor
``prompt_tokens_total`` grown for ``stall_s`` seconds (:attr:`~sparktop.model.EngineSample.
no_tokens_s`). A long prefill makes no token either, and vLLM counts its prompt tokens only at
its first token; it does fill the KV cache chunk by chunk, so the KV in use must also have
stood still as long (:attr:`~sparktop.model.EngineSample.kv_still_s`). Without a KV reading a
prefill cannot be told apart: no alert. Never on an idle server (running 0), never while the
page does not answer (``engine.down`` says that).
"""

from __future__ import annotations

from collections.abc import Iterator

from sparktop.alerts.context import Finding, RuleContext, Scope, rule
from sparktop.alerts.engine_rules import engine_finding, stalled_for, stalled_rank
from sparktop.alerts.model import Severity
from sparktop.model import is_num
from sparktop.safe_text import printable


def _group_evidence(ctx: RuleContext, engine: str) -> tuple[str, dict[str, float]]:
    """``"; TP group at 96 % busy, 18 W (spark-1 96 % 18 W, spark-2 95 % 19 W)"`` from the
    group's newest GPU samples (what is known of it; "" when nothing is)."""
    parts, utils, powers = [], [], []
    for node in ctx.tp_groups.get(engine, ()):
        sample = ctx.state.nodes.get(node)
        if sample is None or not sample.ok or not sample.gpus:
            continue
        gpu = sample.gpus[0]
        util, power = gpu.utilization_pct, gpu.power_w
        bits = []
        if is_num(util):
            utils.append(float(util))
            bits.append(f"{util:.0f} %")
        if is_num(power):
            powers.append(float(power))
            bits.append(f"{power:.0f} W")
        if bits:
            parts.append(f"{node} {' '.join(bits)}")
    if not parts:
        return "", {}
    values: dict[str, float] = {}
    if utils:
        values["gpu_util_pct"] = sum(utils) / len(utils)
    if powers:
        values["power_w"] = sum(powers) / len(powers)
    return f"; GPUs {', '.join(parts)}", values


@rule({"engine.stalled": Scope.ENGINE})
def stall_rule(ctx: RuleContext) -> Iterator[Finding]:
    """Critical: the engine holds running requests and produces nothing (see the module
    docstring), with the evidence: running count, seconds without a token, the TP group's
    utilisation and power when known."""
    limit = ctx.thresholds.stall_s
    for s in ctx.state.engines.values():
        still = stalled_for(s, limit)
        running, waiting_n, where = s.running, s.waiting, ""
        if still is None:
            # A data-parallel server with one rank deadlocked: its totals still move.
            stalled = stalled_rank(s, limit)
            if stalled is None:
                continue
            rank, still = stalled
            running, waiting_n = rank.running, rank.waiting
            where = f"rank {printable(rank.rank)} of {len(s.ranks)}: "
        if not is_num(running):
            continue
        gpus, values = _group_evidence(ctx, s.engine)
        waiting = f", {waiting_n:.0f} waiting" if is_num(waiting_n) and waiting_n > 0 else ""
        others = ", the other ranks generating" if where else ""
        yield engine_finding(
            s,
            "engine.stalled",
            Severity.CRITICAL,
            f"stalled: {where}{running:.0f} running{waiting} and no token for {still:.0f} s, "
            f"the KV cache unchanged (no prefill advancing) while the server answers"
            f"{others}{gpus}",
            {"running": float(running), "no_tokens_s": still, **values},
            score=round(still),
        )


RULES = (stall_rule,)
