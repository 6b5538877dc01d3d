"""Names of the built-in sweep profiles, without loading them (cheap enough for ``--help``)."""

from __future__ import annotations

from pathlib import Path

PROFILE_SUFFIXES = (".yaml", ".yml")
FOLDER = Path(__file__).resolve().parent
"""The built-in profiles' folder: this package's own (package data; a plain path, as
importlib.resources and the zipfile it loads cost ``sparktop budget`` more than its scan)."""


def builtin_profile_names() -> tuple[str, ...]:
    """Names of the profiles shipped as package data (``sparktop/sweep/profiles/*.yaml``),
    sorted."""
    return tuple(
        sorted(
            entry.name.rsplit(".", 1)[0]
            for entry in FOLDER.iterdir()
            if entry.name.endswith(PROFILE_SUFFIXES)
        )
    )
