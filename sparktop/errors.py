"""Errors meant for the user: printed as one clear message, never as a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input (bad flag value, inventory, profile, path). Exit code 2."""

    exit_code = 2


class RuntimeFailure(Exception):
    """Something outside the user's input failed (network, server). Exit code 1."""

    exit_code = 1
