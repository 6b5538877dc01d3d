"""A vLLM page without ``cache_config_info`` (the vLLM 0.8 excerpt in
``../shared/fixtures/metrics``) and no pool in the inventory: the pool is unknown, and every
output says where the figure would come from and why it is missing, never "pool from
unknown"."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.sources.engines.metrics import MetricsDeriver
from sparktop.sources.engines.reading import WANTED
from sparktop.sources.exposition.page import parse_page
from sparktop.testing.http_stub import metrics_handler, serve_threaded
from sparktop.ui.engine_views import load_groups
from sparktop.ui.views import ViewConfig
from tests.conftest import FIXTURES

PAGE = (FIXTURES / "metrics" / "vllm-0.8-v1-prodstack318-excerpt-a.prom").read_text()
WHERE = "no cache_config_info on the page (where vLLM states it: kv_cache_size_tokens"


@pytest.fixture
def url() -> Iterator[str]:
    with serve_threaded(metrics_handler(PAGE)) as base:
        yield base


def test_the_engine_block_says_where_the_pool_would_come_from() -> None:
    sample = MetricsDeriver("v").derive(parse_page(PAGE, WANTED), now_s=1.0, wall_s=time.time())
    text = "".join(t for group in load_groups(sample, ViewConfig(), None) for t, _ in group)
    assert "pool n/a (no cache_config_info on the page)" in text


def test_snapshot_and_budget_say_why_the_pool_is_unknown(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(f"engines: [{{name: v, url: '{url}'}}]\n")
    main(["snapshot", "--inventory", str(inventory)])
    out = capsys.readouterr().out
    assert "pool from unknown" not in out
    assert f"v: KV pool unknown: {WHERE}" in out and "set kv_pool_tokens in the" in out
    main(["budget", "--prompt-tokens", "100000", "--endpoint", url, "--json"])
    kv = json.loads(capsys.readouterr().out)["kv"]
    assert WHERE in kv["pool_tokens"]["reason"] and "pass --kv-pool" in kv["pool_tokens"]["reason"]
    assert kv["pool_used_pct"]["reason"] == "KV pool unknown (why: see KV pool)"


def test_with_endpoint_the_pool_reason_names_what_such_a_run_can_do(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--endpoint`` has no inventory: "set kv_pool_tokens in the inventory" pointed at a
    key the run has nowhere to set. No flag sets the pool: it says how to give one."""
    from sparktop.sources.engines.pool import COMMAND_LINE_FIX
    from sparktop.testing.llamacpp_stub import serve_llamacpp

    main(["snapshot", "--endpoint", url])
    out = capsys.readouterr().out
    assert f"KV pool unknown: {WHERE}" in out and COMMAND_LINE_FIX in out
    assert "in the inventory" not in out and "-i FILE" in out
    with serve_llamacpp("load") as llama:  # llama.cpp exports no pool at all
        main(["snapshot", "--endpoint", llama.url])
    out = capsys.readouterr().out
    assert "llama.cpp exports no KV-pool size (it is llama-server's -c" in out
    assert COMMAND_LINE_FIX in out and "in the inventory" not in out
