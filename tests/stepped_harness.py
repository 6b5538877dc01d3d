"""The simulator on a clock moved by hand, and the alert harness on it.

:class:`~tests.alerts_sim_harness.Harness` on :func:`~tests.sim_helpers.running_sim` polls a
simulator whose clock runs at ``speed`` × wall time: on a loaded machine one poll can take
several simulated seconds, while the alerts still count it as one, so what a test sees
depends on how busy the machine is. Here simulated time is set by hand, one second before
every poll (the scenario's due actions carried out then, as the runner's tick would), so
poll N always reads the simulator at simulated second N, whatever the machine's speed.
Tests without the harness move it with :func:`step_to` (a scenario's fault at its time,
however long the machine took to get there).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sparktop.alerts import Event
from sparktop.sim.clock import SimClock
from sparktop.sim.runner import SimHandle, SimOptions, start_sim
from tests.alerts_sim_harness import Harness


class HandClock(SimClock):
    """A simulated clock that stands still until :meth:`set` moves it (never backwards)."""

    def __init__(self) -> None:
        self._hand = 0.0
        super().__init__(1.0, wall=lambda: self._hand)

    def set(self, sim_s: float) -> None:
        self._hand = max(self._hand, sim_s)


@asynccontextmanager
async def stepped_sim(**options: object) -> AsyncIterator[SimHandle]:
    """A simulator (``SimOptions(**options)``; ``speed`` is meaningless here) on a
    :class:`HandClock`, with no ticking task: :class:`SteppedHarness` moves it."""
    sim = await start_sim(SimOptions(**options), clock=HandClock(), tick=False)  # type: ignore[arg-type]
    try:
        await sim.step()  # the scenario's start (what the ticking runner does at once)
        yield sim
    finally:
        await sim.close()


async def step_to(sim: SimHandle, sim_s: float) -> None:
    """Move a :func:`stepped_sim` to simulated second ``sim_s`` and carry out the scenario's
    actions due by then."""
    clock = sim.clock
    assert isinstance(clock, HandClock), "step_to needs stepped_sim()"
    clock.set(sim_s)
    await sim.step()


class SteppedHarness(Harness):
    """:class:`Harness` on :func:`stepped_sim`: each poll first moves the clock to the
    simulated second it reads, so the harness never waits and never falls behind."""

    async def poll(self) -> list[Event]:
        await step_to(self.sim, self.t0 + self.polls + 1.0)
        return await super().poll()
