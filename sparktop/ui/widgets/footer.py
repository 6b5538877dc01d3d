"""KeyFooter: Textual's footer, compact and without the palette hint on narrow terminals."""

from __future__ import annotations

from textual.events import Resize
from textual.widgets import Footer

COMPACT_BELOW = 100
"""Under this many columns the footer drops its padding and the ``^p palette`` hint (the
palette still opens), so the first hints (q, ?, b, p: the bindings' order) fit 80 columns."""


class KeyFooter(Footer):
    """The key hints; the apps list their bindings most important first."""

    # Compact Textual glues a group's label to the next key ("+- intervalt Theme").
    DEFAULT_CSS = """
    KeyFooter.-compact FooterLabel { margin: 0 1 0 0; }
    KeyFooter.-compact KeyGroup.-compact { padding-left: 0; }
    """

    def on_resize(self, event: Resize) -> None:
        narrow = event.size.width < COMPACT_BELOW
        if (self.compact, self.show_command_palette) == (narrow, not narrow):
            return
        self.compact = narrow
        self.show_command_palette = not narrow
        # Neither reactive recomposes Footer: the palette key and the keys laid out for the
        # old width would stay (the last one cut off, a stray cell of the old text after it).
        self.refresh(recompose=True)
