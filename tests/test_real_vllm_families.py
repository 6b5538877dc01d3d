"""Every vLLM metric family sparktop reads (``sparktop/sources/engines/kinds/vllm.py``,
``SPEC``) held to a real vLLM 0.32.0 page: present, same type, the labels sparktop groups and
reads by, and the bucket edges sparktop's simulator, tests and benchmarks assume (issue 27
item 2).

Checked on the pages captured from a real server (``../shared/fixtures/real``) and on the
live real server of this run. The newest alias of each family is the one 0.32 exports;
what it exports only when configured is in :data:`NOT_CONFIGURED`, with the reason.
"""

from __future__ import annotations

import pytest

from sparktop.model import is_num
from sparktop.sim.stats import (
    ITL_BUCKETS_S,
    REQUEST_LATENCY_BUCKETS_S,
    TTFT_BUCKETS_S,
    buckets_1_2_5,
)
from sparktop.sources.engines.kinds.vllm import SPEC as VLLM
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import SUM_COUNT_ONLY, parse_engine_page
from tests.real_page import (
    REAL_IDLE_PAGE,
    REAL_LOAD_PAGE,
    REAL_MAX_MODEL_LEN,
    Shape,
    family_of,
    fetch_page,
    shapes,
)
from tests.real_vllm_plugin import RealVllm

PER_ENGINE = frozenset({"engine", "model_name"})
NOT_CONFIGURED = {
    "spec_drafts", "spec_draft_tokens", "spec_accepted", "spec_accepted_pos",
}  # fmt: skip
"""Speculative decoding: vLLM registers these only with a speculative config
(vllm/v1/spec_decode/metrics.py); the real server runs without a draft model."""
WHOLE_SERVER = {"admission_rejections": frozenset({"model_name", "reason"})}
"""Counted by 0.32's API server, not per engine: no ``engine`` label (sparktop reads an
unlabelled sample as the whole server's, not rank 0's)."""
EDGES: dict[str, tuple[float, ...]] = {
    "ttft": TTFT_BUCKETS_S,
    "itl": ITL_BUCKETS_S,
    "tpot": ITL_BUCKETS_S,
    "queue": REQUEST_LATENCY_BUCKETS_S,
    "prefill_time": REQUEST_LATENCY_BUCKETS_S,
    "decode_time": REQUEST_LATENCY_BUCKETS_S,
    "e2e": REQUEST_LATENCY_BUCKETS_S,
    "prompt_len": buckets_1_2_5(REAL_MAX_MODEL_LEN),
    "generation_len": buckets_1_2_5(REAL_MAX_MODEL_LEN),
}


def _wanted() -> list[tuple[str, str, str, frozenset[str]]]:
    """(key, family, type, labels) for every family sparktop reads, newest alias."""
    out = []
    for kind, table in (("gauge", VLLM.gauges), ("counter", VLLM.counters)):
        for key, aliases in table.items():
            out.append((key, family_of(aliases[0], kind), kind, PER_ENGINE))
    for key, aliases in VLLM.histograms.items():
        out.append((key, aliases[0], "histogram", PER_ENGINE))
    for key, (slot, name, label) in VLLM.labelled.items():
        kind = "gauge" if slot == "gauges" else "counter"
        labels = WHOLE_SERVER.get(key, PER_ENGINE | {label})
        out.append((key, family_of(name, kind), kind, labels))
    return out


def _mismatches(page: dict[str, Shape]) -> list[str]:
    wrong = []
    for key, family, kind, labels in _wanted():
        if key in NOT_CONFIGURED:
            continue
        shape = page.get(family)
        if shape is None:
            wrong.append(f"{key}: {family} not on the real page")
            continue
        if shape.type != kind:
            wrong.append(f"{key}: {family} is a {shape.type}, sparktop reads a {kind}")
        if shape.labels != labels:
            wrong.append(f"{key}: {family} labels {sorted(shape.labels)}, not {sorted(labels)}")
        if kind == "histogram" and key not in SUM_COUNT_ONLY and shape.edges != EDGES[key]:
            wrong.append(f"{key}: {family} edges {shape.edges}, assumed {EDGES[key]}")
    info = page.get(VLLM.info)
    read = {"engine", "kv_cache_size_tokens", "num_gpu_blocks", "block_size"}
    if info is None or info.type != "gauge" or not read <= info.labels:
        wrong.append(f"{VLLM.info}: {info} lacks {sorted(read)}")
    return wrong


def test_every_family_sparktop_reads_is_on_the_captured_real_pages() -> None:
    for path in (REAL_IDLE_PAGE, REAL_LOAD_PAGE):
        assert _mismatches(shapes(path.read_text(encoding="utf-8"))) == [], path.name


@pytest.mark.real_vllm
def test_every_family_sparktop_reads_is_on_the_live_real_page(real_vllm: RealVllm) -> None:
    assert _mismatches(shapes(fetch_page(real_vllm.url))) == []


def test_the_exceptions_are_what_the_real_page_lacks_or_labels_otherwise() -> None:
    page = shapes(REAL_LOAD_PAGE.read_text(encoding="utf-8"))
    keys = {key: family for key, family, _kind, _labels in _wanted()}
    assert [key for key in NOT_CONFIGURED if keys[key] in page] == []
    for key, labels in WHOLE_SERVER.items():
        assert page[keys[key]].labels == labels


def test_sparktop_derives_every_figure_from_the_real_idle_then_load_pages() -> None:
    """The two captured pages are one server's, 10 s apart: every figure sparktop derives
    from them is a number, except those of speculative decoding (not configured)."""
    deriver = MetricsDeriver("tiny")
    deriver.derive(parse_engine_page(REAL_IDLE_PAGE.read_text()), now_s=0.0, wall_s=1.7e9)
    s = deriver.derive(parse_engine_page(REAL_LOAD_PAGE.read_text()), now_s=10.0, wall_s=1.7e9)
    assert (s.running, s.waiting) == (4, 4)
    assert s.kv_pool_tokens == 524_288 and s.kv_pool_source == "cache_config_info"
    for name in ("prefill_tps", "decode_tps", "kv_usage", "preemptions_per_s"):
        assert is_num(getattr(s, name)), (name, getattr(s, name))
    assert set(s.prompt_tps_by_source) == {
        "local_compute",
        "local_cache_hit",
        "external_kv_transfer",
    }
    assert s.waiting_capacity + s.waiting_deferred == s.waiting
    assert s.admission_rejections_per_s == 0
    assert not is_num(s.spec_acceptance_rate)
