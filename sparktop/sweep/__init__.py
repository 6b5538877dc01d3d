"""Sweep profiles, the estimator that reads them, token counting and the context budget.

Textual-free. ``profile`` loads and validates sweep profiles (built-in or a user file),
``estimator`` turns one into expected TTFT / prefill / decode / aggregate figures,
``tokens`` counts what a prompt will cost, ``budget`` and ``report`` answer "if I send this
now, will it fit and how long will I wait?". File formats: ``sparktop/sweep/README.md``.
"""
