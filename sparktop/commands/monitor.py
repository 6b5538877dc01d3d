"""The default command: the live TUI on an inventory, or on this machine without one."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sparktop.errors import UserError

if TYPE_CHECKING:
    from sparktop.inventory import EngineConfig, Inventory


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.2 <= value <= 60:
        raise argparse.ArgumentTypeError(f"interval must be 0.2–60 s, got {text}")
    return value


def _endpoint(text: str) -> str:
    from sparktop.inventory.endpoints import endpoint_url

    try:
        return endpoint_url(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_endpoint_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--endpoint URL`` (repeatable), ``--kind`` and ``--api-key-env``: ``what`` (the
    monitor, the snapshot) on this machine and these servers, without an inventory."""
    from sparktop.sources.engines.kinds import KINDS

    parser.add_argument(
        "--endpoint",
        dest="endpoints",
        action="append",
        type=_endpoint,
        metavar="URL",
        help=f"{what} this machine and the inference server at URL (its base URL, as "
        "an inventory's url:), without an inventory; repeat for several servers",
    )
    parser.add_argument(
        "--kind",
        choices=sorted(KINDS),
        metavar="|".join(sorted(KINDS)),
        help="with --endpoint: the servers' kind, read as stated (a page of another kind "
        "says so on its row; default: found out from each one's /metrics page)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="with --endpoint: environment variable holding the servers' bearer token",
    )


def endpoint_engines(
    args: argparse.Namespace, inventory: Inventory | None
) -> tuple[EngineConfig, ...]:
    """The engines ``--endpoint`` names (``--kind``, ``--api-key-env``); :class:`UserError`
    for those options without it, or beside an inventory (whose engines: say it all)."""
    if not args.endpoints:
        for flag, key, value in (
            ("--kind", "kind", args.kind),
            ("--api-key-env", "api_key_env", args.api_key_env),
        ):
            if value is not None:
                raise UserError(f"{flag} applies to --endpoint (an inventory engine has {key}:)")
        return ()
    if inventory is not None:
        raise UserError(
            "--endpoint or --inventory, not both: list the server under the inventory's "
            "engines: (url:, kind:)"
        )
    from sparktop.inventory.endpoints import endpoint_engines as build

    engines = build(args.endpoints, args.kind, args.api_key_env)
    if args.api_key_env and not os.environ.get(args.api_key_env):
        # Said before the screen opens: a server that wants no token would never tell.
        print(
            f"sparktop: warning: --api-key-env {args.api_key_env}: the variable is not set "
            "(or empty); the servers are asked without a bearer token",
            file=sys.stderr,
        )
    return engines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i",
        "--inventory",
        type=Path,
        metavar="FILE",
        help="cluster inventory (YAML; see README). Without it: this machine only, and "
        "the server at http://127.0.0.1:8000 if one answers there",
    )
    add_endpoint_arguments(parser, "monitor")
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help="colour theme: dark (default), light, high-contrast, any Textual theme, or a "
        "path to a .tcss palette file; 't' cycles themes inside the monitor",
    )
    parser.add_argument(
        "--interval",
        type=_interval,
        metavar="SECONDS",
        help="poll period (default: the inventory's interval_s, else 1.0; +/- change it live)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME|FILE",
        help="sweep profile for the expected row and the budget (default: the inventory's "
        "top-level one; an engine's own profile: still serves it)",
    )
    parser.add_argument(
        "--serve-metrics",
        metavar="ADDR",
        help="also serve sparktop's judgements at http://ADDR/metrics for Prometheus "
        "(127.0.0.1:9464; see 'sparktop exporter --help')",
    )
    from sparktop.alerts.options import add_output_arguments
    from sparktop.commands.terminal import add_force_tui

    add_output_arguments(parser)
    add_force_tui(parser)


def _what(args: argparse.Namespace) -> str:
    """The options that say what this run watches, for the command to use instead."""
    if args.endpoints:
        from sparktop.safe_text import without_credentials

        return " ".join(f"--endpoint {without_credentials(e)}" for e in args.endpoints)
    return f"--inventory {args.inventory if args.inventory is not None else 'FILE'}"


def run(args: argparse.Namespace) -> int:
    from sparktop.alerts.pipeline import AlertOutputs
    from sparktop.plan import Plan
    from sparktop.sources.build import LOCAL_ENGINE_URL, local_engine_answers
    from sparktop.ui.app import run_tui
    from sparktop.ui.themes import check_theme

    check_theme(args.theme)  # a bad --theme is exit 2, not a fallback

    inventory = None
    if args.inventory is not None:
        from sparktop.inventory import load_inventory

        inventory = load_inventory(args.inventory)
    engines = endpoint_engines(args, inventory)
    # Without an inventory or --endpoint: this machine, and the server on the usual port if
    # one answers.
    local = inventory is None and not engines and local_engine_answers(LOCAL_ENGINE_URL)
    # A bad --profile or inventory profile is a usage error before the screen opens.
    plan = Plan.from_inventory(
        inventory,
        profile=args.profile,
        interval_s=args.interval,
        local_engine_url=LOCAL_ENGINE_URL if local else None,
        engines=engines,
    )
    from sparktop.commands.terminal import require_terminal

    require_terminal(args, f"sparktop snapshot {_what(args)}")
    metrics = None
    if args.serve_metrics:
        from sparktop.exporter.server import MetricsEndpoint

        # A taken port is exit 2, before the screen.
        metrics = MetricsEndpoint(args.serve_metrics, flag="--serve-metrics")
    outputs = AlertOutputs.from_args(args)
    sources = plan.sources()
    alerts = outputs.wrap(plan.alert_engine(), plan.header)
    try:
        return run_tui(plan, sources, alerts, theme=args.theme, metrics=metrics)
    finally:
        outputs.close()
