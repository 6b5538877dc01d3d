"""Where the project's shared material is: the real captured outputs (``fixtures/``), the
cases that failed elsewhere (``cases/``) and the seed sweeps (``profiles/``), in ``shared/``
beside the repository (``../shared``) or wherever ``SPARKTOP_SHARED`` points."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("SPARKTOP_SHARED") or REPO.parent / "shared").resolve()
FIXTURES = SHARED / "fixtures"
CASES = SHARED / "cases"
PROFILES = SHARED / "profiles"
