"""One state for a GPU that answered: ``ok``, ``implausible data``, ``throttled``, ``low-power``.

The monitor's ``state`` column, ``snapshot``'s table and its JSON ``state``/``ok`` all read
this judgement, made with the alert rules' own tests (:mod:`sparktop.alerts.gpu_rules`): an
active slowdown reason or the SM clock ``clock_drop_pct`` below the loaded baseline is
``throttled``; the hidden low-power pattern (high utilisation, low clock and power, no reason
bit) is ``low-power`` (the monitor writes it ``low-power?``: it is inferred, not reported);
a GPU with readings refused as implausible, and nothing worse, is ``implausible data``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from sparktop.alerts.context import RuleContext
from sparktop.alerts.counters import CounterTracker
from sparktop.alerts.gpu_rules import GpuView, clock_drop_pct, hidden_low_power, reference_mhz
from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import ClusterState
from sparktop.model import GpuSample, NodeSample


class GpuState(enum.StrEnum):
    """A healthy GPU's condition, worst last."""

    OK = "ok"
    IMPLAUSIBLE = "implausible data"
    """Some readings were refused as outside their plausible range
    (:attr:`~sparktop.model.GpuSample.implausible`): shown n/a with the reason, read by no rule."""
    THROTTLED = "throttled"
    LOW_POWER = "low-power"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {GpuState.OK: 0, GpuState.IMPLAUSIBLE: 1, GpuState.THROTTLED: 2, GpuState.LOW_POWER: 3}


@dataclass(frozen=True, slots=True)
class GpuJudgement:
    """What the rules' tests say of one GPU's newest reading.

    ``reference_mhz``: the clock it is judged against (own loaded baseline, never below the
    profile's), None before there is one; ``below``: SM clock past ``clock_drop_pct`` under
    it while loaded; ``low_power``: the hidden low-power pattern.
    """

    gpu: GpuSample
    reference_mhz: float | None
    below: bool
    low_power: bool

    @property
    def state(self) -> GpuState:
        if self.low_power:
            return GpuState.LOW_POWER
        if self.below or self.gpu.slowdowns:
            return GpuState.THROTTLED
        if self.gpu.implausible:
            return GpuState.IMPLAUSIBLE
        return GpuState.OK


_NO_COUNTERS = CounterTracker(0.0)
"""The state reads no slowdown counters (growth needs history; the alert engine tracks it)."""


def context(
    state: ClusterState, thresholds: Thresholds, profile_baseline_mhz: float | None
) -> RuleContext:
    """A rule context to judge GPUs with (no counters: the state is the newest reading's)."""
    return RuleContext(state, thresholds, _NO_COUNTERS, profile_baseline_mhz=profile_baseline_mhz)


def judge_gpu(ctx: RuleContext, node: str, gpu: GpuSample) -> GpuJudgement:
    """The judgement of one GPU of ``node`` in ``ctx``'s cluster state."""
    own = ctx.state.baseline_mhz(node, gpu.key)
    reference = reference_mhz(own, ctx.profile_baseline_mhz, gpu)
    return judge_view(ctx, GpuView(node, gpu, reference, {}))


def judge_view(ctx: RuleContext, view: GpuView) -> GpuJudgement:
    """The judgement of a GPU the rules already viewed (:func:`~sparktop.alerts.gpu_rules.
    gpu_views`: its reference clock is the same one :func:`judge_gpu` computes)."""
    return GpuJudgement(
        view.gpu,
        view.baseline_mhz,
        clock_drop_pct(ctx, view) is not None,
        hidden_low_power(ctx, view),
    )


def worst(states: Mapping[str, GpuState]) -> GpuState:
    """A node's state from its GPUs': the worst one (``ok`` with no GPUs)."""
    return max(states.values(), key=lambda s: s.rank, default=GpuState.OK)


def gpu_states(ctx: RuleContext, samples: tuple[NodeSample, ...]) -> dict[str, dict[str, GpuState]]:
    """Node → GPU key → state, for every node that answered with GPUs."""
    return {
        s.node: {g.key: judge_gpu(ctx, s.node, g).state for g in s.gpus}
        for s in samples
        if s.ok and s.gpus
    }
