"""Formatting a new user tripped on (issue 20, item 17): an unavailable rate reads ``n/a``,
not ``n/a/s``, and a deviation that rounds to zero has no minus sign."""

from __future__ import annotations

from sparktop.model import NA
from sparktop.ui import format as fmt
from sparktop.ui.engine_views import engine_lines
from sparktop.ui.views import ViewConfig
from tests.ui.fakes import T0, engine


def _text(lines: list[list[tuple[str, str]]]) -> str:
    return "\n".join("".join(text for text, _ in line) for line in lines)


def test_an_unavailable_preemption_rate_has_no_unit() -> None:
    missing = engine(preemptions_per_s=NA("not exported"))
    text = _text(engine_lines(missing, T0, ViewConfig(), 8.0))
    assert "preempt n/a " in text and "n/a/s" not in text
    assert "preempt 0.00/s" in _text(engine_lines(engine(), T0, ViewConfig(), 8.0))


def test_a_deviation_that_rounds_to_zero_is_unsigned() -> None:
    assert [fmt.signed_pct(v) for v in (-0.4, -0.0, 0.4, -0.6, 12.0)] == [
        "+0%", "+0%", "+0%", "-1%", "+12%",
    ]  # fmt: skip


def test_latency_quantiles_side_by_side_have_one_precision() -> None:
    from sparktop.model import Quantile

    assert (str(Quantile(24.0)), str(Quantile(38.4))) == ("24.00 s", "38.40 s")
    assert str(Quantile(30.0, ">")) == "> 30 s"  # a bucket edge stays exact
    assert str(Quantile(0.021)) == "21 ms"
