"""Finding and loading sweep profiles: a built-in name, a user-profile name, or a file path.

Built-ins are package data beside these modules (``sparktop/sweep/profiles/*.yaml``, generated
by ``tools/gen_profiles.py``); user profiles are looked up in :func:`user_profile_dir`
(``$SPARKTOP_PROFILE_DIR``, else ``$XDG_CONFIG_HOME/sparktop/profiles``, else
``~/.config/sparktop/profiles``). Files are parsed by :mod:`sparktop.sweep.profiles.profile_file`.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from sparktop.errors import UserError
from sparktop.inputfile import read_limited
from sparktop.sweep.profiles import precomputed
from sparktop.sweep.profiles.builtin import FOLDER as BUILTIN_FOLDER
from sparktop.sweep.profiles.builtin import PROFILE_SUFFIXES, builtin_profile_names
from sparktop.sweep.profiles.profile import Profile

MAX_PROFILE_BYTES = 16 << 20
"""A profile file larger than this is refused (a sweep of thousands of rows is well under 1 MiB;
``--profile /dev/zero`` must not eat memory)."""


def user_profile_dir() -> Path:
    """Where user profiles are looked up by name (the directory need not exist)."""
    explicit = os.environ.get("SPARKTOP_PROFILE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "sparktop" / "profiles"


def user_profile_paths() -> tuple[Path, ...]:
    """Profile files in the user profile directory, sorted by name (empty when none)."""
    folder = user_profile_dir()
    if not folder.is_dir():
        return ()
    return tuple(sorted(p for p in folder.iterdir() if p.suffix in PROFILE_SUFFIXES))


@functools.lru_cache(maxsize=8)
def _load_builtin(name: str) -> Profile:
    text = (BUILTIN_FOLDER / f"{name}.yaml").read_text(encoding="utf-8")
    # Its validated form and fit, precomputed (sparktop.sweep.profiles.precomputed): PyYAML,
    # pydantic and the estimator's leave-one-out fit were most of `sparktop budget`'s CPU.
    try:
        made = (BUILTIN_FOLDER / f"{name}.json").read_text(encoding="utf-8")
    except OSError:
        made = ""
    known = precomputed.load(made, text) if made else None
    if known is not None:
        return known
    return _parse(text, f"built-in:{name}.yaml", "built-in")


def _parse(text: str, where: str, origin: str) -> Profile:
    # Late: the file parser loads PyYAML and the pydantic models, which a built-in profile
    # with its precomputed form never needs (start-up cost of `sparktop budget`).
    from sparktop.sweep.profiles.profile_file import parse_profile

    return parse_profile(text, where, origin)


def load_profile_file(path: Path) -> Profile:
    """Parse and validate one profile file.

    Raises :class:`UserError` (``file:line: problem``) for a missing, unreadable or invalid file.
    """
    try:
        # A FIFO nobody writes to fails after a moment instead of blocking the open forever.
        raw = read_limited(path, MAX_PROFILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"profile file {path} not found") from None
    except IsADirectoryError:
        raise UserError(f"profile {path} is a directory, not a file") from None
    except OSError as exc:
        raise UserError(f"cannot read profile {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_PROFILE_BYTES:
        raise UserError(f"profile {path} is too large (over {MAX_PROFILE_BYTES:,} bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return _parse(text, str(path), str(path))


def _looks_like_path(name_or_path: str) -> bool:
    return (
        os.sep in name_or_path
        or "/" in name_or_path
        or name_or_path.endswith(PROFILE_SUFFIXES)
        or name_or_path.startswith(("~", "."))
    )


def load_profile(name_or_path: str) -> Profile:
    """A profile by built-in name, user-profile name, or file path.

    Lookup order: a path (contains ``/``, starts with ``~``/``.`` or ends in ``.yaml``/``.yml``);
    a built-in name; a name in :func:`user_profile_dir`; an existing file of that name (in the
    working directory). Built-ins are cached.

    Raises :class:`UserError`: ``unknown profile 'x'; built-in: …`` or ``file:line: problem``.
    """
    name = name_or_path.strip()
    if not name:
        raise UserError("empty profile name; built-in: " + ", ".join(builtin_profile_names()))
    if _looks_like_path(name):
        return load_profile_file(Path(name).expanduser())
    if name in builtin_profile_names():
        return _load_builtin(name)
    for path in user_profile_paths():
        if path.stem == name:
            return load_profile_file(path)
    if Path(name).is_file():  # a file in the working directory named without ./ or .yaml
        return load_profile_file(Path(name))
    known = ", ".join(builtin_profile_names())
    users = ", ".join(p.stem for p in user_profile_paths())
    extra = f"; user ({user_profile_dir()}): {users}" if users else ""
    raise UserError(f"unknown profile '{name}'; built-in: {known}{extra}")
