"""The live monitor's output options (``--on-alert``, ``--alert-log``, ``--bell``,
``--record``), kept apart from :mod:`sparktop.alerts.pipeline` so that building the command
line does not load the recorder, the alert rules or asyncio (every subcommand's parser has
the monitor's options)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_alert_arguments(parser: argparse.ArgumentParser) -> None:
    """``--on-alert CMD``, ``--alert-log FILE`` and ``--bell`` for commands that watch live."""
    group = parser.add_argument_group("alerts")
    group.add_argument(
        "--on-alert",
        metavar="CMD",
        help="run CMD for every alert event, the event as JSON on stdin "
        "(split like a shell would, never run through one)",
    )
    group.add_argument(
        "--alert-log", metavar="FILE", type=Path, help="append every alert event as a JSON line"
    )
    group.add_argument("--bell", action="store_true", help="ring the terminal bell on new alerts")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--on-alert``, ``--alert-log``, ``--bell`` and ``--record`` for the live monitor."""
    add_alert_arguments(parser)
    parser.add_argument(
        "--record",
        metavar="FILE",
        type=Path,
        help="record every tick (samples, derived values, alerts) as JSON lines; "
        "FILE.zst or FILE.gz compresses. Replay with 'sparktop replay FILE'. An existing "
        "FILE is kept unless --force; a symbolic link is never written through",
    )
    parser.add_argument(
        "--force", action="store_true", help="let --record replace an existing file"
    )
