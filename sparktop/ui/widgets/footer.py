"""KeyFooter: Textual's footer, compact and without the palette hint on narrow terminals, and
showing only the keys that fit whole (the help key always)."""

from __future__ import annotations

from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel

COMPACT_BELOW = 100
"""Under this many columns the footer drops its padding and the ``^p palette`` hint (the
palette still opens), so the first hints (q, ?, b, p: the bindings' order) fit 80 columns."""


class KeyFooter(Footer):
    """The key hints; the apps list their bindings most important first, so where the line
    is too short the last hints are left out whole (Textual cut the last one mid-word: ``+-
    interval t``), and the hint of ``keep`` (the help action, which lists every key) stays."""

    # Compact Textual glues a group's label to the next key ("+- intervalt Theme").
    DEFAULT_CSS = """
    KeyFooter.-compact FooterLabel { margin: 0 1 0 0; }
    KeyFooter.-compact KeyGroup.-compact { padding-left: 0; }
    """

    def __init__(self, keep: str = "help") -> None:
        super().__init__()
        self.keep = keep
        self._hints: list[tuple[tuple[Widget, ...], int]] = []
        """Each hint (a key, or a group of keys and its label) and where it ends, in cells
        from the footer's left edge, with every hint shown."""
        self._fitted_width = -1
        self._tries = 0

    @property
    def fitted(self) -> bool:
        """Whether the hints on show were measured and fitted: False for the frame or two
        after the bindings or the width change (tests wait for it)."""
        shown = tuple(w for hint, _end in self._hints for w in hint)
        return (
            bool(shown)
            and shown == tuple(c for c in self.children if not c.has_class("-command-palette"))
            and self._fitted_width == self.size.width
        )

    def on_resize(self, event: Resize) -> None:
        narrow = event.size.width < COMPACT_BELOW
        if (self.compact, self.show_command_palette) == (narrow, not narrow):
            self._fit()
            return
        self.compact = narrow
        self.show_command_palette = not narrow
        # Neither reactive recomposes Footer: the palette key and the keys laid out for the
        # old width would stay (the last one cut off, a stray cell of the old text after it).
        self.refresh(recompose=True)

    async def recompose(self) -> None:
        self._hints = []
        await super().recompose()
        self._tries = 0
        self.call_after_refresh(self._measure)

    def _measure(self) -> None:
        """Where each hint ends, read from the layout of the freshly composed footer (again
        after the next refresh while its hints are not laid out yet: a loaded machine)."""
        hints: list[list[Widget]] = []
        for child in self.children:
            if child.has_class("-command-palette"):
                continue
            if isinstance(child, FooterLabel) and hints:
                hints[-1].append(child)  # a group's label goes with its keys
            else:
                hints.append([child])
        if any(not w.virtual_region.width for hint in hints for w in hint) and self._tries < 50:
            self._tries += 1
            self.call_after_refresh(self._measure)
            return
        self._hints = [(tuple(hint), max(w.virtual_region.right for w in hint)) for hint in hints]
        self._fit()

    def _fit(self) -> None:
        """Show the hints that end within the footer, the ``keep`` one in any case."""
        if not self._hints:
            return
        self._fitted_width = room = self.size.width
        for palette in self.query_children(".-command-palette"):
            room -= palette.outer_size.width + palette.styles.margin.width
        fits = [end <= room for _hint, end in self._hints]
        kept = [self._keeps(hint) for hint, _end in self._hints]
        if any(k and not f for k, f in zip(kept, fits, strict=True)):
            fits = kept  # not even the help key fits where it stands: it alone, first
        for (hint, _end), show, keep in zip(self._hints, fits, kept, strict=True):
            for widget in hint:
                widget.display = show or keep

    def _keeps(self, hint: tuple[Widget, ...]) -> bool:
        return any(isinstance(w, FooterKey) and w.action == self.keep for w in hint)
