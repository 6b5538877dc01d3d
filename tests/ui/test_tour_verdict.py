"""One verdict per engine through a whole demo tour (issue 28): the monitor polls the loopback
simulator playing every fault in turn, and at every tick the engine header reads the worst
active alert on that engine (``ok`` only when there is none), and no figure of an engine has
two active alerts. Before, the header said ``dsv41  ok`` beside an active critical on it, and
the straggler's critical and the deficit's warning gave the same decode deficit twice with
different numbers."""

from __future__ import annotations

from sparktop.inventory import load_inventory
from sparktop.plan import Plan
from sparktop.sim.scenarios import TOUR_PERIOD_S
from sparktop.ui.app import SparktopApp
from sparktop.ui.engine_views import DOWN_OR_NO_PAGE, SEVERITY_WORD, worst_alert
from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.text_block import TextBlock
from tests.sim_helpers import running_sim

SPEED = 6.0
"""The tour's 430 simulated seconds in ~72 wall seconds; hold and stall limits scale with it
(the demo's inventory: ``hold_s`` 5/X, ``stall_s`` 20/X)."""

FIGURES = {"expected.ttft": "TTFT", "expected.decode": "decode"}


def _deficit_figures(alert: object) -> set[str]:
    """The deficit figures an alert's message carries numbers for."""
    message = str(getattr(alert, "message", ""))
    found = set()
    if "% above expected" in message:
        found.add("TTFT")
    if "% below expected" in message:
        found.add("decode")
    return found


async def test_every_tour_step_shows_the_engines_worst_alert_in_its_header() -> None:
    async with running_sim(nodes=4, scenario="tour", speed=SPEED, alert_hold_s=5 / SPEED) as sim:
        plan = Plan.from_inventory(load_inventory(sim.inventory_path), interval_s=0.2)
        alerts = plan.alert_engine()
        app = SparktopApp(plan, plan.sources(), alerts, autostart=False)
        verdicts: set[str] = set()
        disagreements: list[str] = []
        doubles: list[str] = []
        start = sim.clock.now()
        async with app.run_test(size=(200, 50)) as pilot:
            while sim.clock.now() < start + TOUR_PERIOD_S + 10:
                await app.poll_now()
                await pilot.pause()
                app.tick()  # a new block renders on the tick after it mounts
                active = alerts.active()
                for name, block in app.query_one(EnginePanel).blocks.items():
                    header = str(block.query_one(".engine-lines", TextBlock).render())
                    header = header.splitlines()[0] if header else ""
                    worst = worst_alert(active, name, plan.tp_groups.get(name, ()))
                    if block.sample is not None and block.sample.state in DOWN_OR_NO_PAGE:
                        # No page (a restart's 3 s): the state itself, never ok.
                        shown = str(block.sample.state)
                        agrees = f"{name}  ok" not in header
                    elif worst is None:
                        shown = "ok"
                        agrees = f"{name}  ok" in header or "stale" in header
                    else:
                        word = SEVERITY_WORD[str(worst.severity)][0]
                        rank = f" @{worst.node}" if worst.engine is None else ""
                        shown = f"{word} {worst.rule}{rank}"
                        agrees = f"{name}  {shown}" in header
                    verdicts.add(shown)
                    if not agrees:
                        disagreements.append(f"{sim.clock.now() - start:.0f} s: {header!r}")
                    mine = [a for a in active if a.engine == name]
                    for figure in FIGURES.values():
                        about = [a.key for a in mine if figure in _deficit_figures(a)]
                        if len(about) > 1:
                            doubles.append(f"{sim.clock.now() - start:.0f} s {figure}: {about}")
    assert disagreements == []
    assert doubles == []
    # The tour was seen: the stall's critical, other verdicts, and a healthy engine.
    assert "CRIT engine.stalled" in verdicts, verdicts
    assert "ok" in verdicts and len(verdicts) >= 3, verdicts
