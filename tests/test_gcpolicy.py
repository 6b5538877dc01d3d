"""The long-running process's collector settings (sparktop.gcpolicy)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from sparktop import gcpolicy


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored")
def test_tune_freezes_what_exists_and_collects_the_young_generation_less_often() -> None:
    middle, oldest = gc.get_threshold()[1:]
    gcpolicy.tune()
    assert gc.get_freeze_count() > 1000  # this process's modules and classes, at least
    assert gc.get_threshold() == (gcpolicy.YOUNG_THRESHOLD, middle, oldest)


@pytest.mark.usefixtures("restored")
def test_cycles_made_after_tune_are_still_collected() -> None:
    gcpolicy.tune()

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # type: ignore[attr-defined]
    ids = {id(a), id(b)}
    del a, b
    gc.collect()
    assert not ids & {id(o) for o in gc.get_objects() if isinstance(o, Node)}
