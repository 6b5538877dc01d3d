"""Subcommands of the ``sparktop`` command line, one module each."""
