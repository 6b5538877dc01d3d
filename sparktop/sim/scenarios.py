"""Fault scenarios on a timeline: what goes wrong, when, and on which node or engine.

A :class:`Scenario` is a list of ``(at_s, action)`` steps in simulated seconds from the
moment it is selected; ``period_s`` makes it loop. Single scenarios inject their fault
after ``LEAD_S`` seconds of normal load (so baselines exist) and hold it; ``node-down``
comes back after 30 s. ``tour`` plays every fault in turn with recovery between, about two
minutes per round at speed 1, so a newcomer sees each alert.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


class Act(enum.StrEnum):
    """What a scenario step does. Targets are chosen by the runner (see ``Targets``)."""

    RECOVER = "recover"
    THERMAL = "thermal"
    LOW_POWER = "hidden-low-power"
    FLOOD = "flood"
    END_FLOOD = "end-flood"
    NODE_DOWN = "node-down"
    NODE_UP = "node-up"
    RESTART = "server-restart"
    LONG_CONTEXT = "long-context"


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    steps: tuple[tuple[float, Act], ...] = ()
    period_s: float | None = None


LEAD_S = 5.0

_TOUR = (
    (0.0, Act.RECOVER),
    (8.0, Act.THERMAL),
    (28.0, Act.RECOVER),
    (31.0, Act.LOW_POWER),
    (51.0, Act.RECOVER),
    (54.0, Act.FLOOD),
    (74.0, Act.END_FLOOD),
    (77.0, Act.NODE_DOWN),
    (93.0, Act.NODE_UP),
    (96.0, Act.RESTART),
    (108.0, Act.LONG_CONTEXT),
)

SCENARIOS: Mapping[str, Scenario] = MappingProxyType(
    {
        s.name: s
        for s in (
            Scenario("normal", "steady background load, no faults"),
            Scenario(
                "thermal",
                "one node heats past 90 °C and its SM clock sags to ~1,830 MHz (reason 0x20)",
                ((LEAD_S, Act.THERMAL),),
            ),
            Scenario(
                "hidden-low-power",
                "one node sticks at ~513 MHz, ~15 W, 100 % busy, with no reason bit",
                ((LEAD_S, Act.LOW_POWER),),
            ),
            Scenario(
                "pool-exhaustion",
                "long sessions return at once: the KV pool fills, requests wait, vLLM preempts",
                ((LEAD_S, Act.FLOOD),),
            ),
            Scenario(
                "node-down",
                "one node stops answering SSH for 30 s, then comes back",
                ((LEAD_S, Act.NODE_DOWN), (LEAD_S + 30.0, Act.NODE_UP)),
            ),
            Scenario(
                "server-restart",
                "the inference server restarts: 3 s unavailable, every counter back to zero",
                ((LEAD_S, Act.RESTART),),
            ),
            Scenario(
                "long-context",
                "a 501,869-token request arrives (the sweep's 512K prompt)",
                ((LEAD_S, Act.LONG_CONTEXT),),
            ),
            Scenario(
                "tour",
                "every fault in turn, with recovery between (about two minutes per round)",
                _TOUR,
                period_s=125.0,
            ),
        )
    }
)


def scenario_names() -> tuple[str, ...]:
    return tuple(SCENARIOS)


class Player:
    """Hands out a scenario's due actions as simulated time passes."""

    def __init__(self, scenario: Scenario, start_s: float) -> None:
        self.scenario = scenario
        self.start_s = start_s
        self._fired = 0  # actions handed out so far, over all rounds

    def due(self, now: float) -> list[Act]:
        steps = self.scenario.steps
        if not steps:
            return []
        out: list[Act] = []
        period = self.scenario.period_s
        while True:
            rnd, i = divmod(self._fired, len(steps))
            if rnd and not period:
                return out
            at = self.start_s + rnd * (period or 0.0) + steps[i][0]
            if at > now:
                return out
            out.append(steps[i][1])
            self._fired += 1
