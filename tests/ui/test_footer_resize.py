"""The footer after a terminal resize reads as it does in a monitor started at that size
(compact, no ``^p palette`` hint under 100 columns; padded, with the hint, above)."""

from __future__ import annotations

from textual.pilot import Pilot

from sparktop.ui.app import SparktopApp
from sparktop.ui.widgets.footer import KeyFooter
from tests.ui.test_budget_keys import make_app


def footer_line(app: SparktopApp) -> str:
    """The bottom line of the screen as drawn now."""
    return app.screen._compositor.render_strips()[-1].text


async def drawn_footer(pilot: Pilot[None], app: SparktopApp, want: str | None = None) -> str:
    """The footer once a frame has drawn it fitted to the width (and, with ``want``, once it
    reads so): a loaded machine can take a few idle rounds to reach the frame after a
    resize or a change of bindings."""
    line = ""
    for _ in range(200):
        await pilot.pause()
        footers = app.screen.query(KeyFooter)
        if not footers or not footers.first().fitted:
            continue
        await pilot.pause()  # the frame with the hints fitted
        line = footer_line(app)
        if line.strip() and (want is None or line == want):
            break
    return line


async def started_at(width: int, height: int) -> str:
    app = make_app()
    async with app.run_test(size=(width, height)) as pilot:
        await app.poll_now()
        return await drawn_footer(pilot, app)


async def test_shrinking_and_growing_the_terminal_redraws_the_footer() -> None:
    expected = {size: await started_at(*size) for size in ((160, 45), (80, 24), (60, 20))}
    assert "^p palette" in expected[160, 45] and "palette" not in expected[80, 24]
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await app.poll_now()
        assert await drawn_footer(pilot, app, expected[160, 45]) == expected[160, 45]
        for size in ((80, 24), (60, 20), (160, 45)):
            await pilot.resize_terminal(*size)
            assert await drawn_footer(pilot, app, expected[size]) == expected[size], size


HINTS = ("Details", "Quit", "Help", "Budget", "Pause", "Events", "Filter", "Curve", "interval",
         "Theme", "palette")  # fmt: skip
"""The last word of each footer hint, as the main screen shows them."""


async def test_the_footer_leaves_out_whole_hints_and_always_shows_help() -> None:
    """At 80 columns Textual cut the last hint mid-word ("+- interval t"); the footer now
    ends on a whole hint at every width, the help key among them."""
    for size in ((80, 24), (100, 30), (200, 50), (60, 20), (24, 10), (12, 10)):
        line = await started_at(*size)
        assert "?" in line, size
        words = line.split()
        assert words[-1] in HINTS or words[-2:] == ["?", "Help"] or words == ["?"], (size, line)
        if size[0] >= 80:
            assert line.split()[:6] == ["⏎", "Details", "q", "Quit", "?", "Help"], size
    assert "Theme" in await started_at(200, 50)


async def test_the_detail_screens_footers_leave_out_whole_hints_too() -> None:
    """The node, engine and curve screens had Textual's footer: ``t Th▏^p palette`` at 80."""
    from tests.ui.test_command_line import app_with_cluster

    app = app_with_cluster()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.poll_now()
        for line, last in (("d spark-1", "Theme"), ("d dsv41", "Theme"), ("curve dsv41", "Theme")):
            await pilot.press("colon", *line, "enter")
            footer = await drawn_footer(pilot, app)
            assert "? Help" in footer and footer.split()[-1] == last, (line, footer)
            await pilot.press("escape")
            await pilot.pause()
