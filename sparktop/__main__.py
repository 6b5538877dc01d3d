"""``python -m sparktop`` and the ``sparktop`` command (``sparktop.__main__:run``).

Ctrl-C handling comes first, before the command line and its modules are imported, so an
interrupt at any moment is a clean exit 130 (see :mod:`sparktop.interrupt`).
"""

from sparktop.interrupt import install_early

install_early()


def run() -> None:
    """The ``sparktop`` console script: run the command line and exit with its status."""
    from sparktop.cli import main

    raise SystemExit(main())


if __name__ == "__main__":
    run()
