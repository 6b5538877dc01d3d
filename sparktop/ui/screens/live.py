"""LiveScreen: a screen pushed over the main one that the app's tick keeps current.

The app hands whatever screen is on top its tick through :meth:`LiveScreen.follow`, so it
never names the detail screens (node, engine, curve): each is imported when first opened,
not at start (with ``DataTable``, the plots and the curve's modules: ~1.4 MB of a
monitor's memory that never opens one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.screen import Screen

if TYPE_CHECKING:
    from sparktop.ui.app_details import DetailNavigation


class LiveScreen(Screen[None]):
    """A detail screen the app's tick refreshes; subclasses say what they show."""

    DRAWS_CURVE: ClassVar[bool] = False
    """True for the curve screen: ``c`` has nothing to open on it."""

    curve_engine: str | None = None
    """The engine ``c`` draws the curve of from this screen (None: the app's choice)."""

    def follow(self, app: DetailNavigation) -> None:
        """Show what ``app`` knows now of this screen's subject (every tick)."""
        raise NotImplementedError
