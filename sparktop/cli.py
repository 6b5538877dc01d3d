"""The ``sparktop`` command line: the TUI by default, plus scriptable subcommands.

Each subcommand lives in ``sparktop/commands/<name>.py`` and provides
``add_parser(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
from collections.abc import Sequence

from sparktop import __version__
from sparktop.errors import RuntimeFailure, UserError
from sparktop.interrupt import interruptible
from sparktop.safe_text import printable, printable_warnings

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
        # One line, like every other sparktop error; the usage is one --help away.
        self.exit(2, f"{self.prog}: error: {printable(message)} (see '{self.prog} --help')\n")


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
    from sparktop.commands import (
        budget,
        demo,
        exporter,
        monitor,
        profiles,
        replay,
        sim,
        snapshot,
        sweep,
    )  # fmt: skip

    monitor.add_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    # Order is the order in --help.
    for module in (demo, snapshot, budget, sweep, profiles, replay, sim, exporter):
        sub_parser = module.add_parser(sub)
        sub_parser.set_defaults(_run=module.run)
    parser.set_defaults(_run=monitor.run)
    return parser


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
    parser = build_parser()
    args = parser.parse_args(argv)
    args._argv = list(sys.argv[1:] if argv is None else argv)  # the exact command, for records
    try:
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
    except RuntimeFailure as exc:
        print(f"sparktop: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
