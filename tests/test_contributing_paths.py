"""Every path CONTRIBUTING.md names exists, so its "where does X go" map follows the code.

A path is a code span that looks like one: ``sparktop/alerts/rules.py``, ``docs/``,
``sources/engines/pool.py:resolve_limit`` (the part before ``:``), a glob such as
``sparktop/sweep/profiles/*.yaml`` (which must match). A span relative to ``sparktop/``
(``sources/engines/pool.py``) is looked up there too, and a bare file name (``run_all.py``)
anywhere in the repository. Spans outside the repository (``~/…``, ``../shared/…``) and
placeholders (``docs/<kind>.md``) are not checked.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PATHLIKE = re.compile(r"[A-Za-z0-9_.][\w./*-]*(?:/|\.(?:py|md|toml|tcss|ya?ml|json|sh))")


def named_paths(text: str) -> list[str]:
    """The path-like code spans of a Markdown text (fenced blocks left out)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found = []
    for span in re.findall(r"`([^`\n]+)`", text):
        path = re.sub(r":[\w.]+$", "", span.strip())
        if PATHLIKE.fullmatch(path) and not path.startswith(".."):
            found.append(path)
    return found


def exists(path: str) -> bool:
    for base in (REPO, REPO / "sparktop"):
        if any(base.glob(path)) if "*" in path else (base / path).exists():
            return True
    if "/" not in path:
        return any(p for p in REPO.rglob(path) if ".venv" not in p.parts and ".git" not in p.parts)
    return False


def test_named_paths_are_found_in_samples() -> None:
    text = "see `sources/pool.py:resolve_limit`, `docs/`, `5/?`, `~/.cache/x`, `docs/<kind>.md`"
    assert named_paths(text) == ["sources/pool.py", "docs/"]


def test_every_path_contributing_names_exists() -> None:
    paths = named_paths((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    assert len(paths) >= 40
    missing = sorted({p for p in paths if not exists(p)})
    assert not missing, f"CONTRIBUTING.md names paths that do not exist: {missing}"
