"""The engine block keeps its height while its values change length: a block that re-wrapped
(``9 ms`` → ``10 ms``) moved everything below it, and the whole screen was repainted."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from sparktop.model import EngineSample, Quantile
from sparktop.ui.engine_views import engine_lines
from sparktop.ui.packing import Field, pack
from sparktop.ui.views import ViewConfig
from tests.ui.fakes import T0, engine

# Each field's values, of every length it takes in an ordinary run (one to five digits,
# ms to tens of seconds, a window filling from 1 s to 30 s).
VALUES: dict[str, Sequence[object]] = {
    "running": [0.0, 7.0, 8.0],
    "waiting": [0.0, 9.0, 10.0, 120.0, 4321.0],
    "preemptions_per_s": [0.0, 1.5, 12.25],
    "kv_usage": [0.0, 0.05, 0.5, 1.0],
    "kv_free_tokens": [0.0, 950.0, 12_300.0, 5_717_314.0],
    "prefill_tps": [0.0, 9.0, 980.0, 3534.4, 45_000.0],
    "decode_tps": [0.0, 9.0, 99.0, 361.0, 2_500.0],
    "ttft_p50": [Quantile(0.009), Quantile(0.01, "<"), Quantile(0.5), Quantile(8.4), Quantile(24)],
    "ttft_p95": [Quantile(0.09), Quantile(0.95), Quantile(9.9), Quantile(38.4), Quantile(30, ">")],
    "itl_p50": [Quantile(0.009), Quantile(0.021), Quantile(0.25), Quantile(1.5)],
    "queue_time_mean_s": [0.0, 0.009, 0.02, 0.5, 12.34],
    "prefill_time_mean_s": [0.009, 0.95, 1.3, 10.5],
    "mean_prompt_tokens": [9.0, 999.0, 3800.0, 120_000.0],
    "prefix_hit_rate": [0.0, 0.05, 1.0],
    "window_s": [1.0, 9.0, 30.0],
}  # fmt: skip


def ticks(count: int = 60) -> Iterator[EngineSample]:
    """Samples one tick apart, each field stepping through its values at its own pace."""
    for tick in range(count):
        changes = {
            name: values[(tick * (i + 1) + tick // len(values)) % len(values)]
            for i, (name, values) in enumerate(VALUES.items())
        }
        yield engine(time_s=T0 + tick, **changes)


@pytest.mark.parametrize("width", [80, 120, 200])
@pytest.mark.parametrize("max_seqs", [8.0, 256.0])
def test_the_block_keeps_its_height_and_fits_as_values_change_length(
    width: int, max_seqs: float
) -> None:
    heights = set()
    for sample in ticks():
        lines = engine_lines(sample, sample.time_s, ViewConfig(), max_seqs, width)
        heights.add(len(lines))
        assert max(sum(len(text) for text, _ in line) for line in lines) <= width
    assert len(heights) == 1, heights


@pytest.mark.parametrize("width", [80, 120, 200])
def test_the_last_seconds_decode_rate_coming_and_going_keeps_the_height(width: int) -> None:
    # ``now N tok/s (last 3 s)`` shows only while it differs from the window's rate (a burst
    # starting or ending): on the simulator it came and went every few ticks, and each time
    # the block re-wrapped and moved every block below it (bench_render: 25 -> 69 KiB a tick).
    heights, shown = set(), set()
    for tick, now in enumerate([300.0, 0.0, 290.0, 120.0, 310.0, 1000.0, 305.0]):
        sample = engine(time_s=T0 + tick, decode_tps=300.0, decode_tps_now=now, now_window_s=3.0)
        lines = engine_lines(sample, sample.time_s, ViewConfig(), 256.0, width)
        heights.add(len(lines))
        shown.add(any("now " in text for line in lines for text, _ in line))
        assert max(sum(len(text) for text, _ in line) for line in lines) <= width
    assert shown == {True, False}  # it did come and go
    assert len(heights) == 1, heights


def test_a_field_wraps_by_its_room_and_shows_only_its_text() -> None:
    short, long = (
        Field([("ITL ", "dim"), ("9 ms", "")], 8),
        Field([("ITL ", "dim"), ("10 ms", "")], 8),
    )
    head = [("a" * 6, "")]
    # 6 + 2 + (4 + 8) = 20: the room wraps at 19 whatever the value, and nothing is padded
    assert pack([head, short], 19) == [head, [("  ", ""), *short]]
    assert len(pack([head, long], 19)) == 2 and len(pack([head, short], 20)) == 1
    assert pack([head, short], 20) == [[*head, ("  ", ""), *short]]
    # a value longer than its room takes its length: it never overflows the line
    wide = Field([("ITL ", "dim"), ("1234567890 s", "")], 8)
    assert len(pack([head, wide], 20)) == 2


@pytest.mark.parametrize("width", [80, 120, 200])
async def test_on_screen_the_engine_lines_keep_their_height_tick_after_tick(width: int) -> None:
    from sparktop.ui.app import SparktopApp
    from sparktop.ui.widgets.engine_panel import EnginePanel
    from sparktop.ui.widgets.text_block import TextBlock
    from tests.ui.fakes import Clock, Scripted, plan

    clock = Clock()
    source = Scripted(engine())
    app = SparktopApp(
        plan(cluster="test", tp_groups={"dsv41": ["spark-1"]}), [source], clock=clock,
        autostart=False,
    )  # fmt: skip
    async with app.run_test(size=(width, 50)) as pilot:
        await app.poll_now()
        await pilot.pause()  # the engine block mounts, then renders on the next tick
        heights, shown = set(), set()
        for sample in ticks(60):
            clock.advance(1)
            source.next = sample
            await app.poll_now()
            await pilot.pause()
            lines = app.query_one(EnginePanel).blocks["dsv41"].query_one(".engine-lines", TextBlock)
            heights.add(lines.size.height)
            shown.add(str(lines.render()))
        if width == 120:
            app.save_screenshot("engine-block-120.svg", "/tmp/uifix")
    assert len(shown) > 6  # the values did change on screen
    assert len(heights) == 1, heights


@pytest.mark.parametrize("width", [80, 120, 200])
def test_the_expected_strip_keeps_its_height_as_its_figures_change_length(width: int) -> None:
    """Windows of the same shape (two running counts, two prompt sizes, every figure
    compared) whose figures change length (``900 ms`` / ``12.50 s``, ``800`` / ``16,399``):
    the strip (4 columns narrower than the terminal) keeps its height; its shape (one count
    or a range) may change it."""
    import itertools

    from sparktop.sweep.expected.matched import Load, cached_estimator, expected_for
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE
    from sparktop.ui.expected import DeficitClock, expected_lines

    estimator = cached_estimator(load_profile(DEFAULT_PROFILE))  # columns 1, 2, 4, 8
    heights = set()
    for low, high, short, long, ttft, itl, rate in itertools.product(
        (1, 2), (4, 8), (800.0, 1039.0, 4000.0), (9000.0, 16399.0), (0.9, 8.12, 12.5),
        (0.02, 0.009), (62.0, 361.0),
    ):  # fmt: skip
        load = Load(((low, 10.0), (high, 20.0)), ((short, 2.0), (long, 1.0)),
                    ((short, 1.0), (long, 1.0)), 30.0)  # fmt: skip
        got = expected_for(estimator, load, "")
        sample = engine(running=float(high), ttft_p50=Quantile(ttft), itl_mean_s=itl,
                        decode_tps=rate)  # fmt: skip
        lines = expected_lines(sample, "4x-spark-dsv41-flash-1017", lambda _, g=got: g, 25.0,
                               DeficitClock(), 0.0, width - 4)  # fmt: skip
        heights.add(len(lines))
        assert max(sum(len(text) for text, _ in line) for line in lines) <= width - 4
    assert len(heights) == 1, heights
