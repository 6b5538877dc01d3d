"""``python -m sparktop``, and ``run``, which the ``sparktop`` command (scripts/sparktop) calls.

Ctrl-C handling comes first, before the command line and its modules are imported, so an
interrupt at any moment is a clean exit 130 (see :mod:`sparktop.interrupt`). The first
statements install a bridge handler through the built-in ``_signal`` (already loaded when
the interpreter starts), because importing :mod:`sparktop.interrupt` imports ``signal`` and
``enum`` (several milliseconds, in which Ctrl-C would still print a traceback).
"""

import _signal
import os

_signal.signal(_signal.SIGINT, lambda signum, frame: os._exit(130))

from sparktop.interrupt import install_early  # noqa: E402

install_early()


def run() -> None:
    """The ``sparktop`` command: run the command line and exit with its status."""
    from sparktop.cli import main

    raise SystemExit(main())


if __name__ == "__main__":
    run()
