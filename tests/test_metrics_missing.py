"""A vLLM page that carries vllm: samples but none of the families sparktop reads (vLLM 0.10.0
exported ten such samples) names what is missing, instead of "no vLLM or SGLang metrics on the
page (0 other samples)"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.testing.http_stub import serve_threaded

PAGE = "".join(
    f"# HELP vllm:{name} {name}\n# TYPE vllm:{name} counter\n"
    f'vllm:{name}{{model_name="m",finished_reason="stop"}} {i}.0\n'
    for i, name in enumerate(
        ("request_success_total", "request_params_n_total", "lora_requests_info_total"), 1
    )
)


class _OldVllm(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body, ctype = (PAGE, "text/plain; version=0.0.4") if self.path == "/metrics" else (
            json.dumps({"data": []}), "application/json")  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    with serve_threaded(_OldVllm) as base:
        yield base


def test_snapshot_names_the_missing_families(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(f"engines: [{{name: old, url: '{url}'}}]\n")
    main(["snapshot", "--inventory", str(inventory), "--json"])
    (engine,) = json.loads(capsys.readouterr().out)["engines"]
    assert engine["state"] == "unavailable"
    assert engine["message"] == (
        "3 vllm metric families on the page (vllm:lora_requests_info_total, "
        "vllm:request_params_n_total, vllm:request_success_total) but none sparktop needs: "
        "no vllm:num_requests_running, vllm:num_requests_waiting, "
        "vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc"
    )


COUNTERS_ONLY = "".join(
    f"# HELP vllm:{name} {name}\n# TYPE vllm:{name} counter\n"
    f'vllm:{name}{{model_name="m"}} {i * 100}.0\n'
    for i, name in enumerate(("generation_tokens_total", "prompt_tokens_total"), 1)
)


class _NoGauges(_OldVllm):
    def do_GET(self) -> None:
        body = COUNTERS_ONLY if self.path == "/metrics" else json.dumps({"data": []})
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())


def test_a_page_with_counters_but_no_load_gauge_is_degraded_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Counters sparktop reads, but not one of running, waiting or KV usage: the row would be
    all n/a beside 'ok'; it is degraded and says which gauges are not exported."""
    with serve_threaded(_NoGauges) as base:
        inventory = tmp_path / "cluster.yaml"
        inventory.write_text(f"engines: [{{name: old, url: '{base}'}}]\n")
        main(["snapshot", "--inventory", str(inventory), "--json"])
    (engine,) = json.loads(capsys.readouterr().out)["engines"]
    assert engine["state"] == "degraded" and engine["ok"] is False, engine
    assert engine["message"].startswith(
        "no load gauge on the page (vllm:num_requests_running, vllm:num_requests_waiting, "
        "vllm:kv_cache_usage_perc not exported"
    ), engine["message"]
