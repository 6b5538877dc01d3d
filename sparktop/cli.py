"""The ``sparktop`` command line: the TUI by default, plus scriptable subcommands.

Each subcommand lives in ``sparktop/commands/<name>.py`` and provides
``add_parser(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sparktop import __version__
from sparktop.commands.exits import exit_status
from sparktop.errors import RuntimeFailure, UserError
from sparktop.interrupt import interruptible
from sparktop.safe_text import printable, printable_warnings

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

EPILOG = """\
examples:
  sparktop demo                              a simulated 4-node cluster, no hardware needed
  sparktop --inventory cluster.yaml          the live monitor for your cluster
  sparktop --endpoint http://127.0.0.1:8000  this machine and one vLLM/SGLang/llama.cpp server
                                             (repeat --endpoint for several; no inventory)
  sparktop                                   this machine (NVML + psutil)
  sparktop snapshot --inventory cluster.yaml --json
  sparktop budget --prompt-tokens 125000 --concurrency 2
  sparktop profiles 2x-spark-dsv4-flash-0731

Run 'sparktop COMMAND --help' for each command's options. Inside the monitor press ? for help.

""" + exit_status(
    [
        (0, "quit with q"),
        (2, "a mistake in the command line or the inventory, or stdout is not a terminal "
            "(see --force-tui)"),
        (130, "quit with Ctrl-C"),
        (141, "the reader of stdout went away (as under | head)"),
    ],
    "the monitor; each command's --help gives its own",
)  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line, like every other sparktop error; the usage is one --help away.
        self.exit(2, f"{self.prog}: error: {printable(message)} (see '{self.prog} --help')\n")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        # argparse swallows a failed write; a closed stdout under `--help | head` must reach
        # main() to exit 141 like every command's output does.
        if message:
            (file or sys.stderr).write(message)


COMMANDS = ("demo", "snapshot", "budget", "sweep", "profiles", "replay", "sim", "exporter")
"""The subcommands in --help order; each is the module ``sparktop.commands.<name>``."""


def wanted_commands(argv: Sequence[str] | None) -> tuple[str, ...]:
    """The subcommands whose parsers ``argv`` needs: every command named in it, or all of
    them when ``-h``/``--help`` comes before the first one (the list in --help). Importing a
    command's module can load much (the simulator, the Prometheus client, report tables):
    ``sparktop budget`` pays for the budget alone, and the monitor (no command named) for
    none. :func:`build_parser` still lists every name, so a misspelt command's "choose
    from" names them all."""
    args = list(sys.argv[1:] if argv is None else argv)
    named = [i for i, a in enumerate(args) if a in COMMANDS]
    first = named[0] if named else len(args)
    if any(a in ("-h", "--help") for a in args[:first]):
        return COMMANDS
    return tuple(c for c in COMMANDS if c in {args[i] for i in named})


def build_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The command line with the monitor's options and the subcommands ``commands`` (all by
    default; :func:`wanted_commands` picks those a command line needs)."""
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

    before = len(parser._actions)
    monitor.add_arguments(parser)
    for action in parser._actions[before:]:
        _store_apart(action)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:  # order is the order in --help
        if name not in commands:
            sub.add_parser(name)  # its name only, for a misspelt command's "choose from"
            continue
        module = importlib.import_module(f"sparktop.commands.{name}")
        sub_parser = module.add_parser(sub)
        sub_parser.set_defaults(_run=module.run)
        _require_after_merge(sub_parser, top={a.dest[len(TOP) :] for a in parser._actions})
    parser.set_defaults(_run=monitor.run)
    return parser


TOP = "_top_"
"""Prefix of the monitor's options' dests on the top-level parser (see :func:`parse_args`)."""


def _store_apart(action: argparse.Action) -> None:
    """Store a top-level option under ``_top_<dest>``: a subcommand's own option of the same
    name writes its default over a value given before the subcommand (``sparktop --theme
    nosuch demo`` ran with the default theme), so the two must not share a dest."""
    if action.metavar is None and action.nargs != 0:
        action.metavar = action.dest.upper()  # what --help showed before
    action.dest = TOP + action.dest


REQUIRED_LATER = "_sparktop_required"
"""Marks a subcommand option whose ``required`` :func:`parse_args` checks after the merge."""


def _require_after_merge(sub_parser: argparse.ArgumentParser, top: set[str]) -> None:
    """A required subcommand option the monitor also has (``snapshot --inventory``) may be
    given before the subcommand: argparse would refuse it as missing, so it is checked after
    :func:`parse_args` has merged the two."""
    for action in sub_parser._actions:
        if action.required and action.option_strings and action.dest in top:
            action.required = False
            setattr(action, REQUIRED_LATER, True)


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; a monitor option given before a subcommand (``sparktop --theme light
    demo``) means what it means after it when the subcommand takes it, and is a usage error
    (exit 2) when the subcommand does not, or takes another value after it."""
    args, extras = parser.parse_known_args(argv)
    command = getattr(args, "command", None)
    chosen = _subparsers(parser).get(command) if command else None
    # Every usage error of a subcommand names it and its --help, an unknown option too.
    usage = chosen if chosen is not None else parser
    if extras:
        usage.error(f"unrecognized arguments: {' '.join(extras)}")
    own = {a.dest: a for a in chosen._actions if a.option_strings} if chosen is not None else {}
    for action in parser._actions:
        if not action.dest.startswith(TOP):
            continue
        dest, flag = action.dest[len(TOP) :], action.option_strings[-1]
        value = getattr(args, action.dest)
        delattr(args, action.dest)
        if chosen is None:
            setattr(args, dest, value)
            continue
        if value == action.default:
            continue
        mine = own.get(dest)
        if mine is None and flag in chosen._option_string_actions:
            usage.error(
                f"{flag} before '{command}' is the monitor's; 'sparktop {command}' takes its "
                f"own {flag} after '{command}'"
            )
        if mine is None:
            usage.error(
                f"{flag} is an option of the monitor: 'sparktop {command}' does not take it"
            )
        after = getattr(args, dest)
        if after != mine.default and after != value:
            usage.error(f"{flag} given twice: {value!r} before '{command}', {after!r} after it")
        setattr(args, dest, value)
    for dest, mine in own.items():
        if getattr(mine, REQUIRED_LATER, False) and getattr(args, dest) is None:
            flags = "/".join(mine.option_strings)
            usage.error(f"the following arguments are required: {flags}")
    return args


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _stdout_reader_gone() -> bool:
    """True when nobody reads our stdout any more (``| head`` has exited): poll reports an
    error on the write end of a pipe without readers. Tells that case apart from a broken
    pipe to a node or an engine, which is a real failure."""
    try:
        poller = select.poll()
        poller.register(sys.__stdout__.fileno() if sys.__stdout__ else 1, select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):  # no poll() here, or stdout is closed
        return True
    return any(mask & (select.POLLERR | select.POLLHUP) for _fd, mask in events)


def _quit_on_closed_stdout() -> int:
    """Exit as ``cat`` does under ``| head``: quietly, status 128 + SIGPIPE (141). Stdout is
    pointed at /dev/null first, or the interpreter's final flush of what is still buffered
    raises again and prints a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
    os.close(devnull)
    return 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see each command's ``--help``; 141 when
    the reader of stdout went away, as under ``| head``)."""
    printable_warnings()
    try:
        parser = build_parser(wanted_commands(argv))
        try:
            args = parse_args(parser, argv)
        except SystemExit:
            sys.stdout.flush()  # --help or --version into a closed pipe fails here
            raise
        args._argv = list(sys.argv[1:] if argv is None else argv)  # the exact command
        with interruptible():
            status = int(args._run(args))
            sys.stdout.flush()  # a closed pipe fails here, inside the handler, not at exit
        return status
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise
        return _quit_on_closed_stdout()
    except UserError as exc:
        print(f"sparktop: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except RuntimeFailure as exc:  # the same prefix as a user error; the status tells them apart
        print(f"sparktop: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
