"""MonitorScreen: the main screen, whose updates render only the widgets they change.

A partial screen update in Textual (a refresh of some lines: a changed table row, the
header's age) renders every widget whose *parent's* clip overlaps the changed area, each
over its whole height, then keeps only the changed lines: at 4 nodes the footer, the events
pane, the engine pane and every container were drawn again each second to change five
lines (~0.5 ms of the monitor's ~1.2 ms screen update, ``benchmarks/bench_limit.py``).
:class:`CroppedCompositor` renders a widget for a partial update only when it shows
something on a changed line that no widget in front of it already covers, and then only its
lines inside the changed area. What reaches the terminal is the same (the changed lines are
cut from the same strips; ``tests/ui/test_compositor.py`` compares every update of a live
run), and a full update (a resize, a new screen, a screenshot) is Textual's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from textual._compositor import Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip


class CroppedCompositor(Compositor):
    """Textual's compositor with a cheaper ``_render_chops`` for partial updates."""

    def _render_chops(
        self, crop: Region, is_rendered_line: Callable[[int], bool]
    ) -> Sequence[Mapping[int, Strip]]:
        if crop == self.size.region:  # a full update or a whole-screen one: Textual's
            return super()._render_chops(crop, is_rendered_line)
        cuts = self.cuts
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(c[:-1]) for c in cuts]
        intersection = Region.intersection
        # Front to back (Textual's order): a line's piece is the first widget's to fill it.
        for widget, (region, clip) in self.visible_widgets.items():
            visible = intersection(region, clip)
            shown = intersection(visible, crop)
            if not shown:
                continue
            first_cut, last_cut = visible.column_span
            wanted = [
                (y, [cut for cut in cuts[y] if last_cut >= cut >= first_cut])
                for y in shown.line_range
                if is_rendered_line(y)
            ]
            if all(chops[y].get(cut) is not None for y, line in wanted for cut in line[:-1]):
                continue  # nothing of it would show: widgets in front cover it
            # Every visible column of the crop's lines, as Textual renders them (the update
            # takes the changed spans from these pieces).
            band = Region(visible.x, shown.y, visible.width, shown.height)
            lines = Region(band.x - region.x, band.y - region.y, band.width, band.height)
            strips = widget.render_lines(lines)
            for y, line in wanted:
                strip = strips[y - band.y]
                chops_line = chops[y]
                pieces = strip.divide([cut - visible.x for cut in line[1:]])
                for cut, piece in zip(line, pieces, strict=False):
                    if chops_line.get(cut) is None:
                        chops_line[cut] = piece
        return chops  # type: ignore[return-value]


class MonitorScreen(Screen[Any]):
    """A :class:`~textual.screen.Screen` drawn through :class:`CroppedCompositor`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = CroppedCompositor()
