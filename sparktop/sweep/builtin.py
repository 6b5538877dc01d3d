"""Names of the built-in sweep profiles, without loading them (cheap enough for ``--help``)."""

from __future__ import annotations

from importlib import resources

PROFILE_SUFFIXES = (".yaml", ".yml")


def builtin_profile_names() -> tuple[str, ...]:
    """Names of the profiles shipped as package data (``sparktop/sweep/profiles/*.yaml``),
    sorted."""
    folder = resources.files("sparktop.sweep").joinpath("profiles")
    return tuple(
        sorted(
            entry.name.rsplit(".", 1)[0]
            for entry in folder.iterdir()
            if entry.name.endswith(PROFILE_SUFFIXES)
        )
    )
