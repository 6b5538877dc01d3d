"""The client side of a loopback SSH node: an identity, known_hosts and an (empty) SSH
config isolated from ``~/.ssh``, and an :class:`SshSource` with settings merged exactly as the
inventory merges them."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from sparktop.inventory import Inventory, NodeConfig, SshSettings
from sparktop.sim.sshserver import generate_key
from sparktop.sources.ssh.source import SshSource


@dataclass
class ClientFiles:
    """A client's identity, known_hosts and (empty) SSH config, isolated from ~/.ssh."""

    root: Path
    key: asyncssh.SSHKey
    identity_file: Path
    known_hosts: Path
    config: Path

    def trust(self, line: str) -> None:
        with self.known_hosts.open("a") as out:
            out.write(line + "\n")

    def settings(self, **overrides: object) -> SshSettings:
        values: dict[str, object] = {
            "identity_file": self.identity_file,
            "known_hosts": self.known_hosts,
            "config": self.config,
            "connect_timeout_s": 3.0,
            "command_timeout_s": 1.0,
            "user": login_user(),
        }
        values.update(overrides)
        return SshSettings.model_validate(values)


def ssh_source(files: ClientFiles, node_config: NodeConfig, **settings: object) -> SshSource:
    """An :class:`SshSource` with settings merged exactly as the inventory merges them."""
    inventory = Inventory(ssh=files.settings(**settings), nodes=(node_config,))
    return SshSource(node_config, inventory.ssh_for(node_config), backoff_base_s=0.0)


def client_files(root: Path, key: asyncssh.SSHKey | None = None) -> ClientFiles:
    root.mkdir(parents=True, exist_ok=True)
    key = key or generate_key()
    identity = root / "id_ed25519"
    key.write_private_key(str(identity))
    identity.chmod(0o600)
    (root / "known_hosts").write_text("")
    (root / "ssh_config").write_text("")
    return ClientFiles(root, key, identity, root / "known_hosts", root / "ssh_config")


def node(name: str, port: int, **extra: object) -> NodeConfig:
    return NodeConfig.model_validate({"name": name, "host": "127.0.0.1", "port": port, **extra})


def login_user() -> str:
    return getpass.getuser()
