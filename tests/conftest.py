"""Shared test setup: where the project's shared material is (fixtures, cases, profiles).

The real captured outputs (``fixtures/``), the cases that failed elsewhere (``cases/``) and the
seed sweeps (``profiles/``) live in the project's ``shared/`` folder beside this repository
(``../shared``), or wherever ``SPARKTOP_SHARED`` points. Without it, the test modules that read
it are not collected and the run says so in its header and summary; under CI (``CI`` set) a
missing ``shared/`` is an error, so CI can never pass by skipping them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparktop.testing.shared import CASES, FIXTURES, PROFILES, REPO, SHARED
from tests.real_llamacpp_plugin import PLUGIN as REAL_LLAMACPP
from tests.real_llamacpp_plugin import real_llamacpp
from tests.real_vllm_plugin import PLUGIN as REAL_VLLM
from tests.real_vllm_plugin import real_vllm

__all__ = [
    "CASES", "FIXTURES", "PROFILES", "REPO", "SHARED",
    "real_llamacpp", "real_vllm",
]  # fmt: skip

REAL_SERVERS = (REAL_VLLM, REAL_LLAMACPP)
"""The real engines' servers, each started once per run by the first worker that needs it."""
HAVE_SHARED = (SHARED / "DESIGN.md").is_file() and CASES.is_dir() and FIXTURES.is_dir()

_NEEDS_SHARED = (
    "FIXTURES", "CASES", "PROFILES", "SHARED", "nvsmi_helpers", "ssh_helpers",
    "testing.nvsmi", "testing.sshd",
)  # fmt: skip
_not_collected: list[str] = []


def _missing_message() -> str:
    return (
        f"the shared fixtures and cases were not found at {SHARED} (expected beside the "
        "repository as ../shared, or set SPARKTOP_SHARED=/path/to/shared)"
    )


def pytest_configure(config: pytest.Config) -> None:
    if not HAVE_SHARED and os.environ.get("CI"):
        raise pytest.UsageError(_missing_message())
    for plugin in REAL_SERVERS:
        plugin.configure(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    for plugin in REAL_SERVERS:
        plugin.unconfigure(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the run's real servers early (each only if this process runs its tests)."""
    for plugin in REAL_SERVERS:
        plugin.collection_finish(session)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    """xdist: hand each real server's state directory and the controller's pid to a worker."""
    for plugin in REAL_SERVERS:
        plugin.configure_node(node)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if HAVE_SHARED or collection_path.suffix != ".py":
        return None
    if not collection_path.name.startswith("test_"):
        return None
    text = collection_path.read_text(encoding="utf-8", errors="replace")
    if any(name in text for name in _NEEDS_SHARED):
        _not_collected.append(collection_path.name)
        return True
    return None


def pytest_report_header(config: pytest.Config) -> str | None:
    return None if HAVE_SHARED else f"WARNING: {_missing_message()}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for plugin in REAL_SERVERS:
        if (line := plugin.summary(terminalreporter.config)) is not None:
            terminalreporter.write_line(line)
    # A test's measured figures (``record_property("evidence", ...)``), so CI logs show
    # them without -s; user properties travel with the reports from xdist workers too.
    for kind in ("passed", "failed"):
        for report in terminalreporter.stats.get(kind, ()):
            if getattr(report, "when", "") != "call":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name == "evidence":
                    terminalreporter.write_line(f"{kind} {report.nodeid}: {value}")
    if _not_collected:
        terminalreporter.write_line(
            f"WARNING: {len(_not_collected)} test modules that read ../shared were not "
            f"collected: {_missing_message()}",
            yellow=True,
        )


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.fail(_missing_message())
    return SHARED
