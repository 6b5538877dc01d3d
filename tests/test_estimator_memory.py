"""What the monitor's estimator memo holds stays small: cells past the table share their
"no data" figure, one per reason."""

from __future__ import annotations

from sparktop.model import NA
from sparktop.sweep.estimator.estimator import Basis, estimate
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import DEFAULT_PROFILE


def test_cells_past_the_table_share_one_figure_per_reason() -> None:
    profile = load_profile(DEFAULT_PROFILE)
    past = max(r.concurrency for r in profile.rows) + 7
    a, b = estimate(profile, 2_000, past), estimate(profile, 9_000, past)
    assert a.ttft_s.basis is Basis.NO_DATA and isinstance(a.ttft_s.value, NA)
    assert a.ttft_s is b.ttft_s  # the same reason: one object, not one per cell
    assert a.ttft_s.low is a.ttft_s.value is a.ttft_s.high
    assert f"concurrency {past}" in a.ttft_s.value.reason
