"""``kind: llamacpp`` end to end against a loopback llama-server stand-in serving the REAL
captured pages (``fixtures/real/llama-server-tiny-*.prom``) and README-shaped ``/props``,
``/v1/models`` and ``/tokenize``: ``snapshot`` (text and JSON) and ``budget --endpoint``
(the exact count, and a ``/tokenize`` answer of no tokens as an error of the endpoint)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest
import yaml

from sparktop.cli import main
from sparktop.errors import RuntimeFailure
from sparktop.model import NA
from sparktop.sources.engines.kinds import KINDS
from sparktop.sources.engines.slots import read_slots
from sparktop.sweep.profiles.builtin import FOLDER
from sparktop.sweep.runner.bench_prompts import PromptMaker, _tokenize_ids, endpoint_maker
from sparktop.sweep.tokens.exact_tokens import EndpointTokenizer
from sparktop.testing.http_stub import serve_threaded
from sparktop.testing.llamacpp_stub import (
    N_CTX_SLOT,
    TOTAL_SLOTS,
    LlamaServer,
    real_page,
    serve_llamacpp,
    token_ids,
)

SEED = "4x-spark-dsv41-flash-1017"


@pytest.fixture
def llama_profile(tmp_path: Path) -> str:
    """The seed profile's figures with an ``engine:`` naming llama.cpp: the expected row's
    figures come from it (a profile that names vLLM gives a llama.cpp engine no row)."""
    doc = yaml.safe_load((FOLDER / f"{SEED}.yaml").read_text(encoding="utf-8"))
    doc["engine"] = "llama.cpp (the 4x seed's figures, for the tests)"
    path = tmp_path / "llamacpp-profile.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return str(path)


@pytest.fixture
def llama() -> Iterator[LlamaServer]:
    with serve_llamacpp("load") as server:
        yield server


def _inventory(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(f"cluster: test\nengines:\n  - {{name: llama, url: '{url}', kind: llamacpp}}\n")
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_snapshot_json_reads_the_real_page_and_props(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, llama: LlamaServer
) -> None:
    _, out, _ = _run(
        capsys, "snapshot", "--inventory", str(_inventory(tmp_path, llama.url)), "--json"
    )
    row = json.loads(out)["engines"][0]
    assert (row["kind"], row["state"], row["model"]) == ("llamacpp", "ok", "tiny-llama-f32.gguf")
    assert (row["running"], row["waiting"]) == (2, 6)  # requests_processing, requests_deferred
    assert (row["max_model_len_tokens"], row["max_num_seqs"]) == (N_CTX_SLOT, TOTAL_SLOTS)
    assert row["ttft_p50_s"] is None and row["itl_p50_s"] is None
    assert row["missing"]["ttft_p50_s"] == "llama.cpp exports no latency histograms"
    assert row["missing"]["itl_p50_s"] == "llama.cpp exports no latency histograms"
    assert row["prefill_tok_per_s"] is not None  # a rate over snapshot's window, not n/a


def test_snapshot_text_has_the_engine_row_and_no_vllm_complaint(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, llama: LlamaServer
) -> None:
    _, out, err = _run(capsys, "snapshot", "--inventory", str(_inventory(tmp_path, llama.url)))
    row = next(line for line in out.splitlines() if line.startswith("llama "))
    assert row.split()[1:3] == ["2/2", "6"]  # running of max_num_seqs (from /props), waiting
    assert "no vLLM or SGLang metrics" not in out + err
    assert "KV pool unknown: llama.cpp exports no KV-pool size" in out


def test_budget_endpoint_counts_exactly_with_llamacpps_request_shape(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, llama: LlamaServer
) -> None:
    text = "the quick brown fox jumps over a lazy dog " * 333  # 2,997 words
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    code, out, err = _run(
        capsys, "budget", "--file", str(tmp_path / "p.txt"), "--endpoint", llama.url, "--json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["tokens"]["method"] == "exact (/tokenize)"
    assert doc["tokens"]["prompt_tokens"] == len(token_ids(text))
    assert llama.tokenize_bodies and all(set(b) == {"content"} for b in llama.tokenize_bodies)
    assert doc["ceiling"]["max_model_len"]["value"] == N_CTX_SLOT
    assert "tokens" not in err


def test_budget_with_the_wrong_kind_says_the_endpoint_answered_no_tokens(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, llama: LlamaServer
) -> None:
    (tmp_path / "p.txt").write_text("word " * 600, encoding="utf-8")
    argv = ["budget", "--file", str(tmp_path / "p.txt"), "--endpoint", llama.url]
    code, out, err = _run(capsys, *argv, "--kind", "vllm")
    assert code == 1
    assert (
        "the server's /tokenize returned no tokens for 3,000 characters: wrong request shape?"
        in err
    )
    assert "no text to count" not in out + err
    assert "estimated" in out  # the count falls back to the estimate, said so
    assert llama.tokenize_bodies[-1] == {"prompt": "word " * 600}


def test_kind_without_endpoint_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "budget", "--prompt-tokens", "100", "--kind", "llamacpp")
    assert code == 2 and "--kind applies to --endpoint" in err


class _Empty(BaseHTTPRequestHandler):
    """A server whose /tokenize answers no tokens (and a count of 0) to any request."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps({"tokens": [], "count": 0, "max_model_len": 4096}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_tokens_for_text_is_an_error_of_the_endpoint_for_every_kind(kind: str) -> None:
    with serve_threaded(_Empty) as url:
        tokenizer = EndpointTokenizer(url, kind=kind, timeout_s=5)
        try:
            with pytest.raises(RuntimeFailure, match="returned no tokens for 11 characters"):
                tokenizer("hello world")
            assert tokenizer("   ") == 0  # no text: no tokens is the right answer
        finally:
            tokenizer.close()


def _page_with_props(props: bytes) -> type[BaseHTTPRequestHandler]:
    """The real load page at /metrics and ``props`` (200, as sent) at /props."""

    class _Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = real_page("load").encode() if self.path == "/metrics" else props
            self.send_response(200 if self.path in ("/metrics", "/props") else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return _Handler


def test_a_garbled_props_leaves_the_limits_unknown_with_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with serve_threaded(_page_with_props(b"<html>proxy login</html>")) as url:
        _, out, _ = _run(
            capsys, "snapshot", "--inventory", str(_inventory(tmp_path, url)), "--json"
        )
    row = json.loads(out)["engines"][0]
    assert (row["state"], row["running"], row["waiting"]) == ("ok", 2, 6)
    assert row["max_num_seqs"] is None
    assert row["missing"]["max_num_seqs"].startswith(
        "GET /props answered no JSON: not llama.cpp's /props?"
    )


async def test_the_sweeps_prompts_are_tokenized_in_llamacpps_shape(llama: LlamaServer) -> None:
    """The sweep's exact prompts on llama.cpp: ``{"content"}`` asked (vLLM's ``{"prompt"}``
    got ``{"tokens": []}``: "the filler text tokenized to almost nothing")."""
    async with httpx.AsyncClient(base_url=llama.url, trust_env=False) as client:
        maker = await endpoint_maker(client)
        assert isinstance(maker, PromptMaker) and maker.exact
        prompt = await maker.make(300, "n1")
    assert prompt.tokens == 300 and len(prompt.body) == 300
    assert all("content" in body and "prompt" not in body for body in llama.tokenize_bodies)


async def test_a_tokenize_answering_no_ids_for_text_fails_the_sweeps_prompts() -> None:
    with serve_threaded(_Empty) as url:
        async with httpx.AsyncClient(base_url=url, trust_env=False) as client:
            with pytest.raises(RuntimeFailure, match="returned no tokens for 5 characters"):
                await _tokenize_ids(client, "hello", False, KINDS["vllm"].tokenize)


@pytest.mark.parametrize(
    ("slots", "why"),
    [("disabled", "GET /slots: HTTP 501"), ("garbled", "GET /slots answered no JSON")],
)
def test_a_disabled_or_garbled_slots_leaves_the_prompt_length_unknown(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    llama: LlamaServer,
    slots: str,
    why: str,
    llama_profile: str,
) -> None:
    llama.slots = slots
    inventory = str(_inventory(tmp_path, llama.url))
    _, out, err = _run(
        capsys, "snapshot", "-i", inventory, "--profile", llama_profile, "--window", "5", "--json"
    )
    row = json.loads(out)["engines"][0]
    assert row["state"] == "ok", err  # the engine row stands; only the prompt length is gone
    assert row["mean_prompt_tokens"] is None
    assert row["missing"]["mean_prompt_tokens"].startswith(why)
    assert "prompt lengths unknown" in row["expected"]["missing"]


def test_busy_slots_give_the_mean_prompt_length_and_the_expected_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, llama: LlamaServer, llama_profile: str
) -> None:
    inventory = str(_inventory(tmp_path, llama.url))
    _, out, _ = _run(
        capsys, "snapshot", "-i", inventory, "--profile", llama_profile, "--window", "5", "--json"
    )
    row = json.loads(out)["engines"][0]
    with httpx.Client(base_url=llama.url) as client:
        busy = [s for s in client.get("/slots").json() if s["is_processing"]]
    prompts = [s["n_prompt_tokens"] - s["next_token"]["n_decoded"] for s in busy]
    assert row["mean_prompt_tokens"] == sum(prompts) / len(prompts)  # context less generated
    block = row["expected"]
    assert block["missing"] is None, block
    assert block["mean_prompt_tokens"] == row["mean_prompt_tokens"]
    ttft = block["figures"]["ttft_s"]
    assert ttft["live_missing"] == "llama.cpp exports no latency histograms"
    # The window's load is the busy slots' (the stub's prompts lie below this profile's rows).
    assert f"× {row['mean_prompt_tokens']:,.0f} prompt tokens" in block["load"]


def _reason(value: object) -> str:
    assert isinstance(value, NA), value
    return value.reason


def test_slots_prompt_is_the_context_less_the_generated_tokens_once_decoding() -> None:
    def slot(busy: bool, held: int, decoded: int) -> dict[str, object]:
        # llama-server's shape: next_token is a one-element list (nlohmann's {{…}}).
        nxt = [{"has_next_token": busy, "n_remain": -1, "n_decoded": decoded}]
        return {"id": 0, "is_processing": busy, "n_prompt_tokens": held, "next_token": nxt}

    answer = [slot(True, 900, 100), slot(True, 700, 300), slot(True, 50, 0), slot(False, 9, 9)]
    assert read_slots(answer) == ((900 - 100) + (700 - 300)) / 2  # the prefilling one left out
    assert "no busy slot past its prompt" in _reason(read_slots([slot(True, 50, 0)]))
    assert "no busy slot" in _reason(read_slots([slot(False, 900, 100)]))
    assert "no JSON list" in _reason(read_slots({"error": "x"}))


@pytest.mark.parametrize(
    ("state", "name", "processing"),
    [("idle", "llama-server-tiny-idle.prom", 0.0), ("load", "llama-server-tiny-load.prom", 2.0)],
)
def test_the_stub_serves_each_captured_page_verbatim(
    state: str, name: str, processing: float
) -> None:
    """Every test above reads the real llama-server pages through the stub: the stub's page
    is the capture byte for byte, and prometheus_client reads the 15 ``llamacpp:*`` families
    with the running count the capture holds."""
    from prometheus_client.parser import text_string_to_metric_families

    from tests.conftest import FIXTURES

    text = (FIXTURES / "real" / name).read_text(encoding="utf-8")
    assert real_page(state) == text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert len([n for n in families if n.startswith("llamacpp:")]) == 15
    assert families["llamacpp:requests_processing"].samples[0].value == processing


def test_a_profile_measured_on_vllm_gives_a_llamacpp_engine_no_expected_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, llama: LlamaServer
) -> None:
    """The seed profile names a vLLM build: its figures say nothing of a llama.cpp server,
    whatever model it serves, so the row says why instead of comparing."""
    inventory = str(_inventory(tmp_path, llama.url))
    _, out, _ = _run(
        capsys, "snapshot", "-i", inventory, "--profile", SEED, "--window", "5", "--json"
    )
    block = json.loads(out)["engines"][0]["expected"]
    assert block["missing"] == (
        "no expected row: the profile measured a vLLM engine; this engine is llama.cpp"
    ), block
