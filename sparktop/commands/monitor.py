"""The default command: the live TUI on an inventory, or on this machine without one."""

from __future__ import annotations

import argparse
from pathlib import Path


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0.2 <= value <= 60:
        raise argparse.ArgumentTypeError(f"interval must be 0.2–60 s, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i",
        "--inventory",
        type=Path,
        metavar="FILE",
        help="cluster inventory (YAML; see README). Without it: this machine only.",
    )
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
        help="sweep profile for the expected row and the budget (default: the inventory's)",
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
    # Without an inventory: this machine, and the server on the usual port if one answers.
    local = inventory is None and local_engine_answers(LOCAL_ENGINE_URL)
    # A bad --profile or inventory profile is a usage error before the screen opens.
    plan = Plan.from_inventory(
        inventory,
        profile=args.profile,
        interval_s=args.interval,
        local_engine_url=LOCAL_ENGINE_URL if local else None,
    )
    from sparktop.commands.terminal import require_terminal

    inventory_arg = args.inventory if args.inventory is not None else "FILE"
    require_terminal(args, f"sparktop snapshot --inventory {inventory_arg}")
    metrics = None
    if args.serve_metrics:
        from sparktop.exporter.server import MetricsEndpoint

        metrics = MetricsEndpoint(args.serve_metrics)  # a taken port is exit 2, before the screen
    outputs = AlertOutputs.from_args(args)
    sources = plan.sources()
    alerts = outputs.wrap(plan.alert_engine(), plan.header)
    try:
        return run_tui(plan, sources, alerts, theme=args.theme, metrics=metrics)
    finally:
        outputs.close()
