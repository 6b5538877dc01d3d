"""A histogram family read through its remembered layout reads as bucket by bucket.

``histread.read_hist`` takes a rank's counts as a slice of the page's values when the
buckets' labels are laid out as one series a rank with ascending edges to +Inf; every other
page, and every value that breaks a rule, is read bucket by bucket. Both readings of the same
family must be the same: the same histograms (counts, edges, sum, count) or the same reason
for NA, read once and again (the layout remembered), from the fast reader's shared labels and
from the library's own dicts.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sparktop.sources.engines import histread
from sparktop.sources.engines.reading import WANTED, read_page
from sparktop.sources.exposition.page import parse_page
from tests.test_prom_runs import bench_page

EDGES = (0.1, 0.5, 1.0, 2.5, math.inf)


@contextmanager
def bucket_by_bucket() -> Iterator[None]:
    """Every family read bucket by bucket: no layout is ever used."""
    real = histread._fast_buckets
    histread._fast_buckets = lambda samples: None
    try:
        yield
    finally:
        histread._fast_buckets = real


def both(text: str) -> dict[str, object]:
    """``h`` read from ``text`` both ways (twice through layouts), which must agree."""
    page = parse_page(text, {"h_bucket", "h_sum", "h_count"})
    with bucket_by_bucket():
        slow = histread.read_hist(page, "h", False)
    fast = histread.read_hist(page, "h", False)
    again = histread.read_hist(parse_page(text, {"h_bucket", "h_sum", "h_count"}), "h", False)
    assert repr(fast) == repr(slow) == repr(again)  # repr: NaN sums and -0.0 compare too
    return dict(fast)


def fmt(value: float) -> str:
    return {math.inf: "+Inf", -math.inf: "-Inf"}.get(value, repr(value))


def family(series: list[tuple[str, str, list[tuple[float, float]]]]) -> str:
    """``# TYPE h histogram`` and the buckets of each (engine, reason, [(le, count)])."""
    lines = ["# TYPE h histogram"]
    for engine, reason, buckets in series:
        extra = f',reason="{reason}"' if reason else ""
        for edge, count in buckets:
            lines.append(f'h_bucket{{engine="{engine}"{extra},le="{fmt(edge)}"}} {fmt(count)}')
    for engine in dict.fromkeys(engine for engine, _r, _b in series):
        lines += [f'h_sum{{engine="{engine}"}} 3.5', f'h_count{{engine="{engine}"}} 4']
    return "\n".join(lines) + "\n"


counts = st.one_of(
    st.integers(0, 9).map(float),
    st.sampled_from([-0.0, math.nan, math.inf, -1.0, 1e308]),
)


@st.composite
def histogram_pages(draw: st.DrawFn) -> str:
    series = []
    for engine in draw(st.lists(st.sampled_from("0123"), min_size=1, max_size=4)):
        reason = draw(st.sampled_from(["", "", "stop", "length"]))
        edges = list(EDGES)
        if draw(st.booleans()):  # out of order, repeated, no +Inf, a bad le
            edges = draw(st.lists(st.sampled_from([*EDGES, math.nan]), min_size=1, max_size=6))
        total = 0.0
        buckets = []
        for edge in edges:
            total += draw(st.integers(0, 3))
            buckets.append((edge, total if draw(st.integers(0, 9)) else draw(counts)))
        series.append((engine, reason, buckets))
    shape = "one series a rank"
    if len({e for e, _r, _b in series}) < len(series):
        shape = "several series a rank"
    event(shape)
    return family(series)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histogram_pages())
def test_a_family_reads_the_same_through_its_layout_and_bucket_by_bucket(text: str) -> None:
    both(text)


def test_one_series_a_rank_is_read_through_the_layout() -> None:
    text = family([("0", "", [(e, float(i)) for i, e in enumerate(EDGES)])] * 1)
    text += family([("1", "", [(e, 2.0 * i) for i, e in enumerate(EDGES)])]).split("\n", 1)[1]
    page = parse_page(text, {"h_bucket", "h_sum", "h_count"})
    assert histread._fast_buckets(page.get("h_bucket")) == {
        "0": dict(zip(EDGES, (0.0, 1.0, 2.0, 3.0, 4.0), strict=True)),
        "1": dict(zip(EDGES, (0.0, 2.0, 4.0, 6.0, 8.0), strict=True)),
    }
    assert both(text)["1"] == histread.Hist(EDGES, (0.0, 2.0, 4.0, 6.0, 8.0), 3.5, 4.0)


def test_a_count_that_falls_is_said_as_bucket_by_bucket_says_it() -> None:
    text = family([("0", "", [(0.1, 2.0), (0.5, 1.0), (math.inf, 3.0)])])
    assert str(both(text)["0"]) == "n/a"
    page = parse_page(text, {"h_bucket", "h_sum", "h_count"})
    assert histread._fast_buckets(page.get("h_bucket")) is None


def test_the_benchmark_page_reads_the_same_through_layouts() -> None:
    page = parse_page(bench_page(), WANTED)
    assert histread._fast_buckets(page.get("vllm:time_to_first_token_seconds_bucket"))
    with bucket_by_bucket():
        slow = read_page(page, "vllm")
    assert read_page(page, "vllm") == slow
