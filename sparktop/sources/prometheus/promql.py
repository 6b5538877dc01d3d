"""PromQL for the Prometheus source: label matchers for inventory targets, the two batched
queries (nodes, engines), and which series belong to which target. Pure: no I/O.

A target is an inventory node or engine with ``source: prometheus``. ``instance: HOST``
matches series whose ``instance`` label has that host part (``HOST``, ``HOST:9400``,
``[HOST]:9100``), so a node's dcgm-exporter and node_exporter both map to it;
``instance: HOST:PORT`` matches that whole label; ``match: {label: value}`` matches those
labels exactly instead. Every per-tick query covers all targets at once: one selector with a
regex over all ``instance`` targets, plus one selector per ``match`` target, joined with
``or``. So the number of HTTP queries per tick does not grow with the number of nodes.

Derived series get a ``sparktop_series`` label (``label_replace``), read back as the name
``sparktop:…``, so one answer holds raw gauges, rates, quantiles and sample timestamps side
by side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sparktop.sources.engines.kinds import KindSpec, spec_for
from sparktop.sources.prometheus.api import DERIVED_LABEL

DCGM_FIELDS = (
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MAX_SM_CLOCK",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    "DCGM_FI_DEV_THERMAL_VIOLATION",
    "DCGM_FI_DEV_POWER_VIOLATION",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
)
"""dcgm-exporter fields read per GPU (names as in ``etc/default-counters.csv``; the clock-event
reasons under the current and the pre-3.3 name)."""

NODE_FIELDS = ("node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes")
"""node_exporter fields: host memory, which on GB10 is the GPU's memory too."""

GPU_TS = "sparktop:gpu_sample_time"
ENGINE_TS = "sparktop:engine_sample_time"

PROCESS_START = "process_start_time_seconds"
"""Read beside every engine's series: a change means the server restarted."""


def engine_series(spec: KindSpec) -> tuple[str, ...]:
    """The raw series fetched for an engine of this kind: its gauges (every alias) and its
    info gauge, read like a page through the kind's tables, and :data:`PROCESS_START`."""
    names = [n for aliases in spec.gauges.values() for n in aliases]
    return (*names, *([spec.info] if spec.info else []), PROCESS_START)


def rank_by(spec: KindSpec) -> str:
    """The labels a per-rank rate is summed by: the server's and the kind's rank label."""
    return f"{SERVER}, {spec.promql.rank_label if spec.promql else 'engine'}"


SERVER = "instance, job"
"""Keep servers apart."""


def either_spelling(names: str, prefix: str = "vllm:") -> str:
    """A name regex matching a kind's ``prefix:`` names (``vllm:``, ``sglang:``) and their
    ``prefix_`` spelling (what prometheus_client ≥ 0.2x writes when Prometheus negotiates
    OpenMetrics)."""
    return names.replace(prefix, prefix[:-1] + "[:_]")


def _rate(names: str, window: str, flt: str, prefix: str, suffix: str = "") -> str:
    return f'rate({{__name__=~"{either_spelling(names + suffix, prefix)}",{flt}}}[{window}])'


def _renamed(expr: str, name: str) -> str:
    # A label, not __name__: `or` matches label sets without the metric name, so two derived
    # series that differ only by name would be one (the second dropped).
    return f'label_replace({expr}, "{DERIVED_LABEL}", "{name.removeprefix("sparktop:")}", "", "")'


@dataclass(frozen=True, slots=True)
class Target:
    """Which series belong to one inventory node or engine."""

    name: str
    instance: str | None = None
    match: tuple[tuple[str, str], ...] = ()
    kind: str = ""
    """An engine's kind (a key of :data:`~sparktop.sources.engines.kinds.KINDS`); "" for a
    node, and the default kind for an engine without one."""

    @classmethod
    def of(cls, config: object) -> Target:
        """From an inventory entry with ``name``, ``instance``, ``match`` (and an engine's
        ``kind``)."""
        match = getattr(config, "match", None) or {}
        return cls(
            str(getattr(config, "name", "")),
            getattr(config, "instance", None),
            tuple(sorted(match.items())),
            str(getattr(config, "kind", "") or ""),
        )

    @property
    def with_port(self) -> bool:
        """True when ``instance`` names a port (then it must equal the whole label)."""
        value = self.instance or ""
        if value.startswith("["):
            return "]:" in value
        return value.count(":") == 1

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.match:
            return all(labels.get(k) == v for k, v in self.match)
        label = labels.get("instance", "")
        if self.with_port:
            return label == self.instance
        return host_part(label) == self.instance

    def selector_text(self) -> str:
        """The matcher this target adds, as shown in a "found nothing" reason."""
        if self.match:
            return ",".join(f'{k}="{escape(v)}"' for k, v in self.match)
        if self.with_port:
            return f'instance="{escape(self.instance or "")}"'
        return f'instance=~"{escape(_re2(self.instance or ""))}(:[0-9]+)?"'


def host_part(instance: str) -> str:
    """``host:9400`` → ``host``; ``[::1]:9100`` → ``::1``; a label without a port as it is."""
    if instance.startswith("["):
        return instance[1:].partition("]")[0]
    if instance.count(":") == 1:
        return instance.partition(":")[0]
    return instance


def escape(value: str) -> str:
    """A PromQL double-quoted string body (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def _re2(value: str) -> str:
    return "".join("\\" + ch if ch in _RE2_SPECIAL else ch for ch in value)


def filters(targets: Sequence[Target]) -> list[str]:
    """Label matchers covering every target: one regex for all ``instance`` targets, one
    matcher set per ``match`` target (empty list without targets)."""
    return [flt for flt, _ in _groups(targets)]


def _groups(targets: Sequence[Target]) -> list[tuple[str, tuple[str, ...]]]:
    """(matcher, labels a ``match`` target needs kept) per selector group."""
    alternatives: list[str] = []
    for t in targets:
        if t.match or t.instance is None:
            continue
        pattern = _re2(t.instance)
        alternatives.append(pattern if t.with_port else pattern + "(:[0-9]+)?")
    out: list[tuple[str, tuple[str, ...]]] = []
    if alternatives:
        unique = sorted(set(alternatives))
        out.append((f'instance=~"{escape("|".join(unique))}"', ()))
    out += [(t.selector_text(), tuple(k for k, _ in t.match)) for t in targets if t.match]
    return out


def _either(parts: Iterable[str]) -> str:
    return " or ".join(parts)


GPU_KEYS = ("instance", "gpu", "GPU_I_ID")
"""Labels that tell GPUs (and MIG instances) apart; the other fields keep only these."""
DOWN = "sparktop:down"
"""A target of the node's that Prometheus cannot scrape (``up == 0``)."""


def node_query(targets: Sequence[Target]) -> str:
    """Every dcgm-exporter and node_exporter series sparktop reads for these nodes, the
    targets Prometheus cannot scrape (``up == 0``), and the SM clock's sample time.

    The answer is what sparktop decodes every tick, so it is kept small: only
    ``DCGM_FI_DEV_SM_CLOCK`` comes with all its labels (UUID, model name, host name…); every
    other field is cut to the labels that tell GPUs apart (``max by (__name__, instance, gpu,
    GPU_I_ID)``), and ``up`` is only sent for targets that are down. At 256 nodes that is
    about a third of the plain selector's answer."""
    names = "|".join((*DCGM_FIELDS[1:], *NODE_FIELDS))
    parts = []
    for flt, keys in _groups(targets):
        by = ", ".join(dict.fromkeys((*GPU_KEYS, *keys)))
        host_by = ", ".join(dict.fromkeys(("instance", *keys)))
        parts.append(f'{{__name__="DCGM_FI_DEV_SM_CLOCK",{flt}}}')
        parts.append(f'max by (__name__, {by}) ({{__name__=~"{names}",{flt}}})')
        gpu_ts = f'max by ({by}) (timestamp({{__name__="DCGM_FI_DEV_SM_CLOCK",{flt}}}))'
        parts.append(_renamed(gpu_ts, GPU_TS))
        parts.append(_renamed(f"max by ({host_by}) (up{{{flt}}} == 0)", DOWN))
    return _either(parts)


def engine_query(targets: Sequence[Target], window_s: float) -> str:
    """Gauges, per-rank and per-server rates and quantiles over ``window_s`` for these
    engines, their ``up`` and the sample time of their ``running`` gauge; each kind's part
    from its :class:`~sparktop.sources.engines.kinds.PromQL`, for the targets of that kind."""
    window = f"{max(1, round(window_s))}s"
    parts = []
    by_kind: dict[str, list[Target]] = {}
    for t in targets:
        by_kind.setdefault(spec_for(t.kind).kind, []).append(t)
    for kind, mine in by_kind.items():
        spec = spec_for(kind)
        if spec.promql is None:
            continue  # the inventory refuses such a target
        prefix, rank = spec.metric_prefix, rank_by(spec)
        for flt in filters(mine):
            gauges = either_spelling("|".join((*engine_series(spec), "up")), prefix)
            parts.append(f'{{__name__=~"{gauges}",{flt}}}')
            alive = either_spelling(spec.gauges["running"][0], prefix)
            ts = f'timestamp({{__name__=~"{alive}",{flt}}})'
            parts.append(_renamed(ts, ENGINE_TS))
            for name, counter in spec.promql.rates.items():
                rate = _rate(counter, window, flt, prefix)
                parts.append(_renamed(f"sum by ({rank}) ({rate})", name))
                parts.append(_renamed(f"sum by ({SERVER}) ({rate})", name + ":all"))
            for name, (q, hist) in spec.promql.quantiles.items():
                buckets = _rate(hist, window, flt, prefix, "_bucket")
                per_rank = f"histogram_quantile({q}, sum by ({rank}, le) ({buckets}))"
                per_server = f"histogram_quantile({q}, sum by ({SERVER}, le) ({buckets}))"
                parts.append(_renamed(per_rank, name))
                parts.append(_renamed(per_server, name + ":all"))
    return _either(parts)
