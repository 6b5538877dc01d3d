"""``sparktop snapshot`` engine section, end to end: the command line against HTTP servers on
127.0.0.1 (a vLLM-shaped page whose load advances in real time, and each metrics case file).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sparktop.cli import main
from sparktop.testing.http_stub import Reply, Route, StubServer, models_route
from sparktop.testing.vllm_page import FakeVllm, Load
from tests.conftest import CASES

METRIC_CASES = CASES / "metrics"


@contextmanager
def serving(routes: dict[str, Route]) -> Iterator[str]:
    """A :class:`StubServer` on its own event loop in a thread (the CLI runs its own loop)."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    server = StubServer(routes)
    stop: asyncio.Future[None] | None = None

    async def run() -> None:
        nonlocal stop
        stop = loop.create_future()
        async with server:
            ready.set()
            await stop

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield server.url
    finally:
        assert stop is not None
        loop.call_soon_threadsafe(stop.set_result, None)
        thread.join(10)
        loop.close()


def inventory(tmp_path: Path, url: str, extra: str = "") -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"cluster: test\nengines:\n  - {{name: dsv4, url: '{url}'{extra}}}\n")
    return path


def snapshot_json(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> tuple[int, Any]:
    code = main(["snapshot", "--inventory", str(path), "--json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out)["engines"][0]


class LivePage:
    """The fake's page as a route: each scrape first lets the wall time since the previous
    one happen on the fake server, and is recorded in ``scraped_at`` (monotonic seconds)."""

    def __init__(self, fake: FakeVllm) -> None:
        self.fake = fake
        self.last = time.monotonic()
        self.scraped_at: list[float] = []

    def __call__(self) -> Reply:
        now = time.monotonic()
        self.fake.advance(now - self.last)
        self.last = now
        self.scraped_at.append(now)
        return Reply(body=self.fake.page())


def test_snapshot_reports_what_the_server_generated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    fake = FakeVllm(engines=2, kv_cache_size_tokens=1_245_000)
    fake.load["0"] = Load(4700, 65.2, 0.5, 200, ttft_range_s=(0.1, 1.0), prompt_tokens=8192)
    fake.load["1"] = Load(874.8, 34.7, 0, 200, ttft_range_s=(0.1, 1.0), prompt_tokens=2048)
    fake.set_gauges("0", running=4, waiting=1, kv_usage=0.81)
    fake.set_gauges("1", running=3, waiting=0, kv_usage=0.47)
    page = LivePage(fake)
    routes = {"/metrics": page, "/v1/models": models_route(max_model_len=1_048_576)}
    with serving(routes) as url:
        code, e = snapshot_json(
            capsys, inventory(tmp_path, url, ", max_num_seqs: 8"), "--window", "1"
        )
    # A 1 s window: the first scrape and one a second later, never less. Its length in wall
    # time is the machine's (a loaded one stretches it), so the rates are checked against
    # what the server generated between the two scrapes over the window the snapshot timed.
    assert len(page.scraped_at) == 2 and e["window_s"] >= 1.0, (page.scraped_at, e["window_s"])
    generated = (page.scraped_at[1] - page.scraped_at[0]) / e["window_s"]
    # Rank 0 preempts 0.5/s, so a 1 s window holds one preemption or none: with one, the
    # warning is listed and the status is 4 (degraded), else 0 (all is well).
    degraded = e["preemptions_per_s"] > 0
    assert code == (4 if degraded else 0)
    assert e["state"] == "ok"
    assert (e["running"], e["waiting"], e["kv_usage_pct"]) == (7, 1, 81.0)
    assert (e["kv_pool_tokens"], e["kv_pool_source"]) == (2_490_000, "cache_config_info")
    assert e["kv_free_tokens"] == pytest.approx(1_245_000 * (0.19 + 0.53))
    assert e["prefill_tok_per_s"] == pytest.approx((4700 + 874.8) * generated, rel=1e-6)
    assert e["decode_tok_per_s"] == pytest.approx((65.2 + 34.7) * generated, rel=1e-6)
    assert e["ttft_p50_s"] == pytest.approx(0.55, rel=0.05)
    assert (e["max_num_seqs"], e["max_model_len_tokens"]) == (8, 1_048_576)
    assert [r["running"] for r in e["ranks"]] == [4, 3]


CASE_CHECKS: dict[str, Callable[[int, Any], None]] = {}


def case(*names: str) -> Callable[[Callable[[int, Any], None]], Callable[[int, Any], None]]:
    def register(check: Callable[[int, Any], None]) -> Callable[[int, Any], None]:
        CASE_CHECKS[" then ".join(names)] = check
        return check

    return register


@case("nan-gauge.prom")
def _nan_gauge(code: int, e: Any) -> None:
    # one refused gauge: an incomplete page (degraded, exit 4), the rest still shown
    assert code == 4 and e["state"] == "degraded" and (e["running"], e["kv_usage_pct"]) == (3, 41.2)
    assert e["waiting"] is None and e["missing"]["waiting"] == "vllm:num_requests_waiting is nan"
    assert e["message"] == "waiting n/a: vllm:num_requests_waiting is nan"
    assert e["decode_tok_per_s"] == 0.0  # the generation counter was read (and did not move)


@case("openmetrics-body.prom")
def _openmetrics(code: int, e: Any) -> None:
    assert e["state"] == "ok" and (e["running"], e["kv_usage_pct"]) == (2, 25.0)
    assert (e["prefill_tok_per_s"], e["decode_tok_per_s"]) == (0.0, 0.0)


@case("headers-only.prom")
def _headers_only(code: int, e: Any) -> None:
    # The server answered: the engine is degraded (cases/README.md), not down.
    assert e["state"] == "degraded" and "no samples" in e["message"]
    assert (e["running"], e["waiting"], e["kv_usage"]) == (None, None, None)
    assert "no samples" in e["missing"]["running"]


@case("cache-config-none.prom")
def _cache_config_none(code: int, e: Any) -> None:
    assert e["kv_usage_pct"] == 50.0 and e["kv_pool_tokens"] is None
    assert (
        e["kv_pool_source"] == "unknown"
        and "num_gpu_blocks='None'" in e["missing"]["kv_pool_tokens"]
    )


@case("dp2-engines.prom")
def _dp2(code: int, e: Any) -> None:
    assert (e["running"], e["waiting"], e["kv_usage_pct"]) == (7, 1, 81.0)
    assert [r["kv_usage_pct"] for r in e["ranks"]] == [81.0, 47.0]
    assert [r["kv_pool_tokens"] for r in e["ranks"]] == [89_332 * 256 / 2] * 2


@case("counter-reset-1.prom", "counter-reset-2.prom")
def _counter_reset(code: int, e: Any) -> None:
    assert e["restarted"] is True and "restarted" in e["message"]
    assert e["prefill_tok_per_s"] is None and e["decode_tok_per_s"] is None


@case("itl-first-bucket.prom")
def _itl_first_bucket(code: int, e: Any) -> None:
    assert e["itl_p50_s"] == 0.01 and e["bounds"] == {"itl_p50_s": "<"}
    assert "itl_p50_s" in e["since_start"]


@case("tab-separator.prom")
def _tab_separator(code: int, e: Any) -> None:
    assert code == 0 and e["state"] == "ok" and e["message"] is None
    assert (e["running"], e["waiting"], e["kv_usage"]) == (4, 0, 0.010902)


@case("label-formfeed.prom")
def _label_formfeed(code: int, e: Any) -> None:
    assert code == 0 and (e["running"], e["waiting"], e["kv_usage"]) == (4, 0, 0.010902)
    assert e["model"] == "dsv41\x0cflash"


@case("quoted-name.prom")
def _quoted_name(code: int, e: Any) -> None:
    assert code == 0 and (e["running"], e["waiting"], e["kv_usage"]) == (4, 0, 0.010902)


@case("duplicated-block.prom")
def _duplicated_block(code: int, e: Any) -> None:
    assert code == 0 and (e["running"], e["waiting"], e["kv_usage"]) == (4, 0, 0.010902)
    assert "repeated series ignored" in e["message"]


@pytest.mark.parametrize("files", list(CASE_CHECKS))
def test_snapshot_on_each_case_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: str
) -> None:
    pages = [(METRIC_CASES / name).read_bytes() for name in files.split(" then ")]
    served = iter(pages)
    last = [pages[0]]

    def route() -> Reply:
        last[0] = next(served, last[0])
        return Reply(body=last[0])

    with serving({"/metrics": route}) as url:
        code, e = snapshot_json(capsys, inventory(tmp_path, url), "--window", "0.05")
    CASE_CHECKS[files](code, e)


def test_every_metrics_case_has_a_snapshot_check() -> None:
    named = {n for key in CASE_CHECKS for n in key.split(" then ")}
    assert named == {p.name for p in METRIC_CASES.iterdir()}


def test_table_shows_ranks_bounds_and_pool_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first_bucket = (METRIC_CASES / "itl-first-bucket.prom").read_bytes()
    dp2 = (METRIC_CASES / "dp2-engines.prom").read_bytes()
    with serving({"/metrics": lambda: Reply(body=dp2 + first_bucket)}) as url:
        code = main(
            [
                "snapshot",
                "--inventory",
                str(inventory(tmp_path, url, ", max_num_seqs: 6")),
                "--window",
                "0.05",
            ]
        )
    out = capsys.readouterr().out
    assert code == 4  # degraded: rank 1 is scheduler-bound (running = max_num_seqs, 1 waiting)
    assert "7/12" in out and "└ rank 1" in out and "4/6" in out
    assert "< 10 ms*" in out
    assert "pool from num_gpu_blocks×block_size" in out
    # Not a terminal: every column, one wide engine table, nothing clipped.
    assert "prefill tok/s" in out and "engines: speed" not in out and "…" not in out


def test_pool_from_the_inventory_is_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    body = (METRIC_CASES / "cache-config-none.prom").read_bytes()
    with serving({"/metrics": lambda: Reply(body=body)}) as url:
        path = inventory(tmp_path, url, ", kv_pool_tokens: 2493464")
        _, e = snapshot_json(capsys, path, "--window", "0")
    assert (e["kv_pool_tokens"], e["kv_pool_source"]) == (2_493_464, "inventory")
    assert e["kv_free_tokens"] == 2_493_464 / 2
    assert e["window_s"] is None and e["decode_tok_per_s"] is None


def test_snapshot_exits_3_on_a_critical_condition_in_the_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A full KV pool with requests waiting is critical: exit 3 (cron can act on it), while a
    source that did not answer is exit 1 (tested in test_snapshot.py)."""
    fake = FakeVllm(kv_cache_size_tokens=1_000_000)
    fake.set_gauges(running=8, waiting=5, kv_usage=0.99)
    routes = {"/metrics": lambda: Reply(body=fake.page()), "/v1/models": models_route()}
    with serving(routes) as url:
        code = main(["snapshot", "--inventory", str(inventory(tmp_path, url)), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 3
    assert doc["critical"] is True
    kv_alerts = [a for a in doc["alerts"] if a["rule"] == "kv.usage"]
    assert [a["severity"] for a in kv_alerts] == ["critical"]


def test_a_refused_page_promises_no_retry_in_a_one_shot_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = ["# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{i}"}} 1' for i in range(12_000)]
    body = ("\n".join(lines) + "\n").encode()
    with serving({"/metrics": lambda: Reply(body=body)}) as url:
        code = main(["snapshot", "--inventory", str(inventory(tmp_path, url)), "--window", "0.05"])
    out = capsys.readouterr().out
    assert code == 1 and "12,000 series" in out
    assert "again" not in out and "backing off" not in out, out
