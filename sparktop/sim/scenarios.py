"""Fault scenarios on a timeline: what goes wrong, when, and on which node or engine.

A :class:`Scenario` is a list of ``(at_s, action)`` steps in simulated seconds from the
moment it is selected; ``period_s`` makes it loop. Single scenarios inject their fault
after ``LEAD_S`` seconds of normal load (so baselines exist) and hold it; ``node-down``
comes back after 30 s. ``tour`` plays every fault in turn, ``TOUR_PERIOD_S`` per round at speed
1: each fault lasts 20 s (15 s for node-down; 25 s for the steady-clock slow state, memory
pressure and a link going down, which the slow tier reads every 10 s; 40 s for the thermal
step, so the throttled node holds the group back over the monitor's whole 30 s window and is
named, critical), so an alert holding 5 s fires well inside it, with at least 10 s of
recovery after it, so the alert clears before the next fault starts. Two steps show what is
*not* blamed: during the pool exhaustion one node throttles for a few seconds (the pool is
named, the node is not), and at the end the load changes on a healthy engine (half the
clients, one prompt length: the expected row follows the window's load, no alert).
Background load runs throughout, so decode and finished requests never stop.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sparktop.values import minutes_text


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
    SPEC_COLLAPSE = "spec-collapse"
    STEADY_SLOW = "steady-slow"
    MEMORY_PRESSURE = "memory-pressure"
    LINK_DOWN = "link-down"
    BLIP = "thermal-blip"
    BLIP_END = "blip-end"
    LOAD_SHIFT = "load-change"
    LOAD_BACK = "load-back"
    STALL = "engine-stall"


LONG_PROMPT_TOKENS = 501_869
"""The 4-Spark sweep's 512K prompt (TTFT 181.4 s at concurrency 1)."""

TOUR_LONG_PROMPT_TOKENS = 124_759
"""The 4-Spark sweep's 128K prompt (TTFT 33.3 s at concurrency 1): in the tour its prefill
ends, and its prompt tokens land, inside its step."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """``long_prompt_tokens``: the prompt the ``long-context`` action sends."""

    name: str
    description: str
    steps: tuple[tuple[float, Act], ...] = ()
    period_s: float | None = None
    long_prompt_tokens: int = LONG_PROMPT_TOKENS


LEAD_S = 5.0

SPEC_COLLAPSED = 0.2
"""MTP acceptance per position in the ``spec-collapse`` scenario (baseline 0.8): a draft
yields ~1.25 tokens instead of ~3.7, acceptance rate ~5 % instead of ~54 %."""

SPEC_LEAD_S = 45.0
"""``spec-collapse`` waits this long so the acceptance has a baseline of its own first."""

BLIP_S = 7.0
"""How long the tour's blip heats its node: ~4 s to pass the thermal onset, then ~3 s of SW
thermal slowdown."""

LOAD_SHIFT = (3, (7513,))
"""The tour's load change: 3 clients with the sweep's 8K prompt (instead of 6 with prompts of
1K–16K). Longer prompts would leave every client in prefill at once for over 10 s."""

_TOUR = (
    (0.0, Act.RECOVER),
    # 40 s: the throttled node holds the group back over a whole 30 s window.
    (8.0, Act.THERMAL),
    (48.0, Act.RECOVER),
    (58.0, Act.LOW_POWER),
    (78.0, Act.RECOVER),
    (88.0, Act.FLOOD),
    # A node throttles for ~3 s while the pool is full: the pool is named, never the node.
    (96.0, Act.BLIP),
    (96.0 + BLIP_S, Act.BLIP_END),
    (108.0, Act.END_FLOOD),
    (118.0, Act.NODE_DOWN),
    # Shorter down, longer gap: a monitor backing off from a dead node reconnects late.
    (133.0, Act.NODE_UP),
    (148.0, Act.RESTART),
    # Prefill ~33 s, then ~128 tokens of decode: done before the host faults.
    (156.0, Act.LONG_CONTEXT),
    # The host faults are read by the slow tier (every 10 s beside the stream): 25 s each.
    (200.0, Act.STEADY_SLOW),
    (225.0, Act.RECOVER),
    (240.0, Act.MEMORY_PRESSURE),
    (265.0, Act.RECOVER),
    (280.0, Act.LINK_DOWN),
    (305.0, Act.RECOVER),
    # A healthy engine's load changes twice: no alert.
    (320.0, Act.LOAD_SHIFT),
    (355.0, Act.LOAD_BACK),
    # Running requests freeze, the server answers: engine.stalled after STALL_S + hold.
    (380.0, Act.STALL),
    (415.0, Act.RECOVER),
)
TOUR_PERIOD_S = 430.0

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
                "a 501,869-token request (the sweep's 512K prompt) prefills for ~3 min next "
                "to the load: running +1, KV climbing, then its prompt tokens land at once",
                ((LEAD_S, Act.LONG_CONTEXT),),
            ),
            Scenario(
                "spec-collapse",
                "speculative decoding stops paying: MTP acceptance falls from ~54 % to ~5 % "
                "of draft tokens (mean acceptance length 3.7 → 1.25) and decode slows with it",
                ((SPEC_LEAD_S, Act.SPEC_COLLAPSE),),
            ),
            Scenario(
                "steady-slow",
                "one node drops to ~17 W at a steady ~2,400 MHz and 100 % busy, no reason "
                "bit, its PL1 cap lowered: decode 94 vs 63 ms/step",
                ((LEAD_S, Act.STEADY_SLOW),),
            ),
            Scenario(
                "memory-pressure",
                "one node's free memory drains to ~1.5 GiB in 15 s: swap fills, PSI climbs",
                ((LEAD_S, Act.MEMORY_PRESSURE),),
            ),
            Scenario(
                "link-down",
                "one node's first RoCE link goes down: link_downed ticks, errors grow, "
                "its fabric traffic collapses",
                ((LEAD_S, Act.LINK_DOWN),),
            ),
            Scenario(
                "engine-stall",
                "the engine deadlocks: requests stay running with no tokens for good, the "
                "GPUs spin at ~96 % and 16–27 W, /metrics and /health keep answering",
                ((LEAD_S + 25.0, Act.STALL),),
            ),
            Scenario(
                "thermal-blip",
                f"one node heats for {BLIP_S:g} s: ~3 s of SW thermal slowdown (the tour "
                "plays it while the KV pool is full, to show the pool is blamed, not the node)",
                ((LEAD_S, Act.BLIP), (LEAD_S + BLIP_S, Act.BLIP_END)),
            ),
            Scenario(
                "load-change",
                f"the load changes for 35 s ({LOAD_SHIFT[0]} clients with 8K prompts instead "
                "of 6 with 1K–16K), then back: a healthy engine, no node blamed",
                ((LEAD_S, Act.LOAD_SHIFT), (LEAD_S + 35.0, Act.LOAD_BACK)),
            ),
            Scenario(
                "tour",
                "every fault in turn, 15–40 s each (thermal 40 s, node-down 15 s, the host "
                "faults 25 s, the engine stall 35 s, the others 20 s), 10 s or more of recovery "
                f"between, {minutes_text(TOUR_PERIOD_S)} per round (its long-context step "
                "sends the sweep's 128K "
                "prompt; a node blips during the pool exhaustion and the load changes at the "
                "end, neither blamed)",
                _TOUR,
                period_s=TOUR_PERIOD_S,
                long_prompt_tokens=TOUR_LONG_PROMPT_TOKENS,
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


_ENDS = {Act.RECOVER, Act.END_FLOOD, Act.NODE_UP, Act.BLIP_END, Act.LOAD_BACK}
_ENDED_BY = {
    Act.FLOOD: Act.END_FLOOD,
    Act.NODE_DOWN: Act.NODE_UP,
    Act.BLIP: Act.BLIP_END,
    Act.LOAD_SHIFT: Act.LOAD_BACK,
}
"""The step that ends a fault (default: ``RECOVER``)."""
_INSTANT = {Act.RESTART, Act.LONG_CONTEXT}
"""Faults that play out by themselves: a restart (3 s unavailable), one long request."""
_SHOWN = {Act.FLOOD: "pool-exhaustion"}


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"


def fault_names(scenario: Scenario) -> tuple[str, ...]:
    """The faults a scenario plays, in order, by the names :func:`timeline` prints
    (``("thermal", "hidden-low-power", "pool-exhaustion", "thermal-blip", …)`` for the tour)."""
    return tuple(_SHOWN.get(act, act.value) for _, act in scenario.steps if act not in _ENDS)


def timeline(scenario: Scenario, speed: float = 1.0) -> str:
    """When each fault plays, in wall time at ``speed`` from the scenario's start:
    ``thermal 0:08–0:48, …, server-restart 2:28`` (a fault that plays out by itself, or one
    without an end step, is shown at its start)."""
    steps = scenario.steps
    parts = []
    for i, (at, act) in enumerate(steps):
        if act in _ENDS:
            continue
        ender = _ENDED_BY.get(act, Act.RECOVER)
        end = None if act in _INSTANT else next((t for t, a in steps[i + 1 :] if a is ender), None)
        span = _clock(at / speed) + (f"–{_clock(end / speed)}" if end is not None else "")
        parts.append(f"{_SHOWN.get(act, act.value)} {span}")
    return ", ".join(parts)
