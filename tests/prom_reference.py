"""The reference reading of a page: prometheus_client's parsers, then sparktop's stated rules.

The rules applied after the library (each documented in ``sparktop/sources/exposition/page.py``):
``vllm_``/``sglang_`` names normalised, ``*_created`` dropped, a repeated series read once
(the first, or the one with the newest timestamp when they carry timestamps). Comparison is
by multiset of (name, labels, value), NaN equal to NaN.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families

from sparktop.sources.exposition.page import PromPage, normalise

Key = tuple[str, frozenset[tuple[str, str]], str]


def reference(text: str, wanted: Collection[str] | None, om: bool) -> Counter[Key] | None:
    """The library's samples as sparktop must report them; None when the library rejects."""
    parse = om_families if om else text_string_to_metric_families
    try:
        samples = [s for family in parse(text) for s in family.samples]
    except Exception:
        return None
    newest: dict[tuple[str, frozenset[tuple[str, str]]], object] = {}
    for s in samples:  # timestamped repeats: the newest is the series's value
        key = (s.name, frozenset(s.labels.items()))
        if s.timestamp is not None and (key not in newest or s.timestamp > newest[key].timestamp):  # type: ignore[attr-defined]
            newest[key] = s
    samples = [
        s for s in samples
        if s.timestamp is None or newest[(s.name, frozenset(s.labels.items()))] is s
    ]  # fmt: skip
    out: Counter[Key] = Counter()
    seen = set()
    for s in samples:
        name = normalise(s.name)
        if name.endswith("_created") or (wanted is not None and name not in wanted):
            continue
        series = (name, frozenset(s.labels.items()))
        if series in seen:
            continue
        seen.add(series)
        out[(name, series[1], repr(float(s.value)))] += 1
    return out


def observed(page: PromPage) -> Counter[Key] | None:
    """What sparktop read, in the same shape; None when it refused the page."""
    if page.error:
        return None
    return Counter(
        (s.name, frozenset(s.labels.items()), repr(float(s.value)))
        for samples in page.samples.values()
        for s in samples
    )
