"""The inventory's frozen, validated models (``cluster.yaml``, DESIGN.md §3).

Every model forbids unknown keys, so a typo is an error rather than a silently ignored
setting. Strings that name a host, a node, a user, a URL or an environment variable are
checked by :mod:`sparktop.inventory.names`; numbers refuse ``true``/``false``.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from sparktop.alerts.thresholds import Threshold, settable
from sparktop.inventory.names import (
    check_display,
    check_env,
    check_host,
    check_name,
    check_url,
    check_user,
    expand_path,
)
from sparktop.sources.engines.kinds import spec_for, through_prometheus


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


def _check_profile_ref(value: str) -> str:
    # A path made absolute by the loader may be long (a recording's header keeps it).
    if not value.isprintable() or len(value) > 4096:
        raise PydanticCustomError(
            "invalid_profile", "expected a profile name or path: one printable line", {}
        )
    return value


ProfileRef = Annotated[str, AfterValidator(_check_profile_ref)]
UserPath = Annotated[Path, BeforeValidator(expand_path)]
Port = Annotated[int, _NUMBER, Field(ge=1, le=65535)]
TimeoutS = Annotated[float, _NUMBER, Field(gt=0, le=600)]
Percent = Annotated[float, _NUMBER, Field(gt=0, le=100)]
Count = Annotated[int, _NUMBER, Field(ge=1)]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)


Probe = Literal["stream", "oneshot"]
"""The ``probe:`` values (per node, or for every node under ``ssh:``)."""


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
    probe: Probe = "stream"
    """How GPUs are read: ``stream`` (one long-lived ``nvidia-smi -lms``, falling back to
    one-shot where it does not work) or ``oneshot`` (a fresh probe every poll)."""


def _check_label_value(value: str) -> str:
    if not value or not value.isprintable() or len(value) > 256:
        raise PydanticCustomError(
            "invalid_label", "expected one printable line of at most 256 characters", {}
        )
    return value


def _check_label_name(value: str) -> str:
    if not _LABEL_NAME_RE.fullmatch(value):
        raise PydanticCustomError(
            "invalid_label_name",
            "invalid Prometheus label name '{value}' (letters, digits and '_')",
            {"value": value[:60]},
        )
    return value


_LABEL_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
LabelValue = Annotated[str, AfterValidator(_check_label_value)]
LabelMatch = dict[Annotated[str, AfterValidator(_check_label_name)], LabelValue]


class PrometheusSettings(_Frozen):
    """Where nodes and engines with ``source: prometheus`` are read from: the server's base
    URL (``/api/v1/query`` below it), an environment variable holding a bearer token, and the
    per-query deadline in seconds."""

    url: Annotated[str, AfterValidator(check_url)]
    bearer_token_env: Annotated[str, AfterValidator(check_env)] | None = None
    timeout_s: TimeoutS = 5.0


class _PromTarget(_Frozen):
    """``instance`` matches the host part of Prometheus's ``instance`` label (``host:port``
    when it has a port: then the whole label); ``match`` (label → exact value) overrides it.
    Subclasses declare both fields last (the loader's hints list the first fields)."""

    def _check_target(self, source: str, what: str) -> None:
        instance, match = getattr(self, "instance", None), getattr(self, "match", None)
        if source == "prometheus" and instance is None and not match:
            raise PydanticCustomError(
                "missing", "a 'source: prometheus' {what} needs 'instance:' or 'match:'",
                {"what": what},
            )  # fmt: skip
        if source != "prometheus" and (instance is not None or match):
            raise PydanticCustomError(
                "prometheus_only", "'instance:' and 'match:' need 'source: prometheus'", {}
            )


class NodeConfig(_PromTarget):
    """One node: reached over SSH at ``host`` (required unless ``local: true`` or
    ``source: prometheus``, which reads it from the ``prometheus:`` server by ``instance``).

    Every SSH key may be overridden per node (``None`` = the ``ssh:`` default). With
    ``strict_host_key_checking: false`` an *unknown* host key may be accepted and recorded
    (like OpenSSH's ``accept-new``); a *changed* key is always refused.
    """

    name: Name
    local: bool = False
    source: Literal["ssh", "prometheus"] = "ssh"
    host: Host | None = Field(default=None, validate_default=True)
    port: Port | None = None
    user: User | None = None
    identity_file: UserPath | None = None
    known_hosts: UserPath | None = None
    config: UserPath | None = None
    connect_timeout_s: TimeoutS | None = None
    command_timeout_s: TimeoutS | None = None
    probe: Probe | None = None
    strict_host_key_checking: bool = True
    instance: LabelValue | None = None
    match: LabelMatch | None = None

    @field_validator("host")
    @classmethod
    def _host_unless_local(cls, value: str | None, info: ValidationInfo) -> str | None:
        local = info.data.get("local", False)
        prometheus = info.data.get("source") == "prometheus"
        if value is None and not local and not prometheus:
            raise PydanticCustomError("missing", "field required (or set 'local: true')")
        if value is not None and local:
            raise PydanticCustomError("local_host", "a 'local: true' node takes no host")
        if value is not None and prometheus:
            raise PydanticCustomError(
                "prometheus_host", "a 'source: prometheus' node takes 'instance:', not 'host:'"
            )
        return value

    @model_validator(mode="after")
    def _prometheus_target(self) -> NodeConfig:
        if self.local and self.source == "prometheus":
            raise PydanticCustomError("local_prometheus", "'local: true' and 'source: prometheus'")
        self._check_target(self.source, "node")
        return self


class EngineConfig(_PromTarget):
    """One inference server: its base URL (``/metrics``, ``/v1/models``, ``/tokenize`` below
    it), the tensor-parallel group it runs on (head first), and limits ``/metrics`` does not
    expose: ``max_num_seqs`` (sequences), ``max_num_batched_tokens``, ``max_model_len`` and
    ``kv_pool_tokens`` (tokens); ``None`` = ask the server, else the profile (DESIGN.md §5).
    ``profile`` is this engine's own sweep profile (a name or a path, relative to the
    inventory), in place of the inventory's top-level one for its expected row, budget and
    limits; ``profile_at`` is where that key is (``file:line:col``), set by the loader.
    ``api_key_env`` names an environment variable holding a bearer token. With
    ``source: prometheus`` its ``vllm:*`` or ``sglang:*`` series are read from the
    ``prometheus:`` server (by ``instance``/``match``) and ``url`` is optional (only
    ``/tokenize`` uses it)."""

    name: Name
    url: Annotated[str, AfterValidator(check_url)] = ""
    nodes: tuple[Name, ...] = ()
    kind: Literal["vllm", "sglang", "llamacpp"] = "vllm"
    api_key_env: Annotated[str, AfterValidator(check_env)] | None = None
    max_num_seqs: Count | None = None
    max_num_batched_tokens: Count | None = None
    max_model_len: Count | None = None
    kv_pool_tokens: Count | None = None
    profile: ProfileRef | None = None
    source: Literal["http", "prometheus"] = "http"
    instance: LabelValue | None = None
    match: LabelMatch | None = None
    profile_at: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _prometheus_target(self) -> EngineConfig:
        if self.source == "http" and not self.url:
            raise _located("missing", "field required (or set 'source: prometheus')", "url")
        self._check_target(self.source, "engine")
        if self.source == "prometheus" and spec_for(self.kind).promql is None:
            read = " and ".join(s.label for s in through_prometheus())
            raise _located(
                "kind_source",
                f"kind {self.kind} is read from its own /metrics only (source: http); "
                f"source: prometheus reads {read} series",
                "source",
            )
        return self


def _threshold_field(threshold: Threshold) -> Any:
    """``(type, Field)`` of one settable threshold for :func:`pydantic.create_model`: its
    default and range from the table, so the error for a bad value reads as pydantic's own
    (``alerts.kv_usage_pct: Input should be less than or equal to 100``)."""
    bounds = threshold.settable
    assert bounds is not None
    field = Field(
        threshold.default,
        gt=None if bounds.low_closed else bounds.low,
        ge=bounds.low if bounds.low_closed else None,
        le=bounds.high,
        description=f"{threshold.help} ({threshold.unit})",
    )
    return (Annotated[float, _NUMBER], field)


_ALERTS_DOC = """Alert thresholds (DESIGN.md §9): the settable rows of
:data:`sparktop.alerts.thresholds.TABLE`, each with its default and accepted range."""

if TYPE_CHECKING:

    class AlertThresholds(_Frozen):
        """Alert thresholds (DESIGN.md §9): the settable rows of the thresholds table."""

else:
    AlertThresholds = create_model(
        "AlertThresholds",
        __base__=_Frozen,
        __module__=__name__,
        __doc__=_ALERTS_DOC,
        **{t.name: _threshold_field(t) for t in settable()},
    )


def _located(kind: str, message: str, key: str, given: Any = None) -> ValidationError:
    """An error on ``key`` of the model being validated (the loader prefixes the model's
    own location), for checks that need several fields."""
    return _errors("field", [_detail(kind, message, {}, (key,), given)])


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

    ``source_path`` is the file it was loaded from and ``profile_at`` where its ``profile:``
    key is (``file:line:col``), both set by the loader, not YAML keys.
    """

    cluster: Display = "sparktop"
    profile: Display | None = None
    interval_s: Annotated[float, _NUMBER, Field(ge=0.2, le=60)] = 1.0
    ssh: SshSettings = SshSettings()
    prometheus: PrometheusSettings | None = None
    nodes: tuple[NodeConfig, ...] = ()
    engines: tuple[EngineConfig, ...] = ()
    alerts: AlertThresholds = AlertThresholds()
    keys: dict[str, str] = Field(default_factory=dict)
    source_path: Path | None = Field(default=None, exclude=True)
    profile_at: str | None = Field(default=None, exclude=True)

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
        if self.prometheus is None:
            template = "'source: prometheus' needs a top-level 'prometheus:' with its url"
            used = [("nodes", i) for i, n in enumerate(self.nodes) if n.source == "prometheus"]
            used += [("engines", i) for i, e in enumerate(self.engines) if e.source == "prometheus"]
            for kind, i in used:
                where: tuple[str | int, ...] = (kind, i, "source")
                details.append(_detail("no_prometheus", template, {}, where, "prometheus"))
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
