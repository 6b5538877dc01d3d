"""Sweep profiles, the estimator that reads them, token counting and the context budget.

Textual-free. Subpackages by role, lowest first (an import-linter layers contract in
``pyproject.toml`` keeps the order): ``profiles`` (load, validate and import profiles);
``estimator`` and ``tokens``; ``expected`` (the live window's expected row) and ``budget``
("if I send this now, will it fit and how long will I wait?"); ``runner`` (``sparktop
sweep``, and learning a profile from a recording); ``compare``. File formats:
``sparktop/sweep/README.md``.
"""
