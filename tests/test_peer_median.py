"""The peer rules' median is ``statistics.median`` (which the monitor no longer loads)."""

from __future__ import annotations

import random
import statistics

import pytest

from sparktop.alerts.peers import median_of


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 63, 64])
def test_the_peer_median_is_statistics_median_on_odd_and_even_counts(n: int) -> None:
    rng = random.Random(n)
    for _ in range(50):
        values = [rng.choice((rng.uniform(0, 250), float(rng.randint(0, 40)))) for _ in range(n)]
        assert median_of(iter(values)) == statistics.median(values)


def test_no_values_have_no_median() -> None:
    with pytest.raises(ValueError, match="no values"):
        median_of([])
