"""The live monitor's output options (``--on-alert``, ``--alert-log``, ``--bell``,
``--record``), kept apart from :mod:`sparktop.alerts.pipeline` so that building the command
line does not load the recorder and the alert rules (every subcommand's parser has the
monitor's options)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sparktop.alerts.delivery import add_alert_arguments


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
