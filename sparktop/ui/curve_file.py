"""``--plot FILE``: the profile's curves written as an SVG for reports (``snapshot``, ``budget``).

The same drawing as the monitor's curve screen (:func:`~sparktop.ui.curve_plot.draw_curve`,
plotext through textual-plotext), rendered to text and exported as SVG by Rich's recording
console, so a report shows what the terminal shows. Colours are the default theme's
(``themes/dark.tcss``); with ``NO_COLOR`` set the file is drawn without colour. Only SVG is
written: plotext cannot draw an image and a rasteriser would be a heavy dependency for one
option (``rsvg-convert -o plot.png plot.svg`` makes a PNG).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text
from textual.color import Color
from textual_plotext import Plot

from sparktop.alerts.curve_point import operating_points
from sparktop.errors import UserError
from sparktop.model import EngineSample
from sparktop.outfile import create_file
from sparktop.safe_text import printable
from sparktop.sweep.expected.curve import OperatingPoint, ProfileCurve, profile_curve
from sparktop.sweep.expected.matched import MatchedExpected, WindowExpected, cached_estimator
from sparktop.sweep.profiles.profile import Profile
from sparktop.ui import themes
from sparktop.ui.curve_plot import TYPED_MARKER, CurveColours, curve_caption, draw_curve
from sparktop.ui.widgets.curve import theme_colours

PLOT_SIZE = (100, 26)
"""Columns × rows of each plot in a file: wide enough for a tick per doubling of the prompt."""


@dataclass(frozen=True, slots=True)
class Panel:
    """One plot of a file: a heading, the curve and the points on it."""

    heading: str
    curve: ProfileCurve
    live: OperatingPoint | None = None
    typed: OperatingPoint | None = None
    note: str = ""
    """Said under the plot (why there is no live point, say)."""


def check_plot_path(path: Path) -> Path:
    """``path`` if it names an SVG file; UserError (exit 2) before any work otherwise."""
    if path.suffix.lower() != ".svg":
        raise UserError(
            f"--plot: {path}: only SVG is written (name it .svg; "
            "rsvg-convert -o plot.png plot.svg makes a PNG)"
        )
    return path


def file_colours() -> CurveColours | None:
    """The default theme's colours, or None under ``NO_COLOR``."""
    if os.environ.get("NO_COLOR") is not None:
        return None
    loaded = {t.name: t for t in themes.load_themes().themes}
    theme = loaded.get(themes.DEFAULT_THEME)
    if theme is None:
        return theme_colours({}, Color.parse("#1d2129"))
    variables = {
        **theme.variables,
        **{k: v for k in ("foreground", "accent", "secondary", "primary", "warning")
           if isinstance(v := getattr(theme, k, None), str)},
    }  # fmt: skip
    return theme_colours(variables, Color.parse(theme.surface or "#1d2129"))


def render_svg(panels: Sequence[Panel], title: str) -> str:
    """The panels one under another, each with its caption, as one SVG document."""
    width, height = PLOT_SIZE
    colours = file_colours()
    console = Console(
        record=True, width=width, force_terminal=True, color_system="truecolor",
        highlight=False, file=open(os.devnull, "w"),  # noqa: SIM115 - closed with the console
    )  # fmt: skip
    try:
        for panel in panels:
            plot = Plot()
            draw_curve(
                plot, panel.curve, live=panel.live, typed=panel.typed, colours=colours,
                size=(width, height),
            )  # fmt: skip
            console.print(Text(printable(panel.heading), style="bold"))
            console.print(Text.from_ansi(plot.build()))
            for line in curve_caption(panel.curve, panel.live, typed=panel.typed is not None):
                console.print(Text(printable(line)))
            if panel.note:
                console.print(Text(printable(panel.note)))
            console.print()
        return console.export_svg(title=printable(title))
    finally:
        console.file.close()


def write_plot(path: Path, panels: Sequence[Panel], title: str) -> None:
    """Write ``panels`` to ``path`` (an existing file is replaced; a symbolic link refused)."""
    svg = render_svg(panels, title)
    with create_file(check_plot_path(path), "--plot", force=True) as out:
        out.write(svg.encode())


FILE_METRICS = ("ttft_s", "aggregate_tps")
"""The figures a file draws: the seeds' two curves (TTFT, and throughput collapsing)."""


def budget_panels(profile: Profile, prompt_tokens: int, concurrency: int) -> list[Panel]:
    """TTFT and aggregate curves with ``concurrency`` × ``prompt_tokens`` marked ▲."""
    estimator = cached_estimator(profile)
    est = estimator(float(prompt_tokens), concurrency)
    panels = []
    for metric in FILE_METRICS:
        curve = profile_curve(profile, metric, estimator=estimator, include=(prompt_tokens,))
        typed = OperatingPoint(
            metric, float(prompt_tokens), float(concurrency), getattr(est, metric)
        )
        fig = typed.expected
        where = f"{TYPED_MARKER} {prompt_tokens:,} tok × {concurrency}: " + (
            f"{curve.label} {fig.value:,.4g} {curve.unit} ({fig.basis})"
            if isinstance(fig.value, int | float)
            else f"no data ({fig.reason})"
        )
        panels.append(Panel(f"{curve.label} · profile {profile.name}", curve, typed=typed,
                            note=where))  # fmt: skip
    return panels


def snapshot_panels(
    profile: Profile,
    row: MatchedExpected | None,
    engines: Sequence[EngineSample],
    own: Mapping[str, MatchedExpected] | None = None,
) -> list[Panel]:
    """Per engine that answered, its live window on the TTFT and aggregate curves of its
    profile (``own``: engine → its own profile's row; else ``profile``'s, ``row``); the bare
    curves of ``profile`` (with the reason) when none did."""
    own = own or {}
    estimator = row.estimator if row is not None else cached_estimator(profile)
    panels: list[Panel] = []
    for sample in engines:
        mine = own.get(sample.engine)
        engine_row = mine if mine is not None else row
        drawn = mine.profile if mine is not None else profile
        fitted = mine.estimator if mine is not None else estimator
        if not sample.ok:
            got: WindowExpected | str = "the engine did not answer"
        else:
            got = engine_row(sample) if engine_row is not None else "no sweep profile"
        points = operating_points(got, sample) if not isinstance(got, str) else {}
        for metric in FILE_METRICS:
            live = points.get(metric)
            include = (live.prompt_tokens,) if live is not None else ()
            curve = profile_curve(drawn, metric, estimator=fitted, include=include)
            note = f"live window: {got}" if isinstance(got, str) else ""
            heading = f"engine {sample.engine} ({sample.model}) · {curve.label} · {drawn.name}"
            panels.append(Panel(heading, curve, live=live, note=note))
    if not panels:
        for metric in FILE_METRICS:
            curve = profile_curve(profile, metric, estimator=estimator)
            panels.append(Panel(f"{curve.label} · profile {profile.name}", curve,
                                note="no engine in the inventory answered"))  # fmt: skip
    return panels
