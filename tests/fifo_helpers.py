"""Running a call that might block opening a FIFO, without hanging the test run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest


def finishes(call: Callable[[], object], fifo: Path, timeout_s: float = 20.0) -> object:
    """``call()``'s result or exception; a call stuck opening ``fifo`` is freed by opening
    it for writing, and the test fails saying so."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["result"] = call()
        except Exception as exc:
            box["result"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        with open(fifo, "wb"):  # a writer lets the blocked open return
            pass
        thread.join(timeout_s)
        pytest.fail(f"reading {fifo.name} blocked on a FIFO with no writer")
    return box["result"]
