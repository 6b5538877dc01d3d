"""``sparktop demo``: a simulated cluster on loopback, watched by the real monitor."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktop.commands.exits import exit_status
from sparktop.commands.sim import add_common_arguments, options_from, scenario_help
from sparktop.errors import RuntimeFailure, UserError
from sparktop.sim.scenarios import SCENARIOS, TOUR_PERIOD_S, Act, fault_names, timeline
from sparktop.sim.signals import Terminated, raise_on_signals
from sparktop.values import minutes_text

if TYPE_CHECKING:
    from sparktop.alerts.pipeline import AlertOutputs

DEMO_HOLD_S = 5.0
"""Alert hold of the demo's inventory, in simulated seconds (the monitor's default is 10)."""

_NOT_BLAMED = frozenset({Act.BLIP.value, Act.LOAD_SHIFT.value})
"""Tour steps that are not faults: a brief throttle while the pool is full, a load change."""

DESCRIPTION = """\
Start a simulated DGX Spark cluster on loopback (real SSH servers answering like GB10 nodes,
real HTTP servers speaking vLLM's /metrics) and open the monitor on it, polled by the same
code as a real cluster. The generated inventory, keys and known_hosts live in a temporary
directory (printed) that is removed on exit, also when the terminal closes (SIGHUP) or the
process is killed with SIGTERM.

{tour}

The generated inventory differs from a real cluster's in two ways:
  alerts: {{hold_s: 5}}   a condition must hold 5 s (not the default 10 s) to raise an alert
                        and be gone 5 s to clear it, so each short fault's alert fires while
                        the fault is on screen (with --speed X: 5/X wall seconds, and
                        engine.stalled's stall_s 20/X);
  max_num_seqs: 32      the simulated server runs 32 sequences although the default profile's
                        sweep used 8: 8 sequences of at most 1M tokens could never fill its
                        11.4M-token KV pool, and the pool-exhaustion fault needs it to fill.
                        The engine panel and the budget read the limit from this inventory,
                        so they say 32 too.
"""

EPILOG = """\
scenarios:
{scenarios}

examples:
  sparktop demo                                  4 nodes, 1 engine, the tour
  sparktop demo --scenario thermal               one node overheats and holds the engine back
  sparktop demo --nodes 8 --engines 2 --speed 3  bigger, faster
  sparktop demo --llamacpp                       a llama.cpp engine beside the vLLM one
  sparktop demo --no-tui --rounds 3              print three snapshot tables and exit

""" + exit_status(
    [
        (0, "quit with q (with --no-tui: after --rounds N tables)"),
        (1, "the simulator could not start"),
        (2, "a bad option"),
        (129, "the terminal closed (SIGHUP)"),
        (130, "quit with Ctrl-C"),
        (143, "killed with SIGTERM"),
    ]
).replace("{", "{{").replace("}", "}}")


def _description() -> str:
    """The help text, its tour list read from the tour's own steps (what the demo prints)."""
    faults = fault_names(SCENARIOS["tour"])
    quiet = [name for name in faults if name in _NOT_BLAMED]
    tour = (
        "The default scenario, 'tour', plays the faults in turn, 15-40 s each (thermal 40 s, "
        "node-down 15 s, the host faults 25 s, the engine stall 35 s, the others 20 s) with "
        f"10 s or more of recovery between, {minutes_text(TOUR_PERIOD_S)} per round, looping: "
        f"{', '.join(faults)} ({' and '.join(quiet)} show what is not blamed). "
        "Background load runs throughout."
    )
    return DESCRIPTION.format(tour=textwrap.fill(tour, width=92, break_on_hyphens=False))


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        help="a simulated cluster on loopback, opened in the monitor (no hardware needed)",
        description=_description(),
        epilog=EPILOG.format(scenarios=scenario_help()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_arguments(parser, "tour")
    parser.add_argument("--theme", default=None, help="monitor theme (see sparktop --help)")
    parser.add_argument(
        "--no-tui",
        action="store_true",
        help="print a snapshot table every few seconds instead of opening the monitor",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        metavar="N",
        help="with --no-tui: stop after N tables (default: until Ctrl-C)",
    )
    from sparktop.alerts.options import add_output_arguments
    from sparktop.commands.terminal import add_force_tui

    add_output_arguments(parser)
    add_force_tui(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    if args.rounds is not None and args.rounds < 1:
        raise UserError(f"--rounds must be at least 1, got {args.rounds}")
    if not args.no_tui:
        from sparktop.ui.themes import check_theme

        check_theme(args.theme)  # before the simulator starts
    options = dataclasses.replace(options, alert_hold_s=round(DEMO_HOLD_S / options.speed, 3))
    from sparktop.plan import load_named

    load_named(options.profile)  # a bad name is a UserError before anything starts
    from sparktop.alerts.pipeline import AlertOutputs

    if not args.no_tui:
        from sparktop.commands.terminal import require_terminal

        require_terminal(args, "sparktop demo --no-tui")
    outputs = AlertOutputs.from_args(args)  # a bad --on-alert/--record fails before the start
    from sparktop.sim.thread import SimThread  # heavy (the estimator): not for --help

    sim = SimThread(options)
    # SIGHUP/SIGTERM unwind through the finally below like Ctrl-C: the key directory goes.
    with raise_on_signals() as stopping:
        try:
            try:
                handle = sim.start()
            except OSError as exc:
                raise RuntimeFailure(f"could not start the simulator: {exc}") from None
            print(f"simulated cluster in {handle.directory} (removed on exit)")
            print(handle.summary())
            print(startup_text(options.scenario, options.speed), flush=True)
            if args.no_tui:
                return snapshot_loop(
                    handle.inventory_path, rounds=args.rounds or 0, outputs=outputs
                )
            return open_monitor(handle.inventory_path, theme=args.theme, outputs=outputs)
        except Terminated as exc:
            stopping.cleaning()
            return exc.exit_code
        finally:
            stopping.cleaning()
            outputs.close()
            sim.stop()


def startup_text(scenario: str, speed: float) -> str:
    """What the scenario will show and when (printed before the monitor opens)."""
    chosen = SCENARIOS[scenario]
    hold = f"alerts hold {DEMO_HOLD_S / speed:g} s to fire and to clear"
    if not chosen.steps:
        return f"{chosen.description}; {hold}"
    when = timeline(chosen, speed)
    if chosen.period_s:
        round_s = chosen.period_s / speed
        return (
            f"faults are played in turn, one at a time, then the round repeats every "
            f"{minutes_text(round_s)}: {when}; {hold}"
        )
    return f"{chosen.description}: {when}; {hold}"


def open_monitor(inventory_path: Path, *, theme: str | None, outputs: AlertOutputs) -> int:
    """The one call that opens the TUI on the simulator's inventory."""
    from sparktop.inventory import load_inventory
    from sparktop.plan import Plan
    from sparktop.ui.app import run_tui

    plan = Plan.from_inventory(load_inventory(inventory_path))
    sources = plan.sources()
    alerts = outputs.wrap(plan.alert_engine(), plan.header)
    return run_tui(plan, sources, alerts, theme=theme)


def snapshot_loop(
    inventory_path: Path,
    *,
    rounds: int = 0,
    interval_s: float = 2.0,
    outputs: AlertOutputs | None = None,
) -> int:
    """Print a snapshot table of the simulated cluster every ``interval_s`` until Ctrl-C
    (then 130) or ``rounds`` tables (then 0).

    With ``outputs`` (:class:`~sparktop.alerts.pipeline.AlertOutputs`) every table's samples
    also go through the inventory's alert engine and that pipeline: ``--record`` gets one
    tick per table, ``--on-alert``/``--alert-log`` get the events; the caller closes it.
    """
    from sparktop.cluster import ClusterState
    from sparktop.inventory import load_inventory
    from sparktop.plan import Plan
    from sparktop.report.snapshot_table import fit_console, render_table
    from sparktop.safe_console import PrintableConsole
    from sparktop.snapshot import take_snapshot

    plan = Plan.from_inventory(load_inventory(inventory_path))
    console = PrintableConsole()
    state = ClusterState()
    pipeline = None
    if outputs is not None:
        pipeline = outputs.wrap(plan.alert_engine(), plan.header)

    async def loop() -> None:
        sources = plan.sources()
        try:
            done = 0
            while not rounds or done < rounds:
                started = time.monotonic()
                snap = await take_snapshot(sources, cluster=plan.cluster, close=False)
                fit_console(console, snap)
                render_table(snap, console)
                if pipeline is not None:
                    for node in snap.nodes:
                        state.apply(node)
                    for engine_sample in snap.engines:
                        state.apply(engine_sample)
                    pipeline.update(state, time.time())
                done += 1
                if not rounds or done < rounds:
                    await asyncio.sleep(max(0.0, interval_s - (time.monotonic() - started)))
        finally:
            await asyncio.gather(*(s.aclose() for s in sources), return_exceptions=True)

    try:
        asyncio.run(loop())
    except Terminated:
        raise
    except KeyboardInterrupt:
        return 130
    return 0
