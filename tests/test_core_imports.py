"""The Textual-free core must never import Textual or the UI package."""

from __future__ import annotations

import subprocess
import sys

CORE_PACKAGES = ("sparktop.sources", "sparktop.sweep", "sparktop.sim", "sparktop.inventory",
                 "sparktop.alerts", "sparktop.record", "sparktop.commands",
                 "sparktop.testing")  # fmt: skip
CORE_MODULES = ["sparktop.model", "sparktop.cluster", "sparktop.history", "sparktop.poller",
                "sparktop.plan", "sparktop.snapshot", "sparktop.cli"]  # fmt: skip


def test_core_does_not_import_textual() -> None:
    """Every core module, and every command (which imports the UI only when it opens it),
    imports without Textual or the UI."""
    code = (
        "import importlib, pkgutil, sys\n"
        f"mods = {CORE_MODULES!r}\n"
        f"for pkg in {CORE_PACKAGES!r}:\n"
        "    p = importlib.import_module(pkg)\n"
        "    mods += [m.name for m in pkgutil.walk_packages(p.__path__, pkg + '.')]\n"
        "for m in mods:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m == 'textual' or m.startswith(('textual.', 'sparktop.ui')))\n"
        "print(len(mods), bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_linter_contract_is_kept() -> None:
    """Every import-linter contract in pyproject.toml holds: core ↛ textual, sparktop.ui; the
    layers inside ``sparktop.sources`` (build → local | ssh | prometheus → engines | nvsmi →
    host | exposition → probe); the sweep subpackages' layers and no import cycles among the
    modules of ``sparktop.sweep``."""
    import shutil
    from pathlib import Path

    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        import pytest

        pytest.skip("import-linter not installed (pip install -e '.[dev]')")
    repo = Path(__file__).resolve().parent.parent
    result = subprocess.run([exe], capture_output=True, text=True, cwd=repo)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert ", 0 broken" in result.stdout
    assert "The core never imports Textual or the UI KEPT" in result.stdout
    assert "Sources are layered by transport: a package imports only the layers below it KEPT" in (
        result.stdout
    )

    import tomllib

    contracts = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert f"{len(contracts['contracts'])} kept, 0 broken" in result.stdout


def test_monitor_path_does_not_import_numpy_or_scipy() -> None:
    """NumPy and SciPy (about 50 MB of RSS) are test references only: the app, the plan, the
    alert rules and a fitted estimator run without them (sparktop.sweep.estimator.fitmath)."""
    code = (
        "import sys\n"
        "import sparktop.ui.app, sparktop.commands.monitor, sparktop.plan, sparktop.alerts.rules\n"
        "import sparktop.exporter.run, sparktop.commands.budget\n"
        "from sparktop.sweep.estimator.estimator import estimate\n"
        "from sparktop.sweep.profiles.builtin import builtin_profile_names\n"
        "from sparktop.sweep.profiles.loader import load_profile\n"
        "for name in builtin_profile_names():\n"
        "    estimate(load_profile(name), 3000, 2)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy'))\n"
        "print(bad[:5])\n"
        "sys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
