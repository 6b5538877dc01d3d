"""The inventory's frozen, validated models (``cluster.yaml``, DESIGN.md §3).

Every model forbids unknown keys, so a typo is an error rather than a silently ignored
setting. Strings that end up naming a host, a node or an environment variable are checked
against narrow patterns here; nothing in the inventory is ever interpolated into a shell
command, and these checks are a second line of defence, not the first.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_DNS_LABEL_RE = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_ALIAS_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise PydanticCustomError(
            "invalid_name",
            "invalid name '{value}': use letters, digits, '-', '_' and '.', starting with a "
            "letter or digit (at most 64 characters)",
            {"value": value},
        )
    return value


def is_valid_host(value: str) -> bool:
    """True for a DNS name, an IPv4/IPv6 literal, or an ssh-config ``Host`` alias.

    Aliases are limited to letters, digits, ``.``, ``_`` and ``-`` and may not start with
    ``-`` (so a host can never be read as an ``ssh`` option).
    """
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        pass
    if not _ALIAS_RE.fullmatch(value):
        return False
    # Dotted names must be valid DNS names (labels of at most 63 characters).
    return "." not in value or all(_DNS_LABEL_RE.fullmatch(label) for label in value.split("."))


def _check_host(value: str) -> str:
    if not is_valid_host(value):
        raise PydanticCustomError(
            "invalid_host",
            "invalid host name '{value}': expected a DNS name, an IPv4/IPv6 address or an "
            "ssh-config alias (letters, digits, '.', '_', '-')",
            {"value": value},
        )
    return value


def _check_user(value: str) -> str:
    if not _USER_RE.fullmatch(value):
        raise PydanticCustomError("invalid_user", "invalid user name '{value}'", {"value": value})
    return value


def _expand_path(value: Any) -> Any:
    return Path(value).expanduser() if isinstance(value, str | Path) else value


def _check_env(value: str) -> str:
    if not _ENV_RE.fullmatch(value):
        raise PydanticCustomError(
            "invalid_env", "invalid environment variable name '{value}'", {"value": value}
        )
    return value


Name = Annotated[str, AfterValidator(_check_name)]
User = Annotated[str, AfterValidator(_check_user)]
Host = Annotated[str, AfterValidator(_check_host)]
UserPath = Annotated[Path, BeforeValidator(_expand_path)]
Port = Annotated[int, Field(ge=1, le=65535)]
TimeoutS = Annotated[float, Field(gt=0, le=600)]
Percent = Annotated[float, Field(gt=0, le=100)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


class SshSettings(_Frozen):
    """SSH defaults for every node. ``None`` means "as OpenSSH would decide" (ssh config,
    agent, ``~/.ssh/known_hosts``). Paths have ``~`` expanded; timeouts are seconds."""

    user: User | None = None
    port: Port | None = None
    connect_timeout_s: TimeoutS = 5.0
    command_timeout_s: TimeoutS = 5.0
    identity_file: UserPath | None = None
    known_hosts: UserPath | None = None
    config: UserPath | None = None


class NodeConfig(_Frozen):
    """One node: reached over SSH at ``host`` (required unless ``local: true``).

    Every SSH key may be overridden per node (``None`` = the ``ssh:`` default). With
    ``strict_host_key_checking: false`` an *unknown* host key may be accepted and recorded
    (like OpenSSH's ``accept-new``); a *changed* key is always refused.
    """

    name: Name
    local: bool = False
    host: Host | None = Field(default=None, validate_default=True)
    port: Port | None = None
    user: User | None = None
    identity_file: UserPath | None = None
    known_hosts: UserPath | None = None
    config: UserPath | None = None
    connect_timeout_s: TimeoutS | None = None
    command_timeout_s: TimeoutS | None = None
    strict_host_key_checking: bool = True

    @field_validator("host")
    @classmethod
    def _host_unless_local(cls, value: str | None, info: ValidationInfo) -> str | None:
        local = info.data.get("local", False)
        if value is None and not local:
            raise PydanticCustomError("missing", "field required (or set 'local: true')")
        if value is not None and local:
            raise PydanticCustomError("local_host", "a 'local: true' node takes no host")
        return value


class EngineConfig(_Frozen):
    """One inference server: its base URL (``/metrics``, ``/v1/models``, ``/tokenize`` below
    it), the tensor-parallel group it runs on (head first), and limits ``/metrics`` does not
    expose. ``api_key_env`` names an environment variable holding a bearer token."""

    name: Name
    url: str
    nodes: tuple[Name, ...] = ()
    kind: Literal["vllm", "sglang"] = "vllm"
    api_key_env: Annotated[str, AfterValidator(_check_env)] | None = None
    max_num_seqs: Annotated[int, Field(ge=1)] | None = None
    max_num_batched_tokens: Annotated[int, Field(ge=1)] | None = None
    max_model_len: Annotated[int, Field(ge=1)] | None = None
    kv_pool_tokens: Annotated[int, Field(ge=1)] | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        try:
            parts = urlsplit(value)
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            parts, port_ok = None, False
        if (
            parts is None
            or not port_ok
            or parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.query
            or parts.fragment
        ):
            raise PydanticCustomError(
                "invalid_url",
                "invalid URL '{value}': expected a base URL like http://10.0.0.1:8000",
                {"value": value},
            )
        return value.rstrip("/")


class AlertThresholds(_Frozen):
    """Alert thresholds (DESIGN.md §9): percentages 0–100, °C, seconds to hold."""

    clock_drop_pct: Percent = 10.0
    temperature_c: Annotated[float, Field(gt=0, le=150)] = 85.0
    kv_usage_pct: Percent = 90.0
    expected_deficit_pct: Percent = 25.0
    hold_s: Annotated[float, Field(ge=0, le=3600)] = 10.0


def _errors(title: str, details: list[InitErrorDetails]) -> ValidationError:
    return ValidationError.from_exception_data(title, details)


def _duplicate(kind: str, name: str, first: int, loc: tuple[str | int, ...]) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(
            "duplicate",
            "duplicate {kind} name '{name}' (also {kind}s[{first}])",
            {"kind": kind, "name": name, "first": first},
        ),
        loc=loc,
        input=name,
    )


class Inventory(_Frozen):
    """A whole ``cluster.yaml``: display name, sweep profile, poll period, SSH defaults,
    nodes, engines, alert thresholds and key remapping (binding id → key).

    ``source_path`` is the file it was loaded from (set by the loader, not a YAML key).
    """

    cluster: str = "sparktop"
    profile: str | None = None
    interval_s: Annotated[float, Field(ge=0.2, le=60)] = 1.0
    ssh: SshSettings = SshSettings()
    nodes: tuple[NodeConfig, ...] = ()
    engines: tuple[EngineConfig, ...] = ()
    alerts: AlertThresholds = AlertThresholds()
    keys: dict[str, str] = Field(default_factory=dict)
    source_path: Path | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _cross_references(self) -> Inventory:
        details: list[InitErrorDetails] = []
        seen: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            if node.name in seen:
                details.append(_duplicate("node", node.name, seen[node.name], ("nodes", i, "name")))
            seen.setdefault(node.name, i)
        engines: dict[str, int] = {}
        for i, engine in enumerate(self.engines):
            if engine.name in engines:
                details.append(
                    _duplicate("engine", engine.name, engines[engine.name], ("engines", i, "name"))
                )
            engines.setdefault(engine.name, i)
            for j, member in enumerate(engine.nodes):
                if member not in seen:
                    details.append(_unknown_node(member, tuple(seen), ("engines", i, "nodes", j)))
                elif engine.nodes.index(member) != j:
                    details.append(
                        InitErrorDetails(
                            type=PydanticCustomError(
                                "duplicate", "node '{name}' listed twice", {"name": member}
                            ),
                            loc=("engines", i, "nodes", j),
                            input=member,
                        )
                    )
        if not self.nodes and not self.engines:
            details.append(
                InitErrorDetails(
                    type=PydanticCustomError("empty", "no nodes and no engines to monitor"),
                    loc=(),
                    input=None,
                )
            )
        if details:
            raise _errors("Inventory", details)
        return self

    def node(self, name: str) -> NodeConfig:
        """The node called ``name``; ``KeyError`` if there is none."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def ssh_for(self, node: NodeConfig) -> SshSettings:
        """The node's SSH settings: its own overrides on top of the ``ssh:`` defaults."""
        overrides = {
            key: getattr(node, key)
            for key in SshSettings.model_fields
            if getattr(node, key) is not None
        }
        return self.ssh.model_copy(update=overrides)


def _unknown_node(
    name: str, known: tuple[str, ...], loc: tuple[str | int, ...]
) -> InitErrorDetails:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listed = ", ".join(known) if known else "none"
    return InitErrorDetails(
        type=PydanticCustomError(
            "unknown_node",
            "unknown node '{name}'{hint}; nodes are: {listed}",
            {"name": name, "hint": hint, "listed": listed},
        ),
        loc=loc,
        input=name,
    )
