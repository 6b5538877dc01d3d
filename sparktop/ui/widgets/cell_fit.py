"""A cell's text fitted to its width in terminal cells: padded, or cut with ``…``."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size

from sparktop.ui.safe_text import printable


def fit(text: str, width: int) -> str:
    """``text`` padded to ``width`` terminal cells, or cut to it with ``…`` as its last cell
    (control characters shown as one-cell symbols first, so they count as what is drawn)."""
    if text.isascii() and text.isprintable():  # one cell per character: no width table
        return text.ljust(width) if len(text) <= width else text[: width - 1] + "…"
    text = printable(text)
    if cell_len(text) <= width:
        return set_cell_size(text, width)
    # A two-cell character that does not fit leaves a blank: the ellipsis goes before it.
    return set_cell_size(set_cell_size(text, width - 1).rstrip(" ") + "…", width)


def fit_words(text: str, width: int) -> str:
    """:func:`fit` for a text spanning several columns (a failed row's message): cut at the
    end of a word, with ``…``, when a word ends in the right half of the room (a cut
    mid-word read as another word: ``first poll not answe``), and before an aside it would
    cut short."""
    shown = text if text.isascii() and text.isprintable() else printable(text)
    if cell_len(shown) <= width or width < 2:
        return fit(shown, width)
    head = set_cell_size(shown, width - 1).rstrip(" ")
    if shown[len(head) : len(head) + 1] != " ":  # the cut falls inside a word
        end = head.rfind(" ")
        if end >= width // 2:
            head = head[:end]
    aside = head.rfind("(")  # an aside cut short says less than none: "(it…"
    if aside > head.rfind(")") and aside >= width // 2:
        head = head[:aside]
    return fit(head.rstrip(" ,;:(-") + "…", width)
