"""Where the live window sits on the profile's curve: one :class:`OperatingPoint` per figure.

Built from the same comparisons as the expected strip and ``snapshot``
(:func:`~sparktop.alerts.comparisons.comparisons`), so the point drawn on the curve is the
figure the strip prints: x the window's mean prompt (for TTFT, of the requests whose first
token came in the window), the concurrency its time-weighted running count, the expected
value the window-matched row's and the live value the statistic defined like the column.
"""

from __future__ import annotations

from sparktop.alerts.comparisons import comparisons
from sparktop.model import NA, EngineSample, is_num
from sparktop.sweep.expected.curve import OperatingPoint
from sparktop.sweep.expected.matched import WindowExpected


def _wmean(pairs: tuple[tuple[float, float], ...], default: float) -> float:
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total > 0 else default


def operating_points(got: WindowExpected, sample: EngineSample) -> dict[str, OperatingPoint]:
    """The window's point for each compared column (``ttft_s``, ``decode_tps``,
    ``aggregate_tps``): prompt tokens, running count, expected figure with its band, live
    figure (None with the reason when there is none)."""
    load = got.load
    points: dict[str, OperatingPoint] = {}
    for comp in comparisons(got, sample):
        prompt = load.mean_prompt
        if comp.column == "ttft_s":
            prompt = _wmean(load.ttft_prompts, prompt)
        live = comp.live
        interval = comp.live_interval if comp.coarse else None
        points[comp.column] = OperatingPoint(
            metric=comp.column,
            prompt_tokens=prompt,
            concurrency=load.mean_running,
            expected=comp.estimated,
            live=float(live) if is_num(live) else None,
            live_label=comp.live_label,
            missing=live.reason if isinstance(live, NA) else "",
            compared=comp.comparable,
            note=comp.why_not or comp.note,
            live_low=interval[0] if interval is not None else None,
            live_high=interval[1] if interval is not None else None,
            live_text=comp.live_text(),
        )
    return points
