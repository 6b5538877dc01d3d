"""Palette files → Textual themes; colours only in themes; the themes ship in the wheel."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from textual.theme import Theme

import sparktop.ui
from sparktop.ui import themes
from tests.conftest import REPO

HEX = re.compile(r"#[0-9a-fA-F]{3,8}\b")


def test_shipped_themes_load_and_set_every_app_variable() -> None:
    loaded = themes.load_themes()
    assert loaded.errors == ()
    by_name = {t.name: t for t in loaded.themes}
    assert set(by_name) == {"sparktop-dark", "sparktop-light", "sparktop-high-contrast"}
    assert by_name["sparktop-dark"].dark and not by_name["sparktop-light"].dark
    for theme in loaded.themes:
        missing = set(themes.APP_VARIABLES) - set(theme.variables)
        assert not missing, (theme.name, missing)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("$primary: #123456;\n$secondary #abc;\n", "bad.tcss:2:1: Expected selector"),
        ("$primary: #12345G;\n", "bad.tcss:1: $primary: not a colour: '#12345G'"),
        ("$primary: #123456;\n$spark-warn: bright-ish;\n", "bad.tcss:2: $spark-warn: not a colour"),
        ("$primary: #123456;\nScreen { color: red; }\n", "only '$name: value;' lines"),
        ("$accent: #123456;\n", "$primary is required"),
        ("$primary: #123456;\n$dark: maybe;\n", "expected true or false"),
        ("$primary: #123456;\n$text-alpha: lots;\n", "expected a number"),
    ],
)
def test_bad_palette_files_name_the_file_line_and_problem(
    tmp_path: Path, text: str, problem: str
) -> None:
    bad = tmp_path / "bad.tcss"
    bad.write_text(text)
    with pytest.raises(themes.ThemeFileError, match=re.escape(problem)):
        themes.load_theme_file(bad)
    result = themes.load_themes(tmp_path)
    assert result.themes == () and len(result.errors) == 1


def test_resolve_accepts_short_names_paths_and_falls_back() -> None:
    class Registry:
        def __init__(self) -> None:
            self.available_themes = {t.name: t for t in themes.load_themes().themes}

        def register_theme(self, theme: Theme) -> None:
            self.available_themes[theme.name] = theme

    reg = Registry()
    assert themes.resolve_theme(reg, "light") == ("sparktop-light", None)
    assert themes.resolve_theme(reg, "sparktop-high-contrast") == ("sparktop-high-contrast", None)
    name, problem = themes.resolve_theme(reg, "neon")
    assert name == "sparktop-dark" and problem and "unknown theme 'neon'" in problem
    dark = themes.themes_dir()
    assert dark is not None
    assert themes.resolve_theme(reg, str(dark / "light.tcss")) == ("sparktop-light", None)


def _layout_css() -> list[tuple[str, str]]:
    """Every piece of layout CSS in the UI package: app.tcss and each DEFAULT_CSS."""
    found = [("app.tcss", (Path(sparktop.ui.__file__).parent / "app.tcss").read_text())]
    for module in pkgutil.walk_packages(sparktop.ui.__path__, "sparktop.ui."):
        mod = importlib.import_module(module.name)
        for name, obj in inspect.getmembers(mod, inspect.isclass):
            css = obj.__dict__.get("DEFAULT_CSS")
            if obj.__module__ == mod.__name__ and isinstance(css, str):
                found.append((f"{mod.__name__}.{name}", css))
    return found


def test_no_hex_colours_in_layout_css() -> None:
    pieces = _layout_css()
    assert len(pieces) > 8
    offenders = [(where, HEX.findall(css)) for where, css in pieces if HEX.search(css)]
    assert offenders == []


def test_themes_ship_inside_the_wheel_and_are_found_there(tmp_path: Path) -> None:
    pytest.importorskip("hatchling")
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)],
        cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = out.glob("sparktop-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    shipped = {p.name for p in (REPO / "themes").glob("*.tcss")}
    assert {f"sparktop/themes/{n}" for n in shipped} <= names
    assert "sparktop/ui/app.tcss" in names
    code = (
        "from sparktop.ui.themes import themes_dir, load_themes\n"
        "r = load_themes()\n"
        "print(themes_dir(), sorted(t.name for t in r.themes), r.errors)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert str(tmp_path / "site" / "sparktop" / "themes") in run.stdout
    assert "'sparktop-high-contrast', 'sparktop-light'" in run.stdout and "()" in run.stdout


def _contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two colours (1 to 21)."""
    from textual.color import Color

    def luminance(text: str) -> float:
        def channel(v: int) -> float:
            c = v / 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = Color.parse(text).rgb
        return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)

    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_high_contrast_header_text_is_readable_on_its_background() -> None:
    """The header draws the profile name in the accent, flags in warn/crit: on the
    high-contrast theme each reads at WCAG AA or better (cyan on white was ≈1.25:1)."""
    (theme,) = [t for t in themes.load_themes().themes if t.name == "sparktop-high-contrast"]
    background = theme.variables["spark-header-background"]
    for name, least in (
        ("spark-header-foreground", 7.0),
        ("spark-accent", 7.0),
        ("spark-warn", 4.5),
        ("spark-crit", 4.5),
    ):
        assert _contrast(theme.variables[name], background) >= least, name
