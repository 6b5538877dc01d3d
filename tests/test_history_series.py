"""Bounded series: the newest-N view used by sparklines and rules."""

from __future__ import annotations

from sparktop.history import History, Series


def test_values_last_n_including_zero() -> None:
    series = Series(3)
    for t, v in enumerate((1.0, 2.0, 3.0, 4.0)):
        series.append(float(t), v)
    assert series.values() == (2.0, 3.0, 4.0)  # capacity 3: the oldest fell off
    assert series.values(2) == (3.0, 4.0)
    assert series.values(0) == ()


def test_history_get_unknown_is_empty_and_not_stored() -> None:
    history = History(4)
    assert len(history.get("spark-1/gpu0", "sm_clock_mhz")) == 0
    assert len(history) == 0
