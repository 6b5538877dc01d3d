"""A rich ``Console`` whose every rendered segment is made printable
(:func:`sparktop.safe_text.printable_lines`): the tables of ``snapshot``, ``sweep`` and the
demo's summary. Apart from :mod:`sparktop.safe_text` so that commands printing no rich
table (``budget``, the monitor's command line) do not load rich's console."""

from __future__ import annotations

import errno
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from sparktop.safe_text import printable_lines


def safe_segments(segments: Iterable[Segment]) -> Iterable[Segment]:
    """Rendered segments with their text made printable (rich's own control segments and
    line feeds are kept)."""
    for seg in segments:
        if seg.control or seg.text.isprintable():
            yield seg
        else:
            yield Segment(printable_lines(seg.text), seg.style, seg.control)


class PrintableConsole(Console):
    """A rich ``Console`` that makes every rendered segment printable before it is written:
    styles still reach the terminal, text from nodes and servers cannot act on it."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        return safe_segments(super().render(renderable, options))

    def on_broken_pipe(self) -> None:
        """Let the closed pipe reach the command line (:func:`sparktop.cli.main`), which exits
        141 as ``cat`` does under ``| head``; rich's own handler exits 1, which scripts read
        as "a node or engine did not answer"."""
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")
