"""Inventory files an operator (or an attacker) might hand sparktop: each is one clear line
and exit 2, fast and in bounded memory — never a traceback, a hang or a swollen process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sparktop.errors import UserError
from sparktop.inventory import is_valid_host, load_inventory, parse_inventory
from sparktop.inventory.loader import MAX_BYTES
from sparktop.plan import Plan
from sparktop.yamltree import MAX_VALUES

LOCAL = "nodes: [{name: a, local: true}]\n"


def billion_laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n" + LOCAL


def key_bomb(levels: int = 9) -> str:
    """The whole alias tree inside a *key*: building or printing that key would explode."""
    parts = ["&k0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        parts.append(f"&k{i} [" + ", ".join([f"*k{i - 1}"] * 9) + "]")
    return "? [" + ", ".join(parts) + "]\n: 1\n" + LOCAL


def message_of(text: str) -> str:
    with pytest.raises(UserError) as info:
        parse_inventory(text, "c.yaml")
    message = str(info.value)
    assert message.startswith("c.yaml:") and "\n" not in message
    return message


def test_billion_laughs_stops_at_the_value_budget() -> None:
    message = message_of(billion_laughs())
    assert f"more than {MAX_VALUES:,} values" in message and "aliases" in message


def test_alias_bomb_inside_a_key_is_never_built() -> None:
    assert "a key must be text, not a list or mapping" in message_of(key_bomb())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nodes: [{name: a, host: !!python/object/apply:os.system [id]}]",
         "nodes[0].host: unsupported YAML tag '!!python/object/apply:os.system'"),
        ("nodes: [{name: a, host: !!python/name:os.system x}]", "YAML error"),
        ("!!set {a, b}\n", "unsupported YAML tag '!!set'"),
        ("? [a, b]\n: 1\n" + LOCAL, "a key must be text"),
        ("1: x\n" + LOCAL, "key 1 must be text (quote it)"),
        ("hello\n", "must be a mapping of keys (cluster:, nodes:, …), got plain text"),
        ("nodes: {name: a, local: true}", "nodes: expected a list, got a mapping"),
        ("nodes: [[a]]", "nodes[0]: expected a mapping of keys (name:, local:, source:, …)"),
        ("ssh:\n" + LOCAL, "ssh: expected a mapping of keys (user:, port:"),
        ("nodes: [{name: a, host: [h]}]", "nodes[0].host: expected text, got a list"),
        ("cluster: 2024-01-01\n" + LOCAL, "cluster: expected text, got 2024-01-01"),
        ("nodes: [{name: a, host: h, port: true}]", "nodes[0].port: expected a number, got true"),
        ("alerts: {hold_s: false}\n" + LOCAL, "alerts.hold_s: expected a number, got false"),
        ("cluster: \"a\\nb\"\n" + LOCAL, "cluster: expected one line of printable text"),
        ("nodes: [{name: a, host: h, identity_file: ~nosuchuser-sparktop/k}]",
         "cannot expand '~' in '~nosuchuser-sparktop/k'"),
        ('nodes: [{name: a, host: h, known_hosts: "x\\0y"}]', "nodes[0].known_hosts: invalid path"),
        pytest.param("a: " + "[" * 3000 + "]" * 3000, "nesting too deep", id="deep-flow"),
    ],
)  # fmt: skip
def test_malformed_documents(text: str, expected: str) -> None:
    assert expected in message_of(text)


def test_a_huge_value_is_clipped_in_the_message() -> None:
    message = message_of('nodes: [{name: a, host: "' + "x;" * 50_000 + '"}]')
    assert "nodes[0].host: invalid host name 'x;x;" in message
    assert len(message) < 400


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h x:80", "spaces and control characters"),
        ("http://user:pw@h x:8000", "spaces and control characters"),
        ("http://a$(id):80", "expected a host name or IP address"),
        ("http://300.1.1.1:80", "expected a host name or IP address"),
        ("http://h:0", "port 0"),
        ("http://h:99999", "invalid URL"),
        ("http://h:80/?x=1", "without '?' or '#'"),
        ("tcp://h:80", "expected http:// or https://"),
    ],
)
def test_bad_engine_urls(url: str, expected: str) -> None:
    message = message_of(f"engines: [{{name: e, url: '{url}'}}]")
    assert "engines[0].url: invalid URL" in message and expected in message


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1]:8000",
        "https://side.example:8443/vllm",
        "http://127.0.0.1:8015/",
        "http://ops:pw@10.0.0.1:8015",
    ],
)
def test_good_engine_urls(url: str) -> None:
    inv = parse_inventory(f"engines: [{{name: e, url: '{url}'}}]", "c.yaml")
    assert inv.engines[0].url == url.rstrip("/")


@pytest.mark.parametrize(
    "host",
    [
        # Not IPv4, yet the resolver reads them as IPv4 (1.2.3 → 1.2.0.3, 0x7f000001 → 127.0.0.1)
        *("300.1.1.1", "1.2.3", "010.1.1.1.1", "2130706433", "0x7f000001", "spark.0x1"),
        # Zone ids are interface names, nothing else.
        *("fe80::1%$(id)", "fe80::1%a b", "::1%\n", "fe80::1%", "1.2.3.4%eth0"),
    ],
)
def test_ambiguous_or_hostile_hosts(host: str) -> None:
    assert not is_valid_host(host)


@pytest.mark.parametrize("host", ["fe80::1%eth0", "spark-1", "10.0.0.1", "a1.example", "sp4rk.1a"])
def test_hosts_that_stay_valid(host: str) -> None:
    assert is_valid_host(host)


# -- files -------------------------------------------------------------------------------------


def test_dev_zero_is_read_only_up_to_the_limit() -> None:
    with pytest.raises(UserError, match=rf"/dev/zero: too large .*{MAX_BYTES:,}"):
        load_inventory(Path("/dev/zero"))


def test_oversized_file(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(LOCAL + "#" * MAX_BYTES)
    with pytest.raises(UserError, match="too large for an inventory"):
        load_inventory(path)


def test_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text(LOCAL)
    path.chmod(0)
    if os.geteuid() == 0:  # root reads anything: make the open fail as it would for a user

        def denied(file: Path, *args: object, **kwargs: object) -> None:
            raise PermissionError(13, "Permission denied", str(file))

        monkeypatch.setattr("sparktop.inventory.loader.read_limited", denied)
    with pytest.raises(UserError) as info:
        load_inventory(path)
    assert str(info.value) == f"{path}: permission denied"


def test_unknown_user_in_the_inventory_path() -> None:
    with pytest.raises(UserError, match="cannot expand '~'"):
        load_inventory(Path("~nosuchuser-sparktop/cluster.yaml"))


def test_bom_and_crlf_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "windows.yaml"
    path.write_bytes(b"\xef\xbb\xbfcluster: lab\r\nnodes: [{name: a, local: true}]\r\n")
    assert load_inventory(path).cluster == "lab"


HOSTILE_FILES = {
    "empty.yaml": b"",
    "list.yaml": b"- a\n- b\n",
    "junk.yaml": bytes(range(256)) * 4,
    "latin1.yaml": b"cluster: caf\xe9\n" + LOCAL.encode(),
    "bomb.yaml": billion_laughs().encode(),
    "key-bomb.yaml": key_bomb().encode(),
    "deep.yaml": b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n",
}


@pytest.mark.parametrize("name", [*HOSTILE_FILES, "missing.yaml", "a-directory"])
def test_cli_one_line_exit_2_for_hostile_files(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sparktop.cli import main

    path = tmp_path / name
    if name in HOSTILE_FILES:
        path.write_bytes(HOSTILE_FILES[name])
    elif name == "a-directory":
        path.mkdir()
    assert main(["snapshot", "--inventory", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"sparktop: error: {path}:")


def test_inventory_errors_show_control_characters_as_every_output_does() -> None:
    """One escaping: ESC in a key or value reads ␛ in the error (as in the monitor, snapshot
    and the CLI's other errors), never ``\\x1b``, and the message stays one line."""
    cases = (
        'nodes:\n  - {name: a, host: 127.0.0.1, "ho\\est": 1}\n',  # YAML \e is ESC
        'nodes:\n  - {name: a, host: "spark\\e]0;pwned\\a"}\n',
        'profile: "no\\esuch"\nnodes:\n  - {name: a, host: 127.0.0.1}\n',
    )
    for text in cases:
        with pytest.raises(UserError) as exc:
            parse_inventory(text, "c.yaml")
        message = str(exc.value)
        assert "␛" in message and "\\x1b" not in message and "\x1b" not in message, message
        assert "\n" not in message


SHADOW = (
    "root:*:20228:0:99999:7:::\n"
    "daemon:*:20228:0:99999:7:::\n"
    "ops:$6$salt$hashhashhash:20228:0:99999:7:::\n"
)
"""A file of secrets shaped like YAML keys (an /etc/shadow): each line parses as a key."""


def test_a_file_that_is_no_inventory_is_named_so_and_its_keys_are_not_quoted() -> None:
    message = message_of(SHADOW)
    assert "not a sparktop inventory" in message and "3 top-level keys" in message
    assert "20228" not in message and "hashhash" not in message


def test_a_typo_of_the_only_key_still_gets_did_you_mean() -> None:
    message = message_of("clustr: x\n")
    assert "unknown key 'clustr' (did you mean 'cluster'?)" in message


def test_a_profile_path_at_a_file_of_secrets_does_not_quote_it(tmp_path: Path) -> None:
    """An inventory whose ``profile:`` points at any readable file: the error says it is not
    a profile and never quotes the file's lines (they were listed as unknown keys)."""
    secret = tmp_path / "shadow"
    secret.write_text(SHADOW)
    inventory = tmp_path / "c.yaml"
    inventory.write_text(f"profile: {secret}\n{LOCAL}")
    with pytest.raises(UserError) as info:
        Plan.from_inventory(load_inventory(inventory))
    message = str(info.value)
    assert "not a sparktop profile" in message
    assert "20228" not in message and "hashhash" not in message
