"""The ``sparktop`` command line: the TUI by default, plus scriptable subcommands.

Each subcommand lives in ``sparktop/commands/<name>.py`` and provides
``add_parser(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from sparktop import __version__
from sparktop.errors import RuntimeFailure, UserError

# Order is the order in --help.
SUBCOMMANDS = ("demo", "snapshot", "budget", "profiles", "replay", "sim")

EPILOG = """\
examples:
  sparktop demo                              a simulated 4-node cluster, no hardware needed
  sparktop --inventory cluster.yaml          the live monitor for your cluster
  sparktop                                   this machine (NVML + psutil)
  sparktop snapshot --inventory cluster.yaml --json
  sparktop budget --prompt-tokens 125000 --concurrency 2
  sparktop profiles 2x-spark-dsv4-flash-0731

Run 'sparktop COMMAND --help' for each command's options. Inside the monitor press ? for help.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="sparktop",
        description=(
            "Live monitor for vLLM on DGX Spark clusters: throttling, KV-cache pool, and what "
            "a context will cost before you send it."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sparktop {__version__}")
    from sparktop.commands import monitor

    monitor.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"sparktop.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"sparktop.commands.{name}":
                continue  # command not built yet
            raise
        sub_parser = module.add_parser(sub)
        sub_parser.set_defaults(_run=module.run)
    parser.set_defaults(_run=monitor.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args))
    except UserError as exc:
        print(f"sparktop: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RuntimeFailure as exc:
        print(f"sparktop: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
