"""``sparktop exporter``: sparktop's judgements as a Prometheus ``/metrics`` page, headless."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from sparktop import gcpolicy
from sparktop.commands.exits import exit_status
from sparktop.interrupt import EXIT_INTERRUPTED

DESCRIPTION = """\
Poll the inventory's nodes and engines like the monitor does (SSH, HTTP or Prometheus
sources), run the alert rules with their hold times, and serve what sparktop concludes at
http://LISTEN/metrics for Prometheus to scrape: per GPU the loaded baseline and the
throttled / hidden-low-power flags; per engine the expected row with its band, live ÷
expected, the cause of a deficit, free KV tokens, time to pool exhaustion and what bounds the
queue; one sparktop_alert{rule,subject,severity} series per firing alert; and sparktop's own
poll latency and failures per source. The exporters' raw readings are not repeated.

Runs in the foreground until SIGTERM (exit 0) or Ctrl-C (exit 130). --listen defaults to
loopback; anything else must be an address spelled out (an IP, or 0.0.0.0 for every
interface). There is no TLS or authentication: put a reverse proxy in front for that (see
docs/prometheus.md).
"""

EPILOG = """\
examples:
  sparktop exporter --inventory cluster.yaml                      # 127.0.0.1:9464
  sparktop exporter -i cluster.yaml --listen 192.168.10.5:9464    # reachable on the LAN
  curl -s 127.0.0.1:9464/metrics | grep '^sparktop_alert'

""" + exit_status(
    [
        (0, "stopped by SIGTERM"),
        (2, "a mistake in the command line or the inventory, or --listen cannot be bound (an "
            "address that is not an IP, a port in use)"),
        (130, "stopped by Ctrl-C (SIGINT)"),
    ]
)  # fmt: skip


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "exporter",
        help="serve sparktop's judgements as Prometheus metrics (headless)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-i", "--inventory", type=Path, required=True, metavar="FILE",
                        help="cluster inventory (cluster.yaml)")  # fmt: skip
    parser.add_argument("--listen", default="127.0.0.1:9464", metavar="ADDR",
                        help="HOST:PORT to serve /metrics on (default 127.0.0.1:9464)")  # fmt: skip
    parser.add_argument("--interval", type=float, metavar="SECONDS",
                        help="poll period (default: the inventory's interval_s)")  # fmt: skip
    return parser


def run(args: argparse.Namespace) -> int:
    from sparktop.errors import UserError
    from sparktop.exporter.run import Exporter
    from sparktop.exporter.server import MetricsEndpoint
    from sparktop.inventory import load_inventory
    from sparktop.plan import Plan

    if args.interval is not None and not 0.2 <= args.interval <= 60:
        raise UserError(f"--interval must be 0.2–60 s, got {args.interval:g}")
    plan = Plan.from_inventory(load_inventory(args.inventory), interval_s=args.interval)
    endpoint = MetricsEndpoint(args.listen)
    note = "" if endpoint.loopback else " (not loopback: no TLS or auth, see docs/prometheus.md)"

    received: list[int] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def stop_on(sig: int) -> None:
            received.append(sig)
            stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_on, sig)
        # Said once a stop signal is handled, so a supervisor may stop it from then on.
        print(f"sparktop exporter: serving {endpoint.url}{note}", file=sys.stderr, flush=True)
        gcpolicy.tune()  # a long-running process: see sparktop.gcpolicy
        await Exporter(plan, endpoint).run(stop)

    asyncio.run(main())
    # A clean stop either way; the status says why, as the shell would (Ctrl-C 130, like
    # every other command; SIGTERM, a service manager's stop, 0).
    return EXIT_INTERRUPTED if signal.SIGINT in received else 0
