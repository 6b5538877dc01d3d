"""MonitorScreen: the main screen, whose updates render only the widgets they change.

A partial screen update in Textual (a refresh of some lines: a changed table row, the
header's age) renders every widget whose *parent's* clip overlaps the changed area, each
over its whole height, then keeps only the changed lines: at 4 nodes the footer, the events
pane, the engine pane and every container were drawn again each second to change five
lines (~0.5 ms of the monitor's ~1.2 ms screen update, ``benchmarks/bench_limit.py``).
:class:`CroppedCompositor` renders only the widgets whose visible part overlaps the
changed area, and only their lines inside it; what reaches the terminal is the same
(the changed lines are drawn from the same strips, see ``tests/ui/test_compositor.py``),
and a full update (a resize, a new screen, a screenshot) renders everything as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual._compositor import Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip


class CroppedCompositor(Compositor):
    """Textual's compositor; ``_get_renders(crop)`` renders each widget's visible lines
    inside ``crop`` only, and no widget that shows nothing there."""

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        if crop is None:
            yield from super()._get_renders(crop)
            return
        intersection = Region.intersection
        for widget, (region, clip) in self.visible_widgets.items():
            visible = intersection(region, clip)
            shown = intersection(visible, crop)
            if not shown:
                continue
            # Every visible column of the crop's lines, as Textual renders them (the
            # chops cut lines by column; the update takes the changed spans from them).
            band = Region(visible.x, shown.y, visible.width, shown.height)
            lines = Region(band.x - region.x, band.y - region.y, band.width, band.height)
            yield region, band, widget.render_lines(lines)


class MonitorScreen(Screen[Any]):
    """A :class:`~textual.screen.Screen` drawn through :class:`CroppedCompositor`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compositor = CroppedCompositor()
