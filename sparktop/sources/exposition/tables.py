"""The tables the fast reader (:mod:`sparktop.sources.exposition.text`) keeps from page to
page: label blocks read once (:func:`_read_block`), the blocks that passed each label bound
(:data:`_PASSED`), value texts (:data:`_VALUES`) and plain stretches (:func:`_page_runs`),
each bounded; :func:`memo_sizes` counts them and :func:`forget_values` starts the value
table over (leak checks). An engine serves the same blocks and many of the same values
scrape after scrape, so a page mostly looks its lines up here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from sparktop.sources.exposition.grammar import LABEL_VALUE as _LABEL_VALUE
from sparktop.sources.exposition.runs import MAX_BLOCK_CHARS, PLAIN_LABELS, PassedRuns

# A pair from a name's first character only (searched from inside a name it was quadratic).
LABEL_PAIR = re.compile(rf"(?<![a-zA-Z0-9_])([a-zA-Z_][a-zA-Z0-9_]*)=({_LABEL_VALUE})")
_ESCAPE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


def unescape(text: str) -> str:
    """A label value's text between its quotes → the value (``\\\\``, ``\\n``, ``\\"``)."""
    return _ESCAPE.sub(lambda m: _ESCAPES[m.group(0)], text) if "\\" in text else text


Block = tuple[int, Mapping[str, str] | None, bool]
"""A label block read: its label count, its labels unescaped (None when a name repeats) and
whether it is a plain one (:data:`PLAIN_LABELS`)."""
_BLOCKS: dict[str, Block] = {}
"""Label block → :data:`Block`: a memo of a pure function shared by every page read (an
engine serves the same blocks scrape after scrape), bounded by :data:`MAX_BLOCKS` entries of
at most :data:`MAX_BLOCK_CHARS`."""
MAX_BLOCKS = 8192


def _read_block(block: str, max_labels: int) -> Block:
    """``block`` read (from the memo when it is there); its count alone when that is over
    ``max_labels`` (a huge block is refused before its labels are built)."""
    known = _BLOCKS.get(block)
    if known is None:
        pairs = LABEL_PAIR.findall(block)
        if len(pairs) > max_labels:
            return len(pairs), None, False
        labels = {name: unescape(value[1:-1]) for name, value in pairs}
        plain = PLAIN_LABELS.fullmatch(block) is not None
        read = MappingProxyType(labels) if len(labels) == len(pairs) else None
        known = (len(pairs), read, plain)
        if len(block) <= MAX_BLOCK_CHARS:
            if len(_BLOCKS) >= MAX_BLOCKS:
                _BLOCKS.clear()
            _BLOCKS[block] = known
    return known


_PASSED: dict[int, dict[str, Mapping[str, str]]] = {}
"""Label bound → the blocks that passed under it (``""`` → :data:`NO_LABELS`), shared by the
pages read: whether a block passes depends on the block and the bound alone, and an engine
serves the same blocks scrape after scrape. A page starts a fresh table once one holds
:data:`MAX_BLOCKS` (never mid-page: its rows look their blocks up there), and one a page
left past it is dropped when that page ends (:func:`scan_text`)."""
_VALUES: list[dict[str, float]] = [{}]
"""Value text → value (:func:`~sparktop.sources.exposition.runs.number`), shared by the pages read
the same way (bucket counts and gauges repeat from scrape to scrape); a page starts a fresh
one once it holds :data:`MAX_VALUES`."""
MAX_VALUES = 8_192
"""About 0.9 MB when full (~110 B a text, the page's string kept as its key; 32,768 held
3.7 MB). A round of scrapes repeats what it can from the one before while the table holds
both: a vLLM page has ~75 texts the engine row reads, a full 8-rank page ~480, so 8 such
engines fill under half. Past the cap the table starts over: the next page of each engine
reads its texts again (+9-15 % of that page's parse), nothing is lost."""


def _page_values() -> dict[str, float]:
    """The value table a page reads into (a fresh one when the shared one is full)."""
    if len(_VALUES[0]) >= MAX_VALUES:
        _VALUES[0] = {}
    return _VALUES[0]


_RUNS: dict[int, PassedRuns] = {}
"""Label bound → the stretches found plain under it, shared by the pages read."""


def _page_runs(max_labels: int) -> PassedRuns:
    """The stretches found plain under this label bound (a table kept per bound)."""
    runs = _RUNS.get(max_labels)
    if runs is None:
        if len(_RUNS) >= 8:  # bounds other than the default: tests, a few at most
            _RUNS.clear()
        runs = _RUNS[max_labels] = PassedRuns()
    return runs


def memo_sizes() -> dict[str, int]:
    """Entries in the tables kept from page to page: ``blocks`` (:data:`_BLOCKS`),
    ``passed`` (label blocks passed, every bound), ``values`` (value texts) and
    ``run_chars`` (characters of plain stretches, both generations, every bound)."""
    return {
        "blocks": len(_BLOCKS),
        "passed": sum(map(len, _PASSED.values())),
        "values": len(_VALUES[0]),
        "run_chars": sum(runs.chars + sum(len(k[1]) for k in runs.old) for runs in _RUNS.values()),
    }


def forget_values() -> None:
    """Start a fresh value table (the next page fills it again). For a leak check: the
    table is bounded (:data:`MAX_VALUES`) but fills with every scrape's new counter texts and
    starts over once full, so memory counted with it says where it is in that fill, not
    whether anything grows. (The label tables stay: their mappings key other memos by
    identity, which fresh mappings would fill.) A page being read keeps the table it took."""
    _VALUES[0] = {}


def _drop_full_tables(max_labels: int) -> None:
    """Start fresh tables where a page left one past its cap (a page's rows no longer need
    them once it is read or refused)."""
    if len(_PASSED.get(max_labels, ())) > MAX_BLOCKS:
        del _PASSED[max_labels]
    if len(_VALUES[0]) > MAX_VALUES:
        _VALUES[0] = {}
