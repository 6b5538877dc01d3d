"""The default command: the live TUI on an inventory, or on this machine without one."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparktop.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i",
        "--inventory",
        type=Path,
        metavar="FILE",
        help="cluster inventory (YAML; see README). Without it: this machine only.",
    )


def run(args: argparse.Namespace) -> int:
    raise UserError("the live monitor is not built yet; try 'sparktop snapshot --help'")
