"""SGLang's KV pool and free part: ``sglang:max_total_num_tokens`` where exported, else
``num_used_tokens ÷ token_usage`` (both from the same page), else unknown — and free is
``pool − used``, or n/a: never the used count under another name.

The SGLang docs sample (``../shared/fixtures/metrics/sglang-docs-early-sample.prom``) has
``token_usage 0.28`` and ``num_used_tokens 123859`` and no ``max_total_num_tokens``: the pool
is 123,859 ÷ 0.28 ≈ 442,354 tokens and 318,495 of them are free."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from sparktop.cli import main
from sparktop.model import NA
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.exposition.page import parse_page
from sparktop.testing.http_stub import serve_threaded
from tests.conftest import FIXTURES

DOCS_SAMPLE = (FIXTURES / "metrics" / "sglang-docs-early-sample.prom").read_text()
POOL = round(123859 / 0.28)


def _derive(text: str) -> object:
    return MetricsDeriver("sg", kind="sglang").derive(
        parse_page(text, WANTED), now_s=1.0, wall_s=time.time()
    )


def test_the_docs_sample_pool_is_used_over_usage() -> None:
    s = _derive(DOCS_SAMPLE)
    assert (s.kv_pool_tokens, s.kv_pool_source) == (POOL, "num_used_tokens÷token_usage")
    assert s.kv_used_tokens == 123859
    assert s.kv_free_tokens == POOL - 123859


def _page(**gauges: float) -> str:
    return "".join(f'sglang:{k}{{model_name="m"}} {v}\n' for k, v in gauges.items())


def test_an_exported_pool_wins_over_the_derived_one() -> None:
    s = _derive(_page(max_total_num_tokens=500000, num_used_tokens=123859, token_usage=0.28))
    assert (s.kv_pool_tokens, s.kv_pool_source) == (500000, "max_total_num_tokens")
    assert s.kv_free_tokens == 500000 - 123859


@pytest.mark.parametrize(
    "gauges",
    [
        {"num_used_tokens": 0, "token_usage": 0.0},  # idle: nothing to divide
        {"num_used_tokens": 123859},  # no usage gauge
        {"token_usage": 0.28},  # no used count
    ],
    ids=["idle", "no-usage", "no-used"],
)
def test_without_a_pool_free_is_unknown_not_the_used_count(gauges: dict[str, float]) -> None:
    s = _derive(_page(num_running_reqs=1, **gauges))
    assert isinstance(s.kv_pool_tokens, NA) and isinstance(s.kv_free_tokens, NA)
    assert s.kv_free_tokens.reason.startswith("KV pool unknown: no sglang:max_total_num_tokens")


class _SGLang(BaseHTTPRequestHandler):
    def _send(self, status: int, body: str, ctype: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/metrics":
            self._send(200, DOCS_SAMPLE, "text/plain; version=0.0.4")
        elif self.path == "/v1/models":
            models = {"data": [{"id": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 131072}]}
            self._send(200, json.dumps(models), "application/json")
        else:
            self._send(404, "not found", "text/plain")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def sglang_url() -> Iterator[str]:
    with serve_threaded(_SGLang) as url:
        yield url


def test_snapshot_json_of_the_docs_sample(
    sglang_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(f"engines: [{{name: sg, url: '{sglang_url}', kind: sglang}}]\n")
    main(["snapshot", "--inventory", str(inventory), "--json"])
    (engine,) = json.loads(capsys.readouterr().out)["engines"]
    assert engine["kv_pool_tokens"] == POOL and engine["kv_free_tokens"] == POOL - 123859


def test_budget_endpoint_uses_the_free_part_not_the_used_count(
    sglang_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["budget", "--prompt-tokens", "100000", "--endpoint", sglang_url, "--json"]
    main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert doc["kv"]["free_tokens_now"]["value"] == POOL - 123859
    assert doc["kv"]["free_tokens_now"]["origin"] == "from the server"


def _budget_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(["budget", "--prompt-tokens", "100000", *argv, "--json"])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_budget_endpoint_takes_no_limit_from_the_default_profile(
    sglang_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default profile (DeepSeek on 4 Sparks) does not describe this SGLang Llama-8B: its
    max_num_seqs 8 and max_num_batched_tokens 8,192 are another setup's, so both are unknown,
    and the live load of 162 running is not capped at 8."""
    doc = _budget_json(["--endpoint", sglang_url], capsys)
    for limit in (doc["kv"]["max_num_seqs"], doc["batched"]["max_num_batched_tokens"]):
        assert limit["value"] is None and limit["origin"] == "from the server"
        assert limit["reason"].startswith(
            "not exported by the server, and the default profile is another setup's; pass --"
        )
    assert doc["send_now"]["concurrency"]["value"] == 162 + 1
    assert doc["ceiling"]["max_model_len"]["value"] == 131072  # /v1/models says it
    assert doc["kv"]["pool_tokens"]["value"] == POOL  # the page says it
    main(["budget", "--prompt-tokens", "100000", "--endpoint", sglang_url])
    out = capsys.readouterr().out
    assert "[profile] max" not in out
    assert "max_num_seqs              no data (not exported by the server" in out
    assert "--max-num-seqs) run at once" not in out


def test_budget_endpoint_says_the_default_profile_s_times_are_another_setup_s(
    sglang_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The TTFT a DeepSeek-on-4-Sparks sweep gives is not this Llama-8B's: said beside the
    times, in the warnings and in the JSON; a profile named with --profile is taken as this
    server's."""
    doc = _budget_json(["--endpoint", sglang_url], capsys)
    assert doc["profile"]["describes_server"] is False
    (warning,) = [w for w in doc["warnings"] if "another setup" in w]
    assert "4 x DGX Spark, DeepSeek V4.1 Flash 1017" in warning and "--profile" in warning
    main(["budget", "--prompt-tokens", "100000", "--endpoint", sglang_url])
    out = capsys.readouterr().out
    assert "Time (profile 4x-spark-dsv41-flash-1017: another setup's, not this server's" in out
    named = ["--endpoint", sglang_url, "--profile", "4x-spark-dsv41-flash-1017"]
    doc = _budget_json(named, capsys)
    assert doc["profile"]["describes_server"] is True
    assert not any("another setup" in w for w in doc["warnings"])


def test_budget_endpoint_with_a_named_profile_or_flags_takes_their_limits(
    sglang_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    named = _budget_json(
        ["--endpoint", sglang_url, "--profile", "4x-spark-dsv41-flash-1017"], capsys
    )
    assert named["kv"]["max_num_seqs"] == {"value": 8, "origin": "from the profile", "reason": None}
    given = _budget_json(["--endpoint", sglang_url, "--max-num-seqs", "48"], capsys)
    assert given["kv"]["max_num_seqs"] == {"value": 48, "origin": "given", "reason": None}
    assert given["send_now"]["concurrency"]["value"] == 48


def test_budget_without_an_endpoint_is_the_default_profile_s_setup(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = _budget_json([], capsys)
    assert doc["kv"]["max_num_seqs"]["origin"] == "from the profile"


async def test_a_static_page_reads_the_same_in_the_monitor_and_in_snapshot(
    sglang_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing moves on the docs sample: after the first scrape the window is empty, and the
    monitor showed `TTFT p50 n/a` (no reason) where snapshot showed `> 30 s*`. One derivation
    (the lifetime figures, marked), one text; an n/a says why."""
    from sparktop.inventory import load_inventory
    from sparktop.plan import Plan
    from sparktop.ui.engine_views import rate_groups

    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(f"engines: [{{name: sg, url: '{sglang_url}', kind: sglang}}]\n")
    (source,) = Plan.from_inventory(load_inventory(inventory)).engine_sources()
    try:
        for _ in range(3):  # as the monitor polls: the second and third have a window
            sample = await source.sample()
    finally:
        await source.aclose()
    assert sample.window_s is not None and "ttft_p50" in sample.since_start
    monitor = "".join(text for group in rate_groups(sample) for text, _ in group)
    assert "TTFT p50 > 30 s* p95 > 30 s*" in monitor and "ITL p50 93 ms*" in monitor
    assert "prompt n/a (not exported)" in monitor and "* since server start" in monitor
    await asyncio.to_thread(main, ["snapshot", "--inventory", str(inventory)])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("sg "))
    assert "> 30 s*   > 30 s*   93 ms*" in row  # TTFT p50, p95, ITL p50: the same figures
