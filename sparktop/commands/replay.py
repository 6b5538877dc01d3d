"""``sparktop replay FILE``: a recording in the same monitor, or as a text summary."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from sparktop.commands.exits import exit_status
from sparktop.errors import UserError
from sparktop.safe_text import PrintableWriter
from sparktop.values import counted

DESCRIPTION = """\
Replay a recording made with --record FILE (JSON lines; .zst and .gz are read as such).
The monitor shows the cluster as it was, with the alerts that fired at the time, and a
timeline in the header. Keys: space or p pause/play, left/right -/+10 s, shift+left/right
-/+1 min, n next alert, home start, q quit.

A truncated recording (sparktop killed, disk full) or a damaged one replays up to the
damage; the timeline and --summary say at which line and byte it stopped and why."""

EPILOG = """\
examples:
  sparktop replay run.jsonl.zst                 replay in real time
  sparktop replay run.jsonl.zst --speed 10      ten times faster
  sparktop replay run.jsonl.gz --start 5:00     start five minutes in
  sparktop replay run.jsonl.zst --summary       alerts with their offsets, no UI

""" + exit_status(
    [
        (0, "done (also for a recording cut short: it replays up to the cut)"),
        (2, "not a recording, cannot be read, or a bad option"),
    ]
)

MIN_SPEED = 0.1
MAX_SPEED = 100.0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "replay",
        help="replay a recording in the monitor",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # "--force" (the monitor's, for --record) must not be taken for --force-tui here.
        allow_abbrev=False,
    )
    parser.add_argument("file", type=Path, metavar="FILE", help="recording (.jsonl[.zst|.gz])")
    parser.add_argument(
        "--speed", type=float, default=1.0, metavar="X", help="playback speed (default 1)"
    )
    parser.add_argument(
        "--start", default="0", metavar="OFFSET", help="start at this offset (s, MM:SS or H:MM:SS)"
    )
    parser.add_argument(
        "--summary", action="store_true", help="print the recording's alerts as text, no UI"
    )
    parser.add_argument("--theme", metavar="NAME", help="colour theme of the monitor")
    from sparktop.commands.terminal import add_force_tui

    add_force_tui(parser)
    return parser


def parse_offset(text: str) -> float:
    """``90``, ``1:30`` or ``0:01:30`` → seconds; raises UserError otherwise."""
    try:
        parts = [float(p) for p in text.strip().split(":")]
    except ValueError:
        parts = []
    if not parts or len(parts) > 3 or any(p < 0 for p in parts):
        raise UserError(f"--start: expected seconds, MM:SS or H:MM:SS, got {text!r}")
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + part
    return seconds


def _check_recording_path(path: Path) -> None:
    """A recording is a regular file (read twice: indexed, then decoded); say what it is not."""
    import stat

    from sparktop.sweep.tokens.tokens import file_kind

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise UserError(f"no such recording: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise UserError(
            f"{path} is a {file_kind(mode)}, not a recording (a file made with --record)"
        )


def run(args: argparse.Namespace) -> int:
    from sparktop.record.reader import Recording
    from sparktop.record.replay import ReplaySource

    if not MIN_SPEED <= args.speed <= MAX_SPEED:
        raise UserError(f"--speed: between {MIN_SPEED:g} and {MAX_SPEED:g}, got {args.speed:g}")
    start = parse_offset(args.start)
    if not args.summary:
        from sparktop.ui.themes import check_theme

        check_theme(args.theme)
    _check_recording_path(args.file)
    source = ReplaySource(Recording(args.file))
    # Where the monitor would stop the summary stops too; neither starts on no decodable tick.
    source.decode_ticks(None if args.summary else 1)
    if len(source) == 0:
        stop = f" ({source.stop})" if source.stop else ""
        raise UserError(f"{args.file}: the recording holds no ticks{stop}")
    if args.summary:
        print_summary(source, PrintableWriter(sys.stdout))
        return 0
    from sparktop.commands.terminal import require_terminal
    from sparktop.ui.replay import run_replay_tui

    require_terminal(args, f"sparktop replay {args.file} --summary")

    return run_replay_tui(source, speed=args.speed, start_s=start, theme=args.theme)


def print_summary(source: Any, out: TextIO | PrintableWriter) -> None:
    """Header facts, duration, every alert event with its offset, and where reading stopped."""
    from sparktop.plan import THIS_MACHINE
    from sparktop.record.replay import clock_text
    from sparktop.record.tick import header_layout

    rec = source.recording
    header = rec.header
    profile = header.get("profile") or {}
    # Without an inventory (``--endpoint``, or none at all) the live header said this machine.
    cluster = header_layout(header)[0] or (
        "?" if isinstance(header.get("inventory"), dict) else THIS_MACHINE
    )
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(source.start_s))
    out.write(f"recording {rec.path}  (sparktop {header.get('sparktop_version', '?')})\n")
    out.write(
        f"cluster {cluster}  profile {profile.get('name', 'none')}  "
        f"{counted(len(source), 'tick')} from {started} for {clock_text(source.duration_s)}\n"
    )
    events = source.events_until(len(source) - 1, limit=10_000)
    out.write(f"{counted(len(events), 'alert event')}\n")
    for event in events:
        offset = clock_text(event.time_s - source.start_s)
        out.write(
            f"  +{offset}  {event.kind.value:<9} {event.severity.value:<8} "
            f"{event.alert.rule:<22} {event.subject}  {event.message}\n"
        )
    if source.stop is not None:
        out.write(f"replays up to the damage: {source.stop}\n")
