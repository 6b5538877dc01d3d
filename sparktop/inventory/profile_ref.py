"""The inventory's ``profile:``: a sweep profile that must exist, checked when the file loads.

A name is a built-in profile or one in the user profile directory
(:func:`sparktop.sweep.profiles.loader.load_profile`); a path (contains ``/``, starts with ``~`` or
``.``, or ends in ``.yaml``/``.yml``) is read relative to the inventory's own directory and
stored absolute, so every later reader finds the same file whatever the working directory.
Only the name or the file's existence is checked here; the plan (:mod:`sparktop.plan`) loads
the profile once and locates a broken one at the inventory's ``profile:`` line.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from sparktop.errors import UserError
from sparktop.sweep.profiles.builtin import PROFILE_SUFFIXES, builtin_profile_names
from sparktop.sweep.profiles.loader import user_profile_paths


def looks_like_path(name: str) -> bool:
    """True when ``name`` is a file path rather than a profile name (same rule as ``--profile``)."""
    return (
        "/" in name
        or os.sep in name
        or name.endswith(PROFILE_SUFFIXES)
        or name.startswith(("~", "."))
    )


def resolve_profile(name: str, base_dir: Path | None) -> str:
    """``name`` as later readers should use it: a path made absolute against ``base_dir``
    (the inventory's directory; None = the working directory), a name unchanged.

    Raises :class:`UserError` with the problem only (the caller adds ``file:line:col:``):
    an unknown name (with the closest built-in or user name and the built-in list), or a
    profile file that is missing.
    """
    if not name.strip():
        raise UserError(
            f"empty; name a profile (built-in: {', '.join(builtin_profile_names())}) or leave "
            "the key out"
        )
    if looks_like_path(name):
        try:
            path = Path(name).expanduser()
        except RuntimeError:  # "~nosuchuser/…"
            raise UserError(f"cannot expand '~' in '{name}'") from None
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.exists():
            raise UserError(f"profile file {name} not found (looked for {path})")
        return str(path)
    builtin = builtin_profile_names()
    users = tuple(p.stem for p in user_profile_paths())
    beside = (base_dir or Path()) / name
    if name not in builtin and name not in users and beside.is_file():
        return str(beside.absolute())  # a file beside the inventory, named bare
    if name not in builtin and name not in users:
        close = difflib.get_close_matches(name, builtin + users, n=1, cutoff=0.5)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        extra = f"; yours: {', '.join(users)}" if users else ""
        raise UserError(
            f"unknown profile '{name}'{hint}; built-in: {', '.join(builtin)}{extra}; "
            "or a profile file path, relative to this inventory"
        )
    return name
