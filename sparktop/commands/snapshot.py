"""``sparktop snapshot``: one consolidated poll of the cluster, for scripts and cron."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sparktop.commands.exits import exit_status
from sparktop.commands.monitor import add_endpoint_arguments, endpoint_engines
from sparktop.errors import UserError
from sparktop.report.snapshot_table import NODE_PRIORITY
from sparktop.snapshot import SCHEMA

if TYPE_CHECKING:
    from sparktop.inventory import Inventory
    from sparktop.plan import Plan
    from sparktop.snapshot import Snapshot

DESCRIPTION = f"""\
Poll every node and engine in the inventory (or this machine and each --endpoint server)
once, concurrently, and print one table (or a JSON document with --json): per GPU the SM and
max SM clock, temperature, power, utilisation, memory (unified memory marked), decoded
clock-event reasons and the node's state.

Per engine (and per data-parallel rank): running/max_num_seqs, waiting, KV-cache usage, KV
pool and free tokens (and where the pool size came from), preemptions/s, prefill and decode
tok/s and TTFT p50/p95, ITL p50 over --window, mean prompt tokens of finished requests,
prefix-cache hit rate, and the state (ok, stale, unavailable, metrics disabled, unreachable)
with its reason.

In a terminal the tables fit its width without clipping a value: columns that do not fit are
left out, least important first ({", ".join(reversed(NODE_PRIORITY[2:]))}; node and state
always stay; a narrower column still shows in the room a wider one left), and named under
the table; engines split into two narrower tables (requests and KV cache; speed). Piped
output gets every column on whole lines. Memory on GB10 reads "U used/totalG·GPU heldG":
unified memory in GiB, and what GPU processes hold.

Each node has its own deadline (connect_timeout_s, then command_timeout_s for the probe), so a
hung node is reported as such without holding up the others.

The alert rules run once over the poll and every condition present now is listed (a single
poll has no hold time), and what it found decides how the command exits (below).
"""

EPILOG = f"""\
examples:
  sparktop snapshot --inventory cluster.yaml
  sparktop snapshot --endpoint http://127.0.0.1:8000   # this machine and one server, no inventory
  sparktop snapshot --inventory cluster.yaml --json | jq '.nodes[] | {{node, state, message}}'
  sparktop snapshot -i cluster.yaml --json --timeout 8 > snap.json
  case $? in 1) echo "some did not answer";; 3) echo "critical";; 4) echo "degraded";; esac
  sparktop snapshot -i cluster.yaml --json --window 5 | jq '.engines[].decode_tok_per_s'
  sparktop snapshot -i cluster.yaml --window 10 --plot curve.svg   # each engine on its curve

JSON: schema "{SCHEMA}", keys carry their units (sm_clock_mhz, temperature_c, power_w,
utilization_pct, memory_used_mib, latency_s); a missing reading is null and its reason is in
the enclosing object's "missing" map; text is never "" (unknown or no message: null).
See sparktop/snapshot.py for the full schema.

""" + exit_status(
    [
        (3, "a critical condition in what answered (KV cache >= 98 % with requests waiting, "
            "a throttled node holding back a tensor-parallel engine's decode)"),
        (1, "some node or engine did not answer (the output still lists everything that "
            "answered, and each failure with its reason; an unreachable node is a critical "
            "alert too)"),
        (4, "degraded: everything answered, nothing critical, but a node or engine is not ok "
            '(throttled, low power, no GPU data such as "no NVIDIA driver" on a CPU-only '
            "machine beside its engine) or a warning is listed"),
        (0, "all is well: everything answered and nothing is listed"),
        (2, "a bad inventory or option"),
        (141, "the output pipe closed early (| head), as cat does"),
    ],
    "the first that applies",
)  # fmt: skip


MAX_WINDOW_S = 600.0
"""Longest --window: the command waits it out between two scrapes (10 minutes)."""


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "snapshot",
        help="one consolidated poll of the cluster (table or --json)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-i",
        "--inventory",
        type=Path,
        metavar="FILE",
        help="cluster inventory (cluster.yaml); or --endpoint",
    )
    add_endpoint_arguments(parser, "poll")
    parser.add_argument("--json", action="store_true", help="print the JSON document instead")
    parser.add_argument(
        "--profile",
        metavar="NAME|FILE",
        help="sweep profile for the expected figures and limits (default: the inventory's "
        "top-level one; an engine's own profile: still serves it), e.g. one written by "
        "'sparktop sweep'",
    )
    parser.add_argument(
        "--window",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="scrape each engine twice this far apart, so token rates and latency quantiles "
        "cover a window (default 1; 0 = one scrape: no rates)",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.svg",
        help="also write each engine's live window on the profile's TTFT and aggregate "
        "curves, as SVG (replaced if it exists; a --window of 10 s or more gives a load)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="overall deadline for the poll, to which --window is added (default: what the "
        "slowest source may take by its own bounds: a node's connect_timeout_s + "
        "command_timeout_s plus a margin, an engine's 10 s scrape deadline, twice with a "
        "--window)",
    )
    return parser


def default_timeout_s(inventory: Inventory | None, window_s: float = 0.0) -> float:
    """The poll's overall deadline, seconds: the longest any source may take by its own
    bounds. An SSH node: connect, then field check + probe, with margins (this machine,
    without an inventory: the default probe timeout and margins). An engine over HTTP: one
    scrape's deadline, or with a ``window_s`` two (the first and the last scrape of the
    window) plus the window. An engine read from Prometheus: its query deadline, the same
    way."""
    from sparktop.inventory import Inventory
    from sparktop.sources.engines.source import SCRAPE_DEADLINE_S
    from sparktop.sources.ssh.dial import CONNECT_MARGIN_S
    from sparktop.sources.ssh.source import PROBE_MARGIN_S

    if inventory is None:  # this machine and --endpoint servers, read over HTTP
        inventory = Inventory.model_construct()
    worst = inventory.ssh.command_timeout_s
    for node in inventory.nodes:
        ssh = inventory.ssh_for(node)
        worst = max(worst, ssh.connect_timeout_s + ssh.command_timeout_s)
    worst += CONNECT_MARGIN_S + PROBE_MARGIN_S
    scrapes = 2 if window_s > 0 else 1
    for engine in inventory.engines:
        if engine.source == "prometheus" and inventory.prometheus is not None:
            one = inventory.prometheus.timeout_s
        else:
            one = SCRAPE_DEADLINE_S
        worst = max(worst, scrapes * one + window_s)
    return worst


def run(args: argparse.Namespace) -> int:
    # The alert rules and the estimator are heavy: imported to run, not for --help.
    from sparktop.alerts.oneshot import judge_now, snapshot_exit_status
    from sparktop.inventory import load_inventory
    from sparktop.plan import Plan
    from sparktop.report.alerts import render_alerts
    from sparktop.report.expected import expected_json, expected_text
    from sparktop.report.snapshot_table import fit_console, render_table
    from sparktop.safe_console import PrintableConsole
    from sparktop.snapshot import snapshot_json

    if args.timeout is not None and not args.timeout > 0:
        raise UserError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    if args.inventory is None and not args.endpoints:
        raise UserError("one of the arguments -i/--inventory --endpoint is required")
    inventory = load_inventory(args.inventory) if args.inventory is not None else None
    engines = endpoint_engines(args, inventory)
    if not 0 <= args.window <= MAX_WINDOW_S:
        raise UserError(
            f"--window must be 0 to {MAX_WINDOW_S:g} seconds (the snapshot waits that long), "
            f"got {args.window:g}"
        )
    plan = Plan.from_inventory(inventory, profile=args.profile or None, engines=engines)
    if args.plot is not None:
        from sparktop.ui.curve_file import check_plot_path

        check_plot_path(args.plot)
        if plan.profile is None and not plan.own_profiles:
            raise UserError(f"--plot: no sweep profile to draw ({plan.profile_problem})")
    if args.timeout is not None:
        timeout_s = args.timeout + args.window
    else:
        timeout_s = default_timeout_s(inventory, args.window)
    snap = asyncio.run(poll(plan, timeout_s, window_s=args.window))
    # The monitor's alert engine and rules, judging one poll: no hold time.
    alerts, gpu_states = judge_now(
        (*snap.nodes, *snap.engines), plan.alert_engine(hold_s=0.0), snap.time_s
    )
    snap = dataclasses.replace(snap, alerts=alerts, gpu_states=gpu_states)
    if args.json:
        blocks = {e.engine: expected_json(plan, e) for e in snap.engines}
        json.dump(snapshot_json(snap, plan.tp_groups, blocks), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        console = PrintableConsole(highlight=False)
        fit_console(console, snap)
        render_table(snap, console, {e.engine: expected_text(plan, e) for e in snap.engines})
        render_alerts(snap.alerts, console)
    drawn = plan.profile or next(iter(plan.own_profiles.values()), None)
    if args.plot is not None and drawn is not None:
        from sparktop.ui.curve_file import snapshot_panels, write_plot

        own = {e.name: e.matched for e in plan.engines if e.matched is not None}
        panels = snapshot_panels(drawn, plan.matched, snap.engines, own)
        write_plot(args.plot, panels, f"sparktop snapshot: {plan.cluster}")
    return snapshot_exit_status(snap)


async def poll(plan: Plan, timeout_s: float, window_s: float = 0.0) -> Snapshot:
    from sparktop.snapshot import take_snapshot

    """Build the plan's sources, poll each once (engines twice ``window_s`` apart), close."""
    sources = plan.sources(engine_options={"first_window_s": window_s})
    return await take_snapshot(sources, cluster=plan.cluster, timeout_s=timeout_s)
