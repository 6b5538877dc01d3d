"""TextBlock: draws what Static draws, and rebuilds only the lines that changed."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.content import Content
from textual.strip import Strip
from textual.widgets import Static

from sparktop.ui.widgets.text_block import TextBlock


def block(*lines: str) -> list[Content]:
    """Lines with a bold word and a theme-variable span in each, like the engine lines."""
    return [
        Content.assemble((f"{i}:", "bold"), " ", (text, "$primary"), " tail")
        for i, text in enumerate(lines)
    ]


FOUR = block("running 4/8", "prefill 2,634 tok/s", "TTFT p50 3.12 s", "KV 0.3%")


class Pair(App[None]):
    """A TextBlock and a Static with the same content and CSS."""

    CSS = """
    TextBlock, Static { width: 30; height: auto; padding: 0 0 0 2; }
    .cut { text-wrap: nowrap; text-overflow: ellipsis; }
    .centre { text-align: center; }
    """

    def __init__(self, content: Content, classes: str = "") -> None:
        super().__init__()
        self.content = content
        self.classes_ = classes

    def compose(self) -> ComposeResult:
        yield TextBlock(self.content, classes=self.classes_)
        yield Static(self.content, classes=self.classes_)


def cells(strip: Strip) -> list[tuple[str, object]]:
    """One (character, style) per cell; styles compare with their selection offsets."""
    return [(ch, seg.style) for seg in strip for ch in seg.text]


def drawn(widget: TextBlock | Static) -> list[list[tuple[str, object]]]:
    widget._styles_cache.clear()
    return [cells(s) for s in widget.render_lines(widget.size.region)]


LONG = "a line far wider than the thirty columns the widget has"


@pytest.mark.parametrize(
    ("content", "classes"),
    [
        (Content("\n").join(FOUR), ""),  # per-line path
        (Content("\n").join(block("short", LONG, "end")), ""),  # wraps: whole block
        (Content("\n").join(block(LONG)), "cut"),  # cut with an ellipsis
        (Content("\n").join(FOUR), "centre"),
        (Content("first\n\nthird\tafter a tab"), ""),
        (Content(""), ""),
    ],
)
async def test_text_block_draws_what_static_draws(content: Content, classes: str) -> None:
    app = Pair(content, classes)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        ours, theirs = app.query_one(TextBlock), app.query_one(Static)
        assert ours.size == theirs.size
        assert drawn(ours) == drawn(theirs)


class One(App[None]):
    CSS = "TextBlock { width: 40; }"

    def compose(self) -> ComposeResult:
        yield TextBlock(Content("\n").join(FOUR))


def texts(widget: TextBlock) -> list[str]:
    return [s.text.rstrip() for s in widget.render_lines(widget.size.region)]


async def test_only_changed_lines_are_rebuilt_and_repainted() -> None:
    app = One()
    async with app.run_test(size=(44, 8)) as pilot:
        text = app.query_one(TextBlock)
        await pilot.pause()
        assert texts(text)[1] == "1: prefill 2,634 tok/s tail"
        before = [text.render_line(y) for y in range(4)]
        built = text.line_builds

        text.set_lines(block("running 4/8", "prefill 4,334 tok/s", "TTFT p50 3.12 s", "KV 0.3%"))
        await pilot.pause()
        assert text.line_builds == built + 1
        assert texts(text)[1] == "1: prefill 4,334 tok/s tail"
        assert "4,334" in app.export_screenshot()  # what the screen shows, not just the widget
        after = [text.render_line(y) for y in range(4)]
        assert [a is b for a, b in zip(before, after, strict=True)] == [True, False, True, True]

        # Same text, different style: a changed line too (Content's == compares text only).
        restyled = list(text.lines)
        restyled[3] = Content.assemble(("3:", "bold"), " ", ("KV 0.3%", "$error"), " tail")
        text.set_lines(restyled)
        await pilot.pause()
        assert text.line_builds == built + 2

        # The same lines again: nothing rebuilt.
        text.set_lines(list(text.lines))
        await pilot.pause()
        assert text.line_builds == built + 2


async def test_a_new_line_count_lays_out_again() -> None:
    app = One()
    async with app.run_test(size=(44, 8)) as pilot:
        text = app.query_one(TextBlock)
        await pilot.pause()
        assert text.size.height == 4
        text.set_lines(block("a", "b", "c", "d", "e"))
        await pilot.pause()
        assert text.size.height == 5
        assert texts(text)[4] == "4: e tail"


async def test_text_block_follows_theme_changes() -> None:
    app = One()
    async with app.run_test(size=(44, 8)) as pilot:
        text = app.query_one(TextBlock)
        app.theme = "textual-dark"
        await pilot.pause()

        def primary_colour() -> str:
            segment = next(s for s in text.render_line(0) if s.text == "running 4/8")
            assert segment.style is not None and segment.style.color is not None
            assert segment.style.color.triplet is not None
            return segment.style.color.triplet.hex

        assert primary_colour() == app.current_theme.primary.lower()
        app.theme = "textual-light"
        await pilot.pause()
        assert primary_colour() == app.current_theme.primary.lower()


async def test_an_update_draws_what_static_draws_with_shifted_spans() -> None:
    """Kept Rich styles carry their (x, y) selection offsets: a span that moves gets new ones."""
    app = Pair(Content("\n").join(FOUR))
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        ours, theirs = app.query_one(TextBlock), app.query_one(Static)
        shifted = block("running 10/8", "prefill 12,634 tok/s", "TTFT p50 3.12 s", "KV 0.3%")
        ours.set_lines(shifted)
        theirs.update(Content("\n").join(shifted))
        await pilot.pause()
        assert drawn(ours) == drawn(theirs)
