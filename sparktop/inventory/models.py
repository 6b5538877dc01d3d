"""The inventory's frozen, validated models (``cluster.yaml``, DESIGN.md §3).

Every model forbids unknown keys, so a typo is an error rather than a silently ignored
setting. Strings that name a host, a node, a user, a URL or an environment variable are
checked by :mod:`sparktop.inventory.names`; numbers refuse ``true``/``false``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal

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

from sparktop.inventory.names import (
    check_display,
    check_env,
    check_host,
    check_name,
    check_url,
    check_user,
    expand_path,
)


def _no_bool(value: Any) -> Any:
    # pydantic reads `true` as 1 for an int field; `port: true` is a mistake, not port 1.
    if isinstance(value, bool):
        raise PydanticCustomError(
            "bool_number", "expected a number, got {value}", {"value": str(value).lower()}
        )
    return value


_NUMBER = BeforeValidator(_no_bool)
Name = Annotated[str, AfterValidator(check_name)]
User = Annotated[str, AfterValidator(check_user)]
Host = Annotated[str, AfterValidator(check_host)]
Display = Annotated[str, AfterValidator(check_display)]
UserPath = Annotated[Path, BeforeValidator(expand_path)]
Port = Annotated[int, _NUMBER, Field(ge=1, le=65535)]
TimeoutS = Annotated[float, _NUMBER, Field(gt=0, le=600)]
Percent = Annotated[float, _NUMBER, Field(gt=0, le=100)]
Count = Annotated[int, _NUMBER, Field(ge=1)]


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
    expose: ``max_num_seqs`` (sequences), ``max_num_batched_tokens``, ``max_model_len`` and
    ``kv_pool_tokens`` (tokens); ``None`` = ask the server, else the profile (DESIGN.md §5).
    ``api_key_env`` names an environment variable holding a bearer token."""

    name: Name
    url: Annotated[str, AfterValidator(check_url)]
    nodes: tuple[Name, ...] = ()
    kind: Literal["vllm", "sglang"] = "vllm"
    api_key_env: Annotated[str, AfterValidator(check_env)] | None = None
    max_num_seqs: Count | None = None
    max_num_batched_tokens: Count | None = None
    max_model_len: Count | None = None
    kv_pool_tokens: Count | None = None


class AlertThresholds(_Frozen):
    """Alert thresholds (DESIGN.md §9): percentages 0–100, °C, seconds to hold."""

    clock_drop_pct: Percent = 10.0
    temperature_c: Annotated[float, _NUMBER, Field(gt=0, le=150)] = 85.0
    kv_usage_pct: Percent = 90.0
    expected_deficit_pct: Percent = 25.0
    hold_s: Annotated[float, _NUMBER, Field(ge=0, le=3600)] = 10.0


def _errors(title: str, details: list[InitErrorDetails]) -> ValidationError:
    return ValidationError.from_exception_data(title, details)


def _detail(
    kind: str, template: str, context: dict[str, Any], loc: tuple[str | int, ...], given: Any
) -> InitErrorDetails:
    """One cross-reference error, located like pydantic's own (``loc`` → line in the file)."""
    return InitErrorDetails(type=PydanticCustomError(kind, template, context), loc=loc, input=given)


def _duplicate(kind: str, name: str, first: int, loc: tuple[str | int, ...]) -> InitErrorDetails:
    template = "duplicate {kind} name '{name}' (also {kind}s[{first}])"
    return _detail("duplicate", template, {"kind": kind, "name": name, "first": first}, loc, name)


class Inventory(_Frozen):
    """A whole ``cluster.yaml``: display name, sweep profile, poll period, SSH defaults,
    nodes, engines, alert thresholds and key remapping (binding id → key).

    ``source_path`` is the file it was loaded from (set by the loader, not a YAML key).
    """

    cluster: Display = "sparktop"
    profile: Display | None = None
    interval_s: Annotated[float, _NUMBER, Field(ge=0.2, le=60)] = 1.0
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
                    loc = ("engines", i, "nodes", j)
                    template = "node '{name}' listed twice"
                    details.append(_detail("duplicate", template, {"name": member}, loc, member))
        if not self.nodes and not self.engines:
            details.append(_detail("empty", "no nodes and no engines to monitor", {}, (), None))
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
    listed = ", ".join(known[:8]) + (", …" if len(known) > 8 else "") if known else "none"
    context = {"name": name, "hint": hint, "listed": listed}
    return _detail(
        "unknown_node", "unknown node '{name}'{hint}; nodes are: {listed}", context, loc, name
    )
