"""The main screen's CroppedCompositor writes to the terminal exactly what Textual's own
compositor writes, while rendering fewer widgets: every partial update of a live run (rows
changing, the header's age, an engine block, an event) is rendered both ways and compared
byte for byte."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual._compositor import ChopsUpdate, Compositor
from textual._styles_cache import StylesCache
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from sparktop.ui.app import SparktopApp
from sparktop.ui.compositor import CroppedCompositor, MonitorScreen
from sparktop.ui.events import EventRecord
from tests.ui.fakes import Clock, Scripted, engine, gpu, node, plan


@dataclass
class Compared:
    updates: int = 0
    widgets_ours: int = 0
    widgets_textual: int = 0
    widget_renders: int = 0
    differences: list[tuple[str, str]] = field(default_factory=list)


class Checking(CroppedCompositor):
    """Renders each partial update through Textual's ``_get_renders`` too and compares."""

    compared: Compared

    def render_partial_update(self) -> ChopsUpdate | None:
        regions = set(self._dirty_regions)
        if regions:
            self._compare(regions)
        return super().render_partial_update()

    def _render(self, regions: set[Region], textual: bool) -> tuple[str, int]:
        crop = Region.from_union(list(regions)).intersection(self.size.region)
        spans = list(self._regions_to_spans(regions))
        rendered = {y for y, _, _ in spans}.__contains__
        before = self.compared.widget_renders
        render_chops = Compositor._render_chops if textual else CroppedCompositor._render_chops
        chops = render_chops(self, crop, rendered)
        ends = [cut_set[1:] for cut_set in self.cuts]
        console = self.compared_console
        segments = ChopsUpdate(chops, spans, ends).render_segments(console)
        return segments, self.compared.widget_renders - before

    def _compare(self, regions: set[Region]) -> None:
        textual, textual_widgets = self._render(regions, textual=True)
        ours, our_widgets = self._render(regions, textual=False)
        self.compared.updates += 1
        self.compared.widgets_textual += textual_widgets
        self.compared.widgets_ours += our_widgets
        if ours != textual:
            self.compared.differences.append((textual, ours))


async def test_partial_updates_match_textuals_and_render_fewer_widgets(monkeypatch) -> None:
    clock = Clock()
    nodes = [Scripted(node(f"spark-{i}")) for i in (1, 2, 3)]
    server = Scripted(engine())
    app = SparktopApp(
        plan(cluster="test", tp_groups={"dsv41": ["spark-1", "spark-2"]}),
        [*nodes, server],
        clock=clock,
        autostart=False,
    )
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.screen
        assert isinstance(screen, MonitorScreen)
        compositor = screen._compositor
        compared = Compared()
        render_widget = StylesCache.render_widget

        def counted(cache: StylesCache, widget: Widget, crop: Region) -> list[Strip]:
            compared.widget_renders += 1
            return render_widget(cache, widget, crop)

        monkeypatch.setattr(StylesCache, "render_widget", counted)
        compositor.__class__ = Checking
        compositor.compared = compared  # type: ignore[attr-defined]
        compositor.compared_console = app.console  # type: ignore[attr-defined]
        await app.poll_now()
        await pilot.pause()
        for second in range(1, 6):
            clock.advance(1)
            for i, source in enumerate(nodes, start=1):
                reading = gpu(uuid=f"GPU-spark-{i}", utilization_pct=90.0 + second + i,
                              power_w=40.0 + second, temperature_c=50.0 + second % 3)  # fmt: skip
                source.next = node(f"spark-{i}", clock.now, gpus=(reading,))
            server.next = engine(time_s=clock.now, running=8.0 + second, decode_tps=300.0 + second)
            if second == 3:
                app.add_event(EventRecord(clock.now, "warning", "spark-2", "a test event"))
            await app.poll_now()
            await pilot.pause()
        # The cursor moving repaints two rows of the table only.
        await pilot.press("down")
        await pilot.pause()
    assert compared.updates >= 5
    assert compared.differences == []
    assert compared.widgets_ours < compared.widgets_textual


async def test_a_full_update_is_textuals() -> None:
    """A screenshot (a full render) draws every widget: the same SVG as Textual's screen."""
    app = SparktopApp(
        plan(cluster="test", tp_groups={"dsv41": ["spark-1"]}),
        [Scripted(node("spark-1")), Scripted(engine())],
        clock=Clock(),
        autostart=False,
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await app.poll_now()
        await pilot.pause()
        ours = app.export_screenshot()
        compositor = app.screen._compositor
        compositor.__class__ = Compositor
        textual = app.export_screenshot()
    assert ours == textual
    assert "spark-1" in ours
