"""Shared fixtures: paths to ../shared (fixtures, cases, profiles)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures"
CASES = SHARED / "cases"
PROFILES = SHARED / "profiles"


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"../shared not found at {SHARED}")
    return SHARED
