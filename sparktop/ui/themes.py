"""Load ``themes/*.tcss`` palette files into Textual ``Theme`` objects.

A palette file holds only variable declarations, tokenised with Textual's own CSS tokenizer::

    $primary: #5fafff;        /* Theme fields: primary, secondary, accent, warning, error,  */
    $dark: true;              /* success, foreground, background, surface, panel, boost,    */
    $spark-warn: #e5c07b;     /* dark, luminosity-spread, text-alpha; the rest → variables  */

The theme is named ``sparktop-<file stem>``. Shipped files live in the installed package
(``sparktop/themes``, force-included in the wheel) or, for an editable install, in the repo's
``themes/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from textual.color import Color, ColorParseError
from textual.css.tokenize import tokenize
from textual.css.tokenizer import TokenError
from textual.theme import Theme

THEME_PREFIX = "sparktop-"
DEFAULT_THEME = "sparktop-dark"

_COLOR_FIELDS = (
    "primary", "secondary", "warning", "error", "success", "accent",
    "foreground", "background", "surface", "panel", "boost",
)  # fmt: skip
_FLOAT_FIELDS = ("luminosity-spread", "text-alpha")

APP_VARIABLES = (
    "spark-ok",
    "spark-warn",
    "spark-crit",
    "spark-dim",
    "spark-stale",
    "spark-accent",
    "spark-bar",
    "spark-bar-empty",
    "spark-header-background",
    "spark-header-foreground",
)
"""Variables sparktop's CSS and cell styles use; every theme may set them (defaults exist)."""


class ThemeFileError(ValueError):
    """A palette file that cannot be read, tokenised or turned into a theme."""


@dataclass(frozen=True, slots=True)
class LoadResult:
    themes: tuple[Theme, ...]
    errors: tuple[str, ...]


def themes_dir() -> Path | None:
    """The shipped palette folder: inside the installed package, else the repo's ``themes/``."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "themes", package.parent / "themes"):
        if candidate.is_dir():
            return candidate
    return None


def theme_name_for(path: Path) -> str:
    return THEME_PREFIX + path.stem


def _declarations(text: str, path: Path) -> dict[str, tuple[str, int]]:
    """``{name: (value, line)}`` from a palette file (Textual tokenizer; comments dropped)."""
    found: dict[str, tuple[str, int]] = {}
    name: str | None = None
    parts: list[str] = []
    line = 0
    try:
        for token in tokenize(text, (str(path), "")):
            if token.name == "variable_name":
                name, parts, line = token.value[1:-1].strip(), [], token.location[0] + 1
            elif token.name == "variable_value_end":
                if name is not None:
                    found[name] = (" ".join("".join(parts).split()), line)
                name = None
            elif name is not None and token.name != "comment_start":
                parts.append(token.value)
            elif name is None and token.name not in ("whitespace",):
                raise ThemeFileError(
                    f"{path.name}:{token.location[0] + 1}: only '$name: value;' lines are allowed"
                )
    except TokenError as exc:
        where = f"{path.name}:{exc.start[0]}:{exc.start[1]}"
        raise ThemeFileError(f"{where}: {str(exc).split('.;')[0].strip()}") from None
    if name is not None:
        raise ThemeFileError(f"{path.name}:{line}: missing ';' after ${name}")
    return found


def parse_theme(text: str, path: Path) -> Theme:
    """A ``Theme`` from palette text; raises :class:`ThemeFileError` naming file and line."""
    decl = _declarations(text, path)
    if "primary" not in decl:
        raise ThemeFileError(f"{path.name}: $primary is required")
    fields: dict[str, object] = {}
    variables: dict[str, str] = {}
    for key, (value, line) in decl.items():
        where = f"{path.name}:{line}: ${key}"
        if key in _COLOR_FIELDS or key.startswith("spark-"):
            _check_color(value, where)
        if key in _COLOR_FIELDS:
            fields[key] = value
        elif key == "dark":
            if value not in ("true", "false"):
                raise ThemeFileError(f"{where}: expected true or false, got {value!r}")
            fields["dark"] = value == "true"
        elif key in _FLOAT_FIELDS:
            try:
                fields[key.replace("-", "_")] = float(value)
            except ValueError:
                raise ThemeFileError(f"{where}: expected a number, got {value!r}") from None
        else:
            variables[key] = value
    return Theme(name=theme_name_for(path), variables=variables, **fields)  # type: ignore[arg-type]


def _check_color(value: str, where: str) -> None:
    """A colour, optionally followed by an alpha percentage (``#4EBF71 80%``)."""
    words = value.split()
    if words and words[0].startswith("$"):
        return
    alpha_ok = len(words) == 1 or (len(words) == 2 and re.fullmatch(r"\d+(\.\d+)?%", words[1]))
    try:
        Color.parse(words[0] if words else "")
    except ColorParseError:
        alpha_ok = False
    if not alpha_ok:
        raise ThemeFileError(f"{where}: not a colour: {value!r}")


def load_theme_file(path: Path) -> Theme:
    """Read and parse one palette file; errors are :class:`ThemeFileError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeFileError(f"{path}: {exc}") from None
    return parse_theme(text, path)


def load_themes(folder: Path | None = None) -> LoadResult:
    """Every ``*.tcss`` in ``folder`` (default: the shipped themes), with per-file errors."""
    folder = folder or themes_dir()
    themes: list[Theme] = []
    errors: list[str] = []
    if folder is None:
        return LoadResult((), ("no themes folder found",))
    for path in sorted(folder.glob("*.tcss")):
        try:
            themes.append(load_theme_file(path))
        except ThemeFileError as exc:
            errors.append(str(exc))
    return LoadResult(tuple(themes), tuple(errors))


def variable_defaults(colors: dict[str, str]) -> dict[str, str]:
    """Fallbacks for the app variables, from a theme's generated colour system.

    Used for themes that do not set them (Textual's built-ins, user palettes).
    """
    return {
        "spark-ok": colors.get("success", "green"),
        "spark-warn": colors.get("warning", "yellow"),
        "spark-crit": colors.get("error", "red"),
        "spark-dim": colors.get("foreground-muted", colors.get("foreground", "grey")),
        "spark-stale": colors.get("foreground-disabled", colors.get("foreground", "grey")),
        "spark-accent": colors.get("accent", colors.get("primary", "blue")),
        "spark-bar": colors.get("primary", "blue"),
        "spark-bar-empty": colors.get("panel", colors.get("surface", "grey")),
        "spark-header-background": colors.get("panel", colors.get("surface", "black")),
        "spark-header-foreground": colors.get("foreground", "white"),
    }


class _ThemeRegistry(Protocol):
    @property
    def available_themes(self) -> dict[str, Theme]: ...

    def register_theme(self, theme: Theme) -> None: ...


def resolve_theme(app: _ThemeRegistry, wanted: str) -> tuple[str, str | None]:
    """The theme name to use for ``wanted`` (a theme name, a short name like ``light``, or a
    path to a ``.tcss`` palette), and a problem to notify when falling back to the default.
    """
    available = app.available_themes
    fallback = DEFAULT_THEME if DEFAULT_THEME in available else "textual-dark"
    for name in (wanted, THEME_PREFIX + wanted):
        if name in available:
            return name, None
    path = Path(wanted).expanduser()
    if wanted.endswith(".tcss") or path.is_file():
        try:
            theme = load_theme_file(path)
        except ThemeFileError as exc:
            return fallback, f"theme {wanted!r} not usable ({exc}); using {fallback}"
        app.register_theme(theme)
        return theme.name, None
    known = ", ".join(sorted(available))
    return fallback, f"unknown theme {wanted!r}; using {fallback} (known: {known})"


def check_theme(wanted: str | None) -> None:
    """Refuse a ``--theme`` the monitor could not use, before anything starts: an unknown
    name, or a ``.tcss`` path that is missing, unreadable, not UTF-8 or not a palette.

    Raises :class:`~sparktop.errors.UserError` (exit 2, one line) like every bad option.
    """
    from textual.theme import BUILTIN_THEMES

    from sparktop.errors import UserError

    if wanted is None:
        return
    shipped = {t.name for t in load_themes().themes}
    known = shipped | set(BUILTIN_THEMES)
    if wanted in known or THEME_PREFIX + wanted in known:
        return
    path = Path(wanted).expanduser()
    if wanted.endswith(".tcss") or path.exists():
        try:
            load_theme_file(path)
        except ThemeFileError as exc:
            raise UserError(f"--theme {wanted}: not a usable theme file ({exc})") from None
        return
    names = sorted(n.removeprefix(THEME_PREFIX) for n in shipped)
    raise UserError(
        f"--theme: unknown theme {wanted!r} (sparktop's: {', '.join(names)}; any Textual "
        "theme name; or a path to a .tcss palette file)"
    )
