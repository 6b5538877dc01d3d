"""``sparktop sim``: run the simulated cluster alone, for another sparktop or other tools."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktop.commands.exits import exit_status
from sparktop.errors import UserError
from sparktop.sim.requests import LoadSpec
from sparktop.sim.scenarios import SCENARIOS
from sparktop.sim.signals import STOP_SIGNALS
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

if TYPE_CHECKING:
    from sparktop.sim.runner import SimOptions

MAX_NODES = 256
MAX_SPEED = 100.0
"""Fastest simulated time (×): at 100× a simulated second is 10 ms, about one render."""

DESCRIPTION = """\
Start a simulated DGX Spark cluster on loopback and run it until Ctrl-C: one real SSH
server per node answering sparktop's probe like a GB10, one HTTP server per engine with
vLLM's /metrics, /v1/models, /tokenize and streaming completions. Load follows a sweep
profile; scenarios inject faults. The inventory written to PATH points at it (its keys and
known_hosts live in a temporary directory; everything is removed on exit, also when the
terminal closes (SIGHUP) or the process gets SIGTERM).

The simulated server runs max_num_seqs 32 where the default profile's sweep used 8, so the
KV pool can fill (pool-exhaustion); the inventory says 32. Its alerts keep the monitor's
default hold (10 s); 'sparktop demo' writes 5 s so the tour's 20 s faults alert in time.
"""

EPILOG = """\
scenarios:
{scenarios}

examples:
  sparktop sim --write-inventory /tmp/sim.yaml
      then, in another terminal:  sparktop --inventory /tmp/sim.yaml
  sparktop sim --write-inventory sim.yaml --nodes 8 --engines 2 --scenario thermal
  sparktop sim --write-inventory sim.yaml --scenario tour --speed 5
  sparktop snapshot --inventory sim.yaml --json     (while the simulator runs)
  sparktop sim --write-inventory sim.yaml --clients 0 --speed 5
      an idle server to measure: sparktop sweep --endpoint URL --time-scale 5 -o sim.yaml

""" + exit_status(
    [
        (0, "stopped by Ctrl-C, SIGHUP or SIGTERM (the ways it is meant to stop; unlike the "
            "monitor and the demo, where q is the normal end and Ctrl-C gives 130)"),
        (2, "a bad option"),
    ]
)  # fmt: skip


def scenario_help(width: int = 92) -> str:
    """One entry per scenario, descriptions wrapped under each other."""
    indent = " " * 20
    return "\n".join(
        textwrap.fill(
            s.description, width, initial_indent=f"  {s.name:<17} ", subsequent_indent=indent
        )
        for s in SCENARIOS.values()
    )


def add_common_arguments(parser: argparse.ArgumentParser, default_scenario: str) -> None:
    """Options shared by ``sim`` and ``demo``."""
    parser.add_argument("--nodes", type=int, default=4, metavar="N", help="GB10 nodes (default 4)")
    parser.add_argument(
        "--engines",
        type=int,
        default=1,
        metavar="M",
        help="inference servers; nodes are split into M tensor-parallel groups (default 1)",
    )
    parser.add_argument(
        "--scenario",
        default=default_scenario,
        metavar="NAME",
        help=f"fault scenario (default {default_scenario}; list below)",
    )
    parser.add_argument(
        "--profile",
        default=DEFAULT_PROFILE,
        metavar="P",
        help=f"sweep profile the load follows (default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="X",
        help="simulated seconds per wall second (default 1); the monitor then shows rates "
        "and latencies X times the simulated ones",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--clients",
        type=int,
        default=LoadSpec().clients,
        metavar="N",
        help=f"background users sending requests (default {LoadSpec().clients}); 0 leaves the "
        "server idle for your own client, e.g. 'sparktop sweep'",
    )
    parser.add_argument(
        "--llamacpp",
        action="store_true",
        help="also serve a llama.cpp engine ('llama': llama-server's /metrics, /props and "
        "/tokenize) on one host beside the vLLM ones",
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sim",
        help="run the simulated cluster alone (foreground, Ctrl-C to stop)",
        description=DESCRIPTION,
        epilog=EPILOG.format(scenarios=scenario_help()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--write-inventory",
        type=Path,
        required=True,
        metavar="PATH",
        help="where to write the inventory (cluster.yaml) that points at the simulator",
    )
    add_common_arguments(parser, "normal")
    return parser


def options_from(args: argparse.Namespace) -> SimOptions:
    from sparktop.sim.runner import SimOptions  # heavy (the estimator): not for --help

    """Validate the shared options (UserError on a bad value)."""
    if not 1 <= args.nodes <= MAX_NODES:
        raise UserError(f"--nodes must be between 1 and {MAX_NODES}, got {args.nodes}")
    if not 0 <= args.engines <= args.nodes:
        raise UserError(
            f"--engines must be between 0 and --nodes ({args.nodes}), got {args.engines}"
        )
    if not 0 < args.speed <= MAX_SPEED:
        # Faster than this, a simulated second is shorter than a poll: nothing reads right.
        raise UserError(f"--speed must be above 0 and at most {MAX_SPEED:g}, got {args.speed:g}")
    if not 0 <= args.clients <= 1024:
        raise UserError(f"--clients must be between 0 and 1024, got {args.clients}")
    if args.scenario not in SCENARIOS:
        raise UserError(f"unknown scenario '{args.scenario}'; choose from {', '.join(SCENARIOS)}")
    return SimOptions(
        nodes=args.nodes,
        engines=args.engines,
        profile=args.profile,
        scenario=args.scenario,
        speed=args.speed,
        seed=args.seed,
        load=LoadSpec(clients=args.clients),
        llamacpp=args.llamacpp,
    )


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    target: Path = args.write_inventory
    if target.is_dir():
        raise UserError(f"--write-inventory {target} is a directory; give a file name")
    if not target.parent.is_dir():
        raise UserError(f"--write-inventory: directory {target.parent} does not exist")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(options, target))
    return 0


async def _serve(options: SimOptions, target: Path) -> None:
    from sparktop.plan import load_named
    from sparktop.sim.runner import start_sim

    load_named(options.profile)  # a bad name is a UserError before anything starts
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Closing the terminal (SIGHUP) or kill (SIGTERM) stops like Ctrl-C: the key goes too.
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    sim = await start_sim(options)
    try:
        try:
            target.write_text(sim.inventory_yaml())
        except OSError as exc:
            raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
        print(sim.summary().replace(str(sim.inventory_path), str(target), 1))
        print(f"keys and known_hosts: {sim.directory}")
        print("running; Ctrl-C to stop", flush=True)
        await stop.wait()
    finally:
        await sim.close()
        with contextlib.suppress(OSError):
            target.unlink()
        with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
            print("simulator stopped; inventory and keys removed", file=sys.stderr)
