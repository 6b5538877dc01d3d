"""Why an engine's page gives less than a full sample, in words for its row: every load
gauge refused or missing (the engine is DEGRADED), some of them refused, no engine metrics
at all, and the limits carried as labels of the server's info gauge (NA when absent).
Used by :class:`~sparktop.sources.engines.metrics.MetricsDeriver`.
"""

from __future__ import annotations

from sparktop.model import NA, Num
from sparktop.sources.engines.kinds import KINDS, spec_for
from sparktop.sources.engines.pool import label_int
from sparktop.sources.engines.reading import PageReading
from sparktop.sources.exposition.page import PromPage

LOAD_GAUGES = ("running", "waiting", "kv_usage")
"""The gauges an engine row is about: with every one on the page refused, it says nothing."""


def all_load_gauges_refused(reading: PageReading) -> str:
    """Why the engine is DEGRADED: every load gauge the page has was refused (NaN, negative,
    a share past 1), naming each with the value read, or the page has none of them, naming
    what is missing; "" when any of them is usable."""
    read = [k for k in LOAD_GAUGES if k in reading.gauges_read]
    if not read:
        spec = spec_for(reading.kind)
        names = ", ".join(spec.gauges[k][0] for k in LOAD_GAUGES if k in spec.gauges)
        return (
            f"no load gauge on the page ({names} not exported: an older or differently "
            "configured server?)"
        )
    if any(k not in reading.refused for k in read):
        return ""
    return "every load gauge refused: " + "; ".join(reading.refused[k] for k in read)


LOAD_NAMES = {"running": "running", "waiting": "waiting", "kv_usage": "KV usage"}


def some_load_gauges_refused(reading: PageReading) -> str:
    """``running n/a: vllm:num_requests_running is -5: not a plausible value`` for each load
    gauge on the page that was refused while another was read (an ambiguous one is left to
    the page's note on repeated series); "" when none was."""
    # An ambiguous series is named by the page's own note (both values, every label).
    return "; ".join(
        f"{LOAD_NAMES[k]} n/a: {why}"
        for k in LOAD_GAUGES
        if (why := reading.refused.get(k)) and " is ambiguous: " not in why
    )


def info_limit(reading: PageReading, ranks: list[str], name: str) -> Num:
    """A limit carried as a label of the server's info gauge (``vllm:cache_config_info``).

    No vLLM release in the fixtures puts ``max_num_seqs`` or ``max_num_batched_tokens``
    there (0.11.0's labels are the CacheConfig's: block size, blocks, dtype…), so this reads
    them only when a server does; otherwise the inventory and then the profile answer."""
    info = (reading.ranks[ranks[0]].info if ranks else None) or reading.shared_info
    value = label_int(info, name)
    return NA("not exported") if value is None else float(value)


def empty_reason(page: PromPage, reading: PageReading) -> str:
    if reading.declared_empty:
        return "metric families declared but no samples: " + ", ".join(reading.declared_empty[:3])
    prefixes = {spec.metric_prefix: spec for spec in KINDS.values()}
    engine_families = sorted(n for n in page.declared if n.startswith(tuple(prefixes)))
    if engine_families:
        # An engine too old or too new for these names (vLLM 0.10.0): say what is missing.
        spec = prefixes[engine_families[0].split(":", 1)[0] + ":"]
        needed = [" or ".join(spec.gauges[k]) for k in ("running", "waiting", "kv_usage")]
        shown = ", ".join(engine_families[:3]) + (", …" if len(engine_families) > 3 else "")
        return (
            f"{len(engine_families)} {spec.kind} metric families on the page ({shown}) but "
            f"none sparktop needs: no {', '.join(needed)}"
        )
    *others, last = (spec.label for spec in KINDS.values())
    names = f"{', '.join(others)} or {last}" if others else last
    return f"no {names} metrics on the page ({page.sample_count} other samples)"
