"""Engine limits /metrics may not export: the KV pool in tokens, ``max_model_len``,
``max_num_seqs``, ``max_num_batched_tokens``, each resolved in a fixed order and labelled.

KV pool per DP rank (DESIGN.md §5), by the rules the kind names (``pool_from``):
vLLM ``cache_config_info{kv_cache_size_tokens}`` (newer vLLM), else ``num_gpu_blocks ×
block_size ÷ number of ranks``; SGLang ``sglang:max_total_num_tokens``, else
``num_used_tokens ÷ token_usage`` (the same page; not while nothing is in use); then for
every kind the inventory's ``kv_pool_tokens``, else the profile's, else unknown. Label values
are strings and may be ``"None"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from sparktop.model import NA, EngineSample, Num, is_num
from sparktop.sources.engines.kinds import spec_for
from sparktop.sources.engines.reading import PageReading

LIMIT_NAMES = ("kv_pool_tokens", "max_num_seqs", "max_num_batched_tokens", "max_model_len")

INVENTORY_FIX = "set kv_pool_tokens in the inventory"
"""How an unknown pool's reason ends (here and in each kind's ``pool_unknown``)."""
COMMAND_LINE_FIX = (
    "no flag sets it: list the server in an inventory with kv_pool_tokens: "
    "(docs/inventory.md) and run with -i FILE"
)
"""The same, for an engine named on the command line (``--endpoint``): it has no inventory."""


def for_command_line(sample: EngineSample) -> EngineSample:
    """``sample`` of an engine named on the command line: its pool reasons (the engine's and
    each rank's, the used and free tokens' too) say :data:`COMMAND_LINE_FIX`, not the
    inventory key such a run does not have."""
    values = [sample, *sample.ranks]
    if not any(_inventory_fix(getattr(v, k)) for v in values for k in _POOL_FIELDS):
        return sample
    ranks = tuple(
        replace(r, kv_pool_tokens=_fixed(r.kv_pool_tokens), kv_used_tokens=_fixed(r.kv_used_tokens),
                kv_free_tokens=_fixed(r.kv_free_tokens))
        for r in sample.ranks
    )  # fmt: skip
    return replace(
        sample, kv_pool_tokens=_fixed(sample.kv_pool_tokens), ranks=ranks,
        kv_used_tokens=_fixed(sample.kv_used_tokens), kv_free_tokens=_fixed(sample.kv_free_tokens),
    )  # fmt: skip


_POOL_FIELDS = ("kv_pool_tokens", "kv_used_tokens", "kv_free_tokens")


def _inventory_fix(value: object) -> bool:
    return isinstance(value, NA) and INVENTORY_FIX in value.reason


def _fixed(value: Num) -> Num:
    if isinstance(value, NA) and INVENTORY_FIX in value.reason:
        return NA(value.reason.replace(INVENTORY_FIX, COMMAND_LINE_FIX))
    return value


@dataclass(frozen=True, slots=True)
class Limits:
    """Limits declared outside the server (inventory or profile); None when not given.

    ``kv_pool_tokens`` is for the whole engine (all DP ranks together).
    """

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    kv_pool_tokens: int | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, int] | None) -> Limits:
        """From a plain mapping (e.g. a profile's metadata); unknown keys are ignored."""
        values = values or {}
        picked = {k: values.get(k) for k in LIMIT_NAMES}
        return cls(**{k: int(v) for k, v in picked.items() if v is not None})

    @classmethod
    def from_config(cls, config: object) -> Limits:
        """From an inventory engine entry (any object with those attribute names)."""
        return cls.from_mapping(
            {k: v for k in LIMIT_NAMES if (v := getattr(config, k, None)) is not None}
        )


MAX_LABEL_INT = 10**12
"""Above any block count, block size or pool a server can have (GB10's pool is ~11M tokens):
a label past it is a broken page, not a limit."""


def label_int(labels: Mapping[str, str] | None, key: str) -> int | None:
    """A positive integer label value; None for absent, ``"None"``, unparsable, fractional,
    non-finite or implausible values (``inf``, ``1e308``, ``0.5``, ``-16``)."""
    if not labels:
        return None
    try:
        number = float(labels.get(key, ""))
        value = int(number)
    except (ValueError, OverflowError):
        return None
    return value if value == number and 0 < value <= MAX_LABEL_INT else None


def _shown(labels: Mapping[str, str], key: str) -> str:
    text = labels.get(key)
    return f"{key} absent" if text is None else f"{key}={text[:24]!r}"


QUIET = frozenset({"not exported", "not asked", ""})
"""NA reasons that say nothing worth repeating when a limit stays unknown."""


def resolve_limit(
    name: str, server: Sequence[tuple[Num, str]], inventory: Limits, profile: Limits
) -> tuple[Num, str]:
    """First available of the server-side values, then the inventory, then the profile: the
    one precedence rule for every limit (the plan asks it with no server values)."""
    for value, source in server:
        if is_num(value) and value > 0:
            return float(value), source
    for limits, source in ((inventory, "inventory"), (profile, "profile")):
        value = getattr(limits, name)
        if value is not None:
            return float(value), source
    why = next((v.reason for v, _ in server if isinstance(v, NA) and v.reason not in QUIET), "")
    return NA(f"{why or name + ' not exported'}; set {name} in the inventory"), "unknown"


def _used_over_usage(gauges: Mapping[str, Num]) -> float | None:
    """SGLang's pool from its own page when ``max_total_num_tokens`` is not exported:
    ``token_usage`` is ``num_used_tokens ÷ pool``, so the pool is their quotient (rounded to
    a token). None when either is missing or nothing is in use (0 ÷ 0)."""
    used, usage = gauges.get("used_tokens"), gauges.get("kv_usage")
    if not (is_num(used) and is_num(usage) and used > 0 and 0 < usage <= 1):
        return None
    return float(round(used / usage))


Pool = dict[str, Num]
"""KV pool tokens per rank."""
_Infos = Mapping[str, Mapping[str, str] | None]


def _pool_info_size(reading: PageReading, ranks: Sequence[str], infos: _Infos) -> Pool | None:
    sized = {r: label_int(i, "kv_cache_size_tokens") for r, i in infos.items()}
    if ranks and all(v is not None for v in sized.values()):
        return {r: float(v) for r, v in sized.items() if v is not None}
    return None


def _pool_blocks(reading: PageReading, ranks: Sequence[str], infos: _Infos) -> Pool | None:
    n = max(1, len(ranks))
    blocks = {
        r: (label_int(i, "num_gpu_blocks"), label_int(i, "block_size")) for r, i in infos.items()
    }
    if ranks and all(
        b is not None and s is not None and b * s <= MAX_LABEL_INT for b, s in blocks.values()
    ):
        return {r: b * s / n for r, (b, s) in blocks.items() if b and s}
    return None


def _pool_gauge(reading: PageReading, ranks: Sequence[str], infos: _Infos) -> Pool | None:
    gauges = {r: reading.ranks[r].gauges.get("pool_tokens") for r in ranks}
    if ranks and all(is_num(v) and v > 0 for v in gauges.values()):
        return {r: float(v) for r, v in gauges.items() if is_num(v)}
    return None


def _pool_used_over_usage(reading: PageReading, ranks: Sequence[str], infos: _Infos) -> Pool | None:
    derived = {r: _used_over_usage(reading.ranks[r].gauges) for r in ranks}
    if ranks and all(v is not None for v in derived.values()):
        return {r: v for r, v in derived.items() if v is not None}
    return None


_Rule = Callable[[PageReading, Sequence[str], _Infos], Pool | None]
_POOL_RULES: Mapping[str, tuple[_Rule, str]] = {
    "cache_config_info": (_pool_info_size, "cache_config_info"),
    "blocks": (_pool_blocks, "num_gpu_blocks×block_size"),
    "pool_gauge": (_pool_gauge, "max_total_num_tokens"),
    "used_over_usage": (_pool_used_over_usage, "num_used_tokens÷token_usage"),
}
"""The KV-pool rules a kind's :attr:`~sparktop.sources.engines.kinds.KindSpec.pool_from`
names: each gives the pool per rank (None when the page does not state it) and the source
shown beside it."""


def resolve_pool(
    reading: PageReading, ranks: Sequence[str], inventory: Limits, profile: Limits
) -> tuple[dict[str, Num], str]:
    """KV pool tokens per rank and where it came from."""
    n = max(1, len(ranks))
    spec = spec_for(reading.kind)
    infos = {r: reading.ranks[r].info or reading.shared_info for r in ranks}
    for rule in spec.pool_from:
        read, source = _POOL_RULES[rule]
        found = read(reading, ranks, infos)
        if found is not None:
            return found, source
    for limits, source in ((inventory, "inventory"), (profile, "profile")):
        if limits.kv_pool_tokens is not None:
            return {r: limits.kv_pool_tokens / n for r in ranks}, source
    if spec.pool_unknown:
        why = spec.pool_unknown
    elif info := next((i for i in infos.values() if i), None):
        shown = ", ".join(_shown(info, k) for k in ("num_gpu_blocks", "block_size"))
        why = f"KV pool unknown: cache_config_info has {shown} (no plausible pool); {INVENTORY_FIX}"
    else:
        why = (
            "KV pool unknown: no cache_config_info on the page (where vLLM states it: "
            f"kv_cache_size_tokens, or num_gpu_blocks × block_size); {INVENTORY_FIX}"
        )
    return {r: NA(why) for r in ranks}, "unknown"
