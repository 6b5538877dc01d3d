"""``--endpoint URL`` (repeatable, ``--kind``, ``--api-key-env``): the monitor and ``snapshot``
on this machine and the servers named on the command line, without an inventory. Servers on
127.0.0.1: the llama.cpp stand-in (the REAL captured page) and a vLLM-shaped page."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from sparktop.cli import main
from sparktop.testing.http_stub import metrics_handler, serve_threaded
from sparktop.testing.llamacpp_stub import serve_llamacpp
from sparktop.testing.vllm_page import FakeVllm


@pytest.fixture
def two_servers() -> Iterator[tuple[str, str]]:
    """A llama-server and a vLLM server, each on its own loopback port."""
    fake = FakeVllm(engines=1, kv_cache_size_tokens=100_000)
    fake.set_gauges("0", running=3, waiting=1, kv_usage=0.25)
    with (
        serve_llamacpp("load") as llama,
        serve_threaded(metrics_handler(fake.page().decode())) as vllm,
    ):
        yield llama.url, vllm


def address(url: str) -> str:
    return url.removeprefix("http://")


def snapshot(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    code = main(["snapshot", *argv, "--json", "--window", "0"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.out + captured.err


def test_snapshot_reads_each_endpoint_named_by_its_address(
    two_servers: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    llama, vllm = two_servers
    with_secret = llama.replace("http://", "http://ops:hunter22@")
    code, doc, text = snapshot(capsys, "--endpoint", with_secret, "--endpoint", vllm + "/")
    engines = doc["engines"]
    assert [e["engine"] for e in engines] == [address(llama), address(vllm)]
    # No --kind: each page says which kind serves it.
    assert [e["kind"] for e in engines] == ["llamacpp", "vllm"]
    assert [e["state"] for e in engines] == ["ok", "ok"]
    assert engines[0]["waiting"] == 6 and (engines[1]["running"], engines[1]["waiting"]) == (3, 1)
    assert len(doc["nodes"]) == 1  # this machine, as the monitor without an inventory
    assert "hunter22" not in text and "ops:" not in text
    assert code != 2


def test_kind_decides_what_a_silent_server_is_told(capsys: pytest.CaptureFixture[str]) -> None:
    with serve_threaded(metrics_handler("", other=b"")) as url:
        for kind, hint in (("sglang", "--enable-metrics"), ("llamacpp", "--metrics")):
            code, doc, _ = snapshot(capsys, "--endpoint", url + "/nowhere", "--kind", kind)
            (engine,) = doc["engines"]
            assert engine["kind"] == kind and hint in engine["message"]
            assert code == 1  # a server that did not answer


def test_the_monitor_watches_this_machine_and_the_endpoints(
    monkeypatch: pytest.MonkeyPatch, two_servers: tuple[str, str]
) -> None:
    seen: dict[str, Any] = {}

    def run_tui(plan: Any, sources: Sequence[Any], alerts: Any = None, **_: Any) -> int:
        seen.update(plan=plan, sources=list(sources))
        return 0

    def not_probed(url: str = "") -> bool:
        raise AssertionError("--endpoint names the servers: 127.0.0.1:8000 is not tried")

    monkeypatch.setattr("sparktop.ui.app.run_tui", run_tui)
    monkeypatch.setattr("sparktop.sources.build.local_engine_answers", not_probed)
    llama, vllm = two_servers
    argv = ["--endpoint", llama, "--endpoint", vllm, "--kind", "llamacpp", "--api-key-env", "TOK"]
    assert main([*argv, "--force-tui"]) == 0
    plan = seen["plan"]
    assert [e.name for e in plan.engines] == [address(llama), address(vllm)]
    assert {(e.config.kind, e.config.api_key_env) for e in plan.engines} == {("llamacpp", "TOK")}
    assert plan.inventory is None and len(plan.nodes) == 1
    assert [(s.kind, s.name) for s in seen["sources"][1:]] == [
        ("engine", address(llama)),
        ("engine", address(vllm)),
    ]


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text("nodes: [{name: a, local: true}]\n")
    return path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--endpoint", "ftp://x"],
         "argument --endpoint: invalid URL 'ftp://x': expected http:// or https://"),
        (["--endpoint", "http://ops:hunter22@h:99999"], "port 99999 is out of range (1-65535)"),
        (["snapshot", "--endpoint", "http://h:1/?token=hunter22"],
         "expected a base URL without '?' or '#'"),
        (["snapshot", "--endpoint", "http://a:1", "--endpoint", "http://a:1/"],
         "--endpoint a:1 given twice"),
        (["--kind", "vllm"], "--kind applies to --endpoint (an inventory engine has kind:)"),
        (["snapshot", "-i", "{c}", "--api-key-env", "T"], "--api-key-env applies to --endpoint"),
        (["snapshot"], "one of the arguments -i/--inventory --endpoint is required"),
        (["--endpoint", "http://a:1", "--inventory", "{c}"], "--endpoint or --inventory, not both"),
        (["--endpoint", "http://a:1", "--api-key-env", "A-B"],
         "--api-key-env: invalid environment variable name 'A-B'"),
        (["--endpoint", "http://a:1", "--kind", "tgi"], "argument --kind: invalid choice: 'tgi'"),
        (["--endpoint", "http://a:1", "budget", "--prompt-tokens", "5"],
         "'sparktop budget' takes its own --endpoint after 'budget'"),
    ],
)  # fmt: skip
def test_refused_in_one_line_without_secrets(
    cluster: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    try:
        code = main([a.format(c=cluster) for a in argv])
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert expected in captured.err and "hunter22" not in captured.err
    assert "Traceback" not in captured.err


def test_the_plan_says_where_each_engine_was_named(tmp_path: Path) -> None:
    """Its hints name flags for an engine without an inventory (``--endpoint``, or the
    server found on the usual port), inventory keys for one in an inventory."""
    from sparktop.inventory import load_inventory
    from sparktop.inventory.endpoints import endpoint_engines
    from sparktop.plan import Plan

    url = "http://127.0.0.1:9"
    given = Plan.from_inventory(None, engines=endpoint_engines([url]))
    found = Plan.from_inventory(None, local_engine_url=url)
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(f"engines: [{{name: v, url: '{url}'}}]\n")
    listed = Plan.from_inventory(load_inventory(inventory))
    assert [p.engines[0].named_on for p in (given, found, listed)] == [
        "endpoint", "local", "inventory"
    ]  # fmt: skip
    assert [s._named_on for p in (given, found, listed) for s in p.engine_sources()] == [  # type: ignore[attr-defined]
        "endpoint", "local", "inventory"
    ]  # fmt: skip


def test_a_declared_kind_is_honoured_and_a_page_of_another_kind_said_on_the_row(
    two_servers: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--kind`` and an inventory's ``kind:`` are read as stated, not replaced by what the
    page looks like: a page of another kind leaves the row unreadable saying which."""
    llama, vllm = two_servers
    code, doc, _ = snapshot(capsys, "--endpoint", llama, "--kind", "vllm")
    (engine,) = doc["engines"]
    assert engine["kind"] == "vllm" and engine["state"] != "ok"
    assert "declared kind vllm but the page is llama.cpp's" in engine["message"]
    assert code == 1
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(
        "engines:\n"
        f"  - {{name: a, url: '{vllm}', kind: llamacpp}}\n"
        f"  - {{name: b, url: '{llama}', kind: llamacpp}}\n"
        f"  - {{name: c, url: '{vllm}'}}\n"
    )
    main(["snapshot", "-i", str(inventory), "--json", "--window", "0"])
    a, b, c = json.loads(capsys.readouterr().out)["engines"]
    assert a["kind"] == "llamacpp" and a["state"] != "ok"
    assert "declared kind llamacpp but the page is vLLM's" in a["message"]
    # The declared kind matching the page, or none declared: read as usual.
    assert (b["kind"], b["state"], c["kind"], c["state"]) == ("llamacpp", "ok", "vllm", "ok")
