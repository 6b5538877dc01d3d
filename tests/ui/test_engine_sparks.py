"""The engine block's sparklines are on fixed scales: KV % on 0–100 and decode tok/s from 0
to its maximum, so a steady low KV usage draws low and flat (not min–max swings from empty to
full) and an idle start draws a floor beside "decode 0 tok/s", not a full bar."""

from __future__ import annotations

from sparktop.ui.widgets.engine_panel import EnginePanel
from sparktop.ui.widgets.spark import SparkRow, column_ratios
from tests.ui.fakes import Clock, Scripted, engine
from tests.ui.test_app_pilot import make_app


def test_a_fixed_scale_is_not_stretched_to_the_data() -> None:
    kv = (1.05, 1.12, 1.05, 1.12)
    assert column_ratios(kv, 4) == (0.0, 1.0, 0.0, 1.0)  # min–max: empty to full
    assert all(r < 0.02 for r in column_ratios(kv, 4, (0.0, 100.0)))
    assert column_ratios((0.0, 0.0, 0.0), 3, (0.0, None)) == (0.0, 0.0, 0.0)
    assert column_ratios((50.0, 100.0), 2, (0.0, None)) == (0.5, 1.0)
    assert column_ratios((150.0, -5.0), 2, (0.0, 100.0)) == (1.0, 0.0)  # clamped
    assert column_ratios((40.0,), 2, (0.0, 100.0)) == (0.4, 0.4)  # one value has a level


def _bars(row: SparkRow, label: str) -> str:
    text = row.render_line(0).text
    after = text.split(label, 1)[1].lstrip()
    return after.split(" ", 1)[0]  # the bars end where their caption (scale, span) starts


async def test_steady_low_kv_and_an_idle_start_draw_low() -> None:
    clock = Clock()
    source = Scripted(engine(decode_tps=0.0, kv_usage=0.0105))
    app = make_app(source, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        for i in range(12):
            kv = 0.0105 if i % 2 else 0.0112
            source.next = engine(time_s=clock.now, decode_tps=0.0, kv_usage=kv)
            await app.poll_now()
            clock.advance(1)
        app.tick()
        await pilot.pause()
        row = app.query_one(EnginePanel).blocks["dsv41"].query_one(SparkRow)
        assert set(_bars(row, "KV %")) == {"▁"}
        assert set(_bars(row, "decode tok/s")) == {"▁"}
