"""``sparktop snapshot``'s exit statuses that scripts rely on, beside the ones tested with the
nodes (0 all well, 4 throttled, 1 did not answer: test_snapshot.py) and the engines (3
critical: test_snapshot_engines.py): an engine-only run on a CPU machine, and usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sparktop.cli import main
from sparktop.testing.http_stub import Reply, models_route
from sparktop.testing.vllm_page import FakeVllm
from tests.test_snapshot_engines import serving


def _idle_engine() -> dict[str, object]:
    fake = FakeVllm(kv_cache_size_tokens=1_000_000)
    fake.set_gauges(running=0, waiting=0, kv_usage=0.0)
    return {"/metrics": lambda: Reply(body=fake.page()), "/v1/models": models_route()}


def test_engine_only_inventory_exits_0_without_an_empty_nodes_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "cluster.yaml"
    with serving(_idle_engine()) as url:
        path.write_text(f"cluster: cpu\nengines:\n  - {{name: tiny, url: '{url}'}}\n")
        code = main(["snapshot", "--inventory", str(path), "--window", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "engines" in out and "tiny" in out
    assert "nodes" not in out and "SM MHz" not in out  # no header of a table with no rows


def test_a_local_node_without_nvidia_driver_is_degraded_not_unanswered(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU-only machine beside its engine (real vLLM on the CPU backend): the engine is fine,
    the node answered without GPU data. Exit 4 (degraded), not 1 ("did not answer")."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML here, whatever the machine
    path = tmp_path / "cluster.yaml"
    with serving(_idle_engine()) as url:
        path.write_text(
            "cluster: cpu\nnodes:\n  - {name: here, local: true}\n"
            f"engines:\n  - {{name: tiny, url: '{url}', nodes: [here]}}\n"
        )
        code = main(["snapshot", "--inventory", str(path), "--window", "0", "--json"])
        doc = json.loads(capsys.readouterr().out)
        table_code = main(["snapshot", "--inventory", str(path), "--window", "0"])
    out = capsys.readouterr().out
    assert code == table_code == 4
    (node,) = doc["nodes"]
    assert (node["state"], node["ok"]) == ("no NVIDIA driver", False)
    assert doc["engines"][0]["state"] == "ok" and doc["critical"] is False
    row = next(line for line in out.splitlines() if line.startswith("here"))
    assert "no NVIDIA driver" in row


@pytest.mark.parametrize(
    "args",
    [["--window", "-1"], ["--timeout", "0"], ["--nosuch"]],
    ids=["window", "timeout", "unknown-flag"],
)
def test_a_bad_option_or_inventory_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "ok.yaml").write_text(
        "cluster: t\nengines:\n  - {name: e, url: 'http://127.0.0.1:9'}\n"
    )
    path = tmp_path / "cluster.yaml"
    path.write_text("cluster: t\nnodes:\n  - {name: a, hots: x}\n")
    with pytest.raises(SystemExit) as raised:  # argparse's own exit for an unknown flag
        status = main(["snapshot", "--inventory", str(tmp_path / "ok.yaml"), *args])
        raise SystemExit(status)
    assert raised.value.code == 2
    assert main(["snapshot", "--inventory", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'hots'" in err and "Traceback" not in err
