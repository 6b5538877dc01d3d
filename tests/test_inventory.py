"""Inventory loading: every case in cases/inventory/, a full round trip, and hostile input."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from sparktop.errors import UserError
from sparktop.inventory import (
    AlertThresholds,
    EngineConfig,
    Inventory,
    NodeConfig,
    SshSettings,
    is_valid_host,
    load_inventory,
    parse_inventory,
)
from tests.conftest import CASES

INVENTORY_CASES = CASES / "inventory"

FULL = """\
cluster: dspark-4x                    # display name
profile: 4x-spark-dsv41-flash-1017
interval_s: 1.0
ssh:
  user: ops
  port: 22
  connect_timeout_s: 5
  command_timeout_s: 5
  identity_file: ~/.ssh/id_ed25519
  known_hosts: ~/.ssh/known_hosts
  config: ~/.ssh/config
nodes:
  - {name: spark-1, host: 192.168.10.10}
  - {name: spark-2, host: spark-2}    # an alias from ~/.ssh/config
  - {name: spark-3, host: 127.0.0.1, port: 2203, user: root, command_timeout_s: 2.5}
  - {name: here, local: true}
engines:
  - name: dsv41
    url: http://192.168.10.10:8015/
    nodes: [spark-1, spark-2]
    api_key_env: VLLM_API_KEY
    max_num_seqs: 8
    max_num_batched_tokens: 8192
    max_model_len: 1048576
    kv_pool_tokens: 11434628
  - {name: side, url: "https://side.example:8443", kind: sglang}
alerts:
  clock_drop_pct: 10
  temperature_c: 85
  kv_usage_pct: 90
  expected_deficit_pct: 25
  hold_s: 10
keys:
  app.pause: p
"""


def error_of(path: Path) -> str:
    with pytest.raises(UserError) as info:
        load_inventory(path)
    message = str(info.value)
    assert "\n" not in message
    assert "Traceback" not in message
    assert message.startswith(f"{path}:")
    return message


def test_every_inventory_case_is_covered() -> None:
    names = {p.name for p in INVENTORY_CASES.glob("*.yaml")}
    covered = {
        "typo-key.yaml",
        "duplicate-names.yaml",
        "tab-indent.yaml",
        "shell-in-host.yaml",
        "engine-unknown-node.yaml",
    }
    assert names == covered


def test_typo_key_names_line_path_and_suggestion() -> None:
    path = INVENTORY_CASES / "typo-key.yaml"
    message = error_of(path)
    # `hots:` is on line 6, column 5.
    assert message.startswith(f"{path}:6:5: nodes[1]: unknown key 'hots' (did you mean 'host'?)")
    assert "nodes[1].host: field required" in message


def test_duplicate_node_names() -> None:
    path = INVENTORY_CASES / "duplicate-names.yaml"
    message = error_of(path)
    assert message.startswith(f"{path}:4:")
    assert "nodes[1].name: duplicate node name 'spark-1'" in message


def test_tab_indent_gives_yaml_line_and_column() -> None:
    path = INVENTORY_CASES / "tab-indent.yaml"
    message = error_of(path)
    assert message.startswith(f"{path}:3:1: YAML error:")
    assert "tab" in message


def test_shell_metacharacters_in_host_are_rejected() -> None:
    path = INVENTORY_CASES / "shell-in-host.yaml"
    message = error_of(path)
    assert message.startswith(f"{path}:3:")
    assert "nodes[0].host: invalid host name" in message


def test_engine_naming_unknown_node() -> None:
    path = INVENTORY_CASES / "engine-unknown-node.yaml"
    message = error_of(path)
    assert message.startswith(f"{path}:5:")
    assert "engines[0].nodes[1]: unknown node 'spark-9'" in message


def test_full_inventory_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(FULL)
    inv = load_inventory(path)
    home = Path("~").expanduser()
    assert inv.source_path == path
    assert inv.cluster == "dspark-4x"
    assert inv.profile == "4x-spark-dsv41-flash-1017"
    assert inv.interval_s == 1.0
    assert inv.ssh == SshSettings(
        user="ops",
        port=22,
        connect_timeout_s=5,
        command_timeout_s=5,
        identity_file=home / ".ssh/id_ed25519",
        known_hosts=home / ".ssh/known_hosts",
        config=home / ".ssh/config",
    )
    assert [n.name for n in inv.nodes] == ["spark-1", "spark-2", "spark-3", "here"]
    assert inv.node("here").local and inv.node("here").host is None
    assert inv.node("spark-2").host == "spark-2"
    engine = inv.engines[0]
    assert engine == EngineConfig(
        name="dsv41",
        url="http://192.168.10.10:8015",
        nodes=("spark-1", "spark-2"),
        api_key_env="VLLM_API_KEY",
        max_num_seqs=8,
        max_num_batched_tokens=8192,
        max_model_len=1_048_576,
        kv_pool_tokens=11_434_628,
    )
    assert inv.engines[1].kind == "sglang"
    assert inv.alerts == AlertThresholds()
    assert inv.keys == {"app.pause": "p"}
    # Round trip: dumping and validating again gives the same inventory.
    again = Inventory.model_validate(inv.model_dump())
    assert again == inv.model_copy(update={"source_path": None, "profile_at": None})


def test_ssh_for_merges_node_overrides() -> None:
    inv = parse_inventory(FULL, "cluster.yaml")
    merged = inv.ssh_for(inv.node("spark-3"))
    assert (merged.port, merged.user, merged.command_timeout_s) == (2203, "root", 2.5)
    assert merged.connect_timeout_s == 5 and merged.known_hosts == inv.ssh.known_hosts
    assert inv.ssh_for(inv.node("spark-1")) == inv.ssh
    with pytest.raises(KeyError):
        inv.node("spark-9")


def test_models_are_frozen() -> None:
    inv = parse_inventory(FULL, "cluster.yaml")
    with pytest.raises(pydantic.ValidationError):
        inv.nodes[0].host = "elsewhere"


def test_defaults_with_one_local_node() -> None:
    inv = parse_inventory("nodes: [{name: here, local: true}]", "x.yaml")
    assert inv.cluster == "sparktop" and inv.interval_s == 1.0 and inv.engines == ()
    assert inv.ssh == SshSettings() and inv.ssh.port is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("clustr: x\nnodes: [{name: a, local: true}]", "1:1: unknown key 'clustr' (did you mean"),
        ("ssh: {prt: 2}\nnodes: [{name: a, local: true}]", "1:7: ssh: unknown key 'prt'"),
        ("nodes: [{name: a, host: x, port: 70000}]", "nodes[0].port: input should be less"),
        ("nodes: [{name: a, local: true, host: x}]", "nodes[0].host: a 'local: true' node"),
        ("nodes: [{name: a b, local: true}]", "nodes[0].name: invalid name"),
        ("nodes: [{name: a, host: -oProxyCommand=x}]", "nodes[0].host: invalid host name"),
        ("nodes: [{name: a, host: 'a$(id)'}]", "nodes[0].host: invalid host name"),
        ("nodes: [{name: a, host: x, user: 'r;id'}]", "nodes[0].user: invalid user name"),
        ("engines: [{name: e, url: ftp://x}]", "engines[0].url: invalid URL"),
        ("engines: [{name: e, url: 'http://x', api_key_env: 'A-B'}]", "api_key_env"),
        ("engines: [{name: e, url: 'http://x', kind: tgi}]", "engines[0].kind:"),
        ("engines: [{name: e, url: 'http://x'}, {name: e, url: 'http://y'}]", "duplicate engine"),
        ("interval_s: 0.01\nnodes: [{name: a, local: true}]", "interval_s: input should be"),
        ("nodes: []", "no nodes and no engines"),
        ("nodes: [{name: a, local: true}]\nnodes: []", "duplicate key 'nodes' (first at line 1)"),
        ("- a", "must be a mapping"),
        ("", "the inventory is empty"),
        ("a: [1\n", "YAML error"),
        ("a: 1\n---\nb: 2\n", "YAML error"),
        ("source_path: /x\nnodes: [{name: a, local: true}]", "unknown key 'source_path'"),
        ('nodes: [{name: a, host: "x\\ny"}]', "x␊y"),  # the line break shown as a symbol
        ("alerts: {temperature_c: hot}\nnodes: [{name: a, local: true}]", "alerts.temperature_c"),
        # keys: ids are checked here, before any UI (they were a notice on the screen)
        (
            "nodes: [{name: a, local: true}]\nkeys:\n  app.pause: space\n  app.puase: x\n",
            "4:3: keys: unknown binding id 'app.puase' (did you mean 'app.pause'?)",
        ),
        (
            "nodes: [{name: a, local: true}]\nkeys: {explode: x}",
            "2:8: keys: unknown binding id 'explode' (the monitor's ? screen lists the ids)",
        ),
        # keys: values are keys Textual can deliver (it binds any string, silently dead)
        (
            "nodes: [{name: a, local: true}]\nkeys:\n  app.pause: space\n  app.help: ctrl+zz\n",
            "4:13: keys.app.help: invalid key 'ctrl+zz': 'zz' is not a key name",
        ),
        (
            "nodes: [{name: a, local: true}]\nkeys: {app.help: 'h,'}",
            "2:18: keys.app.help: invalid key 'h,': an empty key (the , key is named comma)",
        ),
        (
            "nodes: [{name: a, local: true}]\nkeys: {app.help: shift+ctrl+h}",
            "keys.app.help: invalid key 'shift+ctrl+h': Textual lists modifiers in order: "
            "write 'ctrl+shift+h'",
        ),
        (
            "nodes: [{name: a, local: true}]\nkeys: {app.help: cmd+h}",
            "keys.app.help: invalid key 'cmd+h': 'cmd' is not a modifier",
        ),
        (
            "nodes: [{name: a, local: true}]\nkeys: {app.help: 'ctrl+?'}",
            "write 'ctrl+question_mark'",
        ),
    ],
)
def test_bad_inventories_fail_with_one_line(text: str, expected: str) -> None:
    with pytest.raises(UserError) as info:
        parse_inventory(text, "c.yaml")
    message = str(info.value)
    assert message.startswith("c.yaml:")
    assert expected in message
    assert "\n" not in message


def test_yaml_merge_keys_and_anchors_are_honoured() -> None:
    text = "nodes:\n  - &n {name: a, host: h1, port: 2201}\n  - {<<: *n, name: b}\n"
    inv = parse_inventory(text, "c.yaml")
    assert inv.node("b").host == "h1" and inv.node("b").port == 2201


def test_file_errors_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        load_inventory(tmp_path / "missing.yaml")
    with pytest.raises(UserError, match="is a directory"):
        load_inventory(tmp_path)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UserError, match="not UTF-8"):
        load_inventory(binary)


@pytest.mark.parametrize(
    "host", ["10.0.0.11", "::1", "fe80::1%eth0", "spark-2", "gpu_node.lab.example", "h"]
)
def test_valid_hosts(host: str) -> None:
    assert is_valid_host(host)
    assert NodeConfig(name="n", host=host).host == host


@pytest.mark.parametrize(
    "host",
    ["10.0.0.11; rm -rf ~", "-oProxyCommand=sh", "a b", "a..b", "x" * 300, "$(id)", "`id`", "h\n"],
)
def test_invalid_hosts(host: str) -> None:
    assert not is_valid_host(host)


@pytest.mark.parametrize(
    "name",
    [
        "typo-key.yaml",
        "duplicate-names.yaml",
        "tab-indent.yaml",
        "shell-in-host.yaml",
        "engine-unknown-node.yaml",
    ],
)
def test_cli_prints_one_line_and_exits_2(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from sparktop.cli import main

    path = INVENTORY_CASES / name
    assert main(["snapshot", "--inventory", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"sparktop: error: {path}:")
    assert "Traceback" not in captured.err
