"""One recorded tick: every newest sample, derived values and the alerts at that moment.

A recording is JSON lines: a header object (:func:`make_header`), then one object per tick::

    {"t": 1767000000.0, "nodes": [NodeSample…], "engines": [EngineSample…],
     "alerts": [Alert…], "events": [Event…], "derived": {"baseline_mhz": {"spark-1/GPU-…": 2515.0}}}

Each tick is self-contained (the full newest state, not a diff), so replay can seek anywhere.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sparktop import __version__
from sparktop.alerts.model import Alert, Event
from sparktop.cluster import ClusterState, gpu_subject
from sparktop.model import EngineSample, NodeSample
from sparktop.record.codec import CodecError, decode, encode
from sparktop.safe_text import without_credentials
from sparktop.sweep.profiles.profile import Profile

if TYPE_CHECKING:
    from sparktop.inventory import Inventory

FORMAT = "sparktop-recording"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Tick:
    """The cluster as the UI saw it at ``time_s`` (wall clock, s).

    ``alerts`` are the active alerts, ``events`` the alert events of this tick, ``derived``
    named maps of derived numbers (``baseline_mhz`` per ``node/gpu_key``; callers may add).
    """

    time_s: float
    nodes: tuple[NodeSample, ...] = ()
    engines: tuple[EngineSample, ...] = ()
    alerts: tuple[Alert, ...] = ()
    events: tuple[Event, ...] = ()
    derived: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: MappingProxyType({}))


def tick_from_state(
    state: ClusterState,
    time_s: float,
    alerts: tuple[Alert, ...] = (),
    events: tuple[Event, ...] = (),
    *,
    keep_raw: bool = False,
) -> Tick:
    """Snapshot a cluster state into a tick. The probe's raw output is dropped unless
    ``keep_raw`` (it is for the live detail view and would dominate the file size)."""
    nodes = tuple(state.nodes.values())
    if not keep_raw:
        nodes = tuple(replace(n, raw="") if n.raw else n for n in nodes)
    baselines: dict[str, float] = {}
    for n in nodes:
        for g in n.gpus:
            base = state.baseline_mhz(n.node, g.key)
            if base is not None:
                baselines[gpu_subject(n.node, g.key)] = base
    return Tick(
        time_s=time_s,
        nodes=nodes,
        engines=tuple(state.engines.values()),
        alerts=alerts,
        events=events,
        derived=MappingProxyType({"baseline_mhz": MappingProxyType(baselines)}),
    )


def tick_to_json(tick: Tick) -> dict[str, Any]:
    return {
        "t": tick.time_s,
        "nodes": [encode(n) for n in tick.nodes],
        "engines": [encode(e) for e in tick.engines],
        "alerts": [a.to_json() for a in tick.alerts],
        "events": [e.to_json() for e in tick.events],
        "derived": {k: dict(v) for k, v in tick.derived.items()},
    }


def tick_from_json(data: Any) -> Tick:
    """Inverse of :func:`tick_to_json`; raises :class:`CodecError` on a malformed tick."""
    if not isinstance(data, dict) or "t" not in data:
        raise CodecError("not a tick (no 't')")
    try:
        derived = {
            str(k): MappingProxyType({str(s): float(v) for s, v in m.items()})
            for k, m in (data.get("derived") or {}).items()
        }
        return Tick(
            time_s=float(data["t"]),
            nodes=tuple(decode(NodeSample, n) for n in data.get("nodes", ())),
            engines=tuple(decode(EngineSample, e) for e in data.get("engines", ())),
            alerts=tuple(Alert.from_json(a) for a in data.get("alerts", ())),
            events=tuple(Event.from_json(e) for e in data.get("events", ())),
            derived=MappingProxyType(derived),
        )
    except CodecError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise CodecError(f"malformed tick: {exc!r:.120}") from None


# "token" but not "tokens": max_num_batched_tokens and kv_pool_tokens are limits, not secrets.
_SECRET_KEY = re.compile(r"pass(word|phrase)?|secret|token(?!s)|credential", re.IGNORECASE)


def redact(value: Any) -> Any:
    """A JSON value with secret-looking keys replaced and credentials cut from URLs."""
    if isinstance(value, dict):
        return {
            k: REDACTED if _SECRET_KEY.search(str(k)) and v is not None else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str) and "@" in value and "://" in value:
        return without_credentials(value)
    return value


def inventory_json(inventory: Any) -> Any:
    """The inventory as plain JSON without secrets (a pydantic model, dataclass or dict)."""
    if inventory is None:
        return None
    if hasattr(inventory, "model_dump"):
        data = inventory.model_dump(mode="json")
    elif isinstance(inventory, dict):
        data = inventory
    else:
        data = encode(inventory)
    return redact(data)


def make_header(
    inventory: Any = None,
    profile: Any = None,
    interval_s: float | None = None,
    engine_profiles: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The first line of a recording: format, versions, when, inventory, profile, and the
    engines' own profiles (``engine_profiles``: engine → profile; the key is left out when
    none has one)."""
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "sparktop_version": __version__,
        "created_s": time.time(),
        "interval_s": interval_s,
        "inventory": inventory_json(inventory),
        "profile": None if profile is None else encode(profile),
    }
    if engine_profiles:
        header["engine_profiles"] = {name: encode(p) for name, p in engine_profiles.items()}
    return header


REDACTED = "<redacted>"
"""What :func:`redact` writes for a secret-looking key (it also catches limits such as
``max_num_batched_tokens``: a replay treats them as not given)."""


def _unredacted(value: Any) -> Any:
    """The header's inventory with redacted values dropped (they were optional or secret)."""
    if isinstance(value, dict):
        return {k: _unredacted(v) for k, v in value.items() if v != REDACTED}
    if isinstance(value, list):
        return [_unredacted(v) for v in value]
    return value


def header_inventory(header: Mapping[str, Any]) -> Inventory | None:
    """The recorded inventory, or None when there is none or it no longer validates."""
    from pydantic import ValidationError

    from sparktop.inventory import Inventory

    data = header.get("inventory")
    if not isinstance(data, dict):
        return None
    try:
        return Inventory.model_validate(_unredacted(data))
    except ValidationError:
        return None


def header_layout(header: Mapping[str, Any]) -> tuple[str | None, dict[str, list[str]]]:
    """The cluster name and each engine's tensor-parallel nodes as the header's inventory
    has them, read leniently (for a recorded inventory that no longer validates)."""
    data = header.get("inventory")
    if not isinstance(data, dict):
        return None, {}
    name = data.get("cluster")
    groups: dict[str, list[str]] = {}
    for engine in data.get("engines") or ():
        if isinstance(engine, dict) and isinstance(engine.get("name"), str):
            nodes = [n for n in engine.get("nodes") or () if isinstance(n, str)]
            if nodes:
                groups[engine["name"]] = nodes
    return (name if isinstance(name, str) and name else None), groups


def header_profile(header: Mapping[str, Any]) -> Profile | None:
    """The profile as recorded, or None when there is none or it no longer decodes."""
    data = header.get("profile")
    if not isinstance(data, dict):
        return None
    try:
        return decode(Profile, data)
    except CodecError:
        return None


def header_engine_profiles(header: Mapping[str, Any]) -> dict[str, Profile]:
    """The engines' own profiles as recorded (engine → profile); one that no longer decodes
    is left out (that engine falls back to the recording's profile)."""
    data = header.get("engine_profiles")
    out: dict[str, Profile] = {}
    for name, value in data.items() if isinstance(data, dict) else ():
        if isinstance(name, str) and isinstance(value, dict):
            try:
                out[name] = decode(Profile, value)
            except CodecError:
                continue
    return out
