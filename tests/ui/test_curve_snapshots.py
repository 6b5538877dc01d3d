"""SVG snapshots of the curve screen (``c``) at 80×24 and 200×50 (frozen clock, UTC).

Update after an intended change: ``pytest tests/ui/test_curve_snapshots.py
--snapshot-update``, then look at the SVGs before committing them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.ui.test_snapshots import cluster_app


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
def test_curve_screen(snap_compare: object, size: tuple[int, int]) -> None:
    app, feed = cluster_app()
    assert snap_compare(app, terminal_size=size, run_before=feed, press=["c"])  # type: ignore[operator]
