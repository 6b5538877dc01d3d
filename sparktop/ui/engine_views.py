"""What each engine block shows, as lines of (text, style) spans (Textual-free).

Sources of every number: DESIGN.md §5 (``vllm:num_requests_running``/``waiting``,
``kv_cache_usage_perc``, counter rates, histogram bucket deltas). Missing values show ``·``.
Items are groups that never split; :func:`pack` fills lines up to the block's width, so the
same block reads well at 120 and at 80 columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparktop.model import NA, EngineSample, EngineState, Num, is_num
from sparktop.safe_text import printable
from sparktop.ui import format as fmt
from sparktop.ui.packing import Field, Group, Line, pack
from sparktop.ui.views import Cell, ViewConfig

KV_BAR_WIDTH = 16
DOWN = (EngineState.UNREACHABLE, EngineState.NOT_ANSWERING)
"""No page at all: refused or never connected, or connected and never answered."""


DOWN_OR_NO_PAGE = (
    EngineState.UNREACHABLE,
    EngineState.NOT_ANSWERING,
    EngineState.METRICS_DISABLED,
    EngineState.UNAVAILABLE,
)
"""States without a page to read: the header says the state, not a page alert's rule."""

SEVERITY_WORD = {"critical": ("CRIT", "crit"), "warning": ("WARN", "warn"), "info": ("info", "dim")}


def _about(alert: Any, engine: str, tp_nodes: Sequence[str]) -> bool:
    """Whether ``alert`` is on ``engine``: its own, or a node alert (down, throttled) on one
    of its tensor-parallel ranks, since the group steps at its slowest rank's pace."""
    own = getattr(alert, "engine", None)
    if own is not None:
        return bool(own == engine)
    return getattr(alert, "node", None) in tp_nodes


def worst_alert(alerts: Sequence[Any], engine: str, tp_nodes: Sequence[str] = ()) -> Any | None:
    """The worst active alert about ``engine`` or a node of its TP group ``tp_nodes``
    (highest severity, then the earliest), or None. ``alerts`` are
    :class:`~sparktop.alerts.model.Alert`-like (``engine``, ``node``, ``severity``,
    ``started_s``)."""
    mine = [a for a in alerts if _about(a, engine, tp_nodes)]
    if not mine:
        return None
    return min(mine, key=lambda a: (-a.severity.rank, a.started_s, a.rule))


def engine_state(
    sample: EngineSample,
    now: float,
    config: ViewConfig,
    alerts: Sequence[Any] = (),
) -> Cell:
    """The engine's one verdict: its worst active alert (``CRIT engine.stalled``, ``WARN
    expected.decode +1``, ``CRIT node.down @spark-4`` for a rank of its TP group) when it has
    one and its page answers, else ok / stale N s / unreachable since HH:MM:SS / metrics
    disabled / unavailable. The header never says ok while an alert on the engine or one of
    its ranks is active."""
    tp_nodes = config.engine_nodes.get(sample.engine, ())
    worst = worst_alert(alerts, sample.engine, tp_nodes)
    # A page that does not answer says so itself (its engine.down alert follows, the page's
    # own alerts clear); one that answers shows its worst alert (a stall over frozen gauges).
    if worst is not None and (sample.ok or sample.state not in DOWN_OR_NO_PAGE):
        word, style = SEVERITY_WORD.get(str(worst.severity), ("WARN", "warn"))
        more = sum(1 for a in alerts if _about(a, sample.engine, tp_nodes)) - 1
        rank = f" @{worst.node}" if getattr(worst, "engine", None) is None else ""
        return (f"{word} {worst.rule}{rank}" + (f" +{more}" if more else ""), style)
    if sample.ok:
        age = now - sample.time_s
        if age > config.stale_after_s():
            return (f"stale {fmt.age(age)}", "stale")
        return ("ok", "ok")
    if sample.state is EngineState.STALE:
        return ("gauges stale", "warn")
    if sample.state is EngineState.DEGRADED:
        return ("degraded: gauges refused", "warn")
    if sample.state in DOWN:
        since = sample.since_s if sample.since_s is not None else sample.time_s
        return (f"{sample.state.value} since {fmt.clock_time(since)}", "crit")
    return (str(sample.state), "warn")


def limit_seqs(sample: EngineSample, fallback: float | None) -> float | None:
    """``max_num_seqs``: the sample's (server, inventory or the profile that describes the
    engine, see :mod:`sparktop.plan`), else the plan's (for a sample without limits)."""
    if is_num(sample.max_num_seqs):
        return float(sample.max_num_seqs)
    return fallback


def title_groups(
    sample: EngineSample, now: float, config: ViewConfig, alerts: Sequence[Any] = ()
) -> list[Group]:
    groups: list[Group] = [
        [(sample.engine, "bold")],
        [engine_state(sample, now, config, alerts)],
    ]
    nodes = config.engine_nodes.get(sample.engine)
    if nodes:  # one group per node, so a long TP group wraps between names
        # A rank with an active node alert (down, throttled) is drawn in its severity.
        marks = {n: _rank_style(alerts, n) for n in nodes}
        groups.append([("TP ", "dim"), (nodes[0], marks[nodes[0]])])
        groups += [[(node, marks[node])] for node in nodes[1:]]
    if len(sample.ranks) > 1:
        groups.append([(f"DP ranks {len(sample.ranks)}", "dim")])
    model = f" {printable(sample.model)}" if sample.model else ""  # the server's text: one line
    groups.append([(sample.kind + model, "dim")])
    return groups


def _rank_style(alerts: Sequence[Any], node: str) -> str:
    worst = worst_alert([a for a in alerts if getattr(a, "engine", None) is None], "", (node,))
    if worst is None:
        return ""
    return SEVERITY_WORD.get(str(worst.severity), ("WARN", "warn"))[1]


def load_groups(sample: EngineSample, config: ViewConfig, max_seqs: float | None) -> list[Group]:
    """running/max_num_seqs, waiting, preemptions, KV bar, pool and free tokens."""
    running, waiting = sample.running, sample.waiting
    full = max_seqs is not None and is_num(running) and running >= max_seqs
    queued = is_num(waiting) and waiting > 0
    # An unknown limit reads "/?": another setup's max_num_seqs would be a wrong number.
    # No running figure: "n/a (reason)", never "n/a/8".
    seqs = (f"/{max_seqs:,.0f}" if max_seqs is not None else "/?") if is_num(running) else ""
    kv = sample.kv_usage
    kv_pct = float(kv) * 100 if is_num(kv) else None
    kv_style = "crit" if kv_pct is not None and kv_pct >= config.kv_usage_pct else "bar"
    kv_text = f" {kv_pct:.1f}%" if kv_pct is not None else " n/a"
    preempt = sample.preemptions_per_s
    free = sample.kv_free_tokens
    # free tokens are the pool less KV usage × pool: a reason of either is said once, there
    pool = sample.kv_pool_tokens
    free_why = (
        [(" (as KV)", "dim")]
        if isinstance(free, NA) and isinstance(kv, NA) and free.reason == kv.reason
        else [(" (as pool)", "dim")]
        if isinstance(free, NA) and isinstance(pool, NA) and free.reason == pool.reason
        else na_why(free)
    )
    # Rooms: running up to the limit (``1,024/1,024``), waiting ``9,999``, ``99.99/s``,
    # the bar and `` 100.0%``, tokens as ``11.43M``.
    return [
        Field([("running ", "dim"),
               (fmt.num(running, ",.0f") + seqs, "warn" if full and queued else ""),
               *na_why(running)], max(2 * len(seqs) - 1, 4 + len(seqs))),
        Field([("waiting ", "dim"), (fmt.num(waiting, ",.0f"), "warn" if queued else ""),
               *na_why(waiting)], 5),
        Field([("preempt ", "dim"),
               (fmt.num(preempt, ".2f") + ("/s" if is_num(preempt) else ""),
                "crit" if is_num(preempt) and preempt > 0 else ""),
               *na_why(preempt)], 7),
        Field([("KV ", "dim"), (fmt.bar(kv, KV_BAR_WIDTH), kv_style),
               (kv_text, "crit" if kv_style == "crit" else ""),
               *na_why(kv)], KV_BAR_WIDTH + 7),
        Field([("pool ", "dim"), (fmt.si_tokens(pool), ""), *pool_why(sample)], 6),
        Field([("free ", "dim"), (fmt.si_tokens(free) + " tok", ""), *free_why], 10),
    ]  # fmt: skip


def na_why(value: Num) -> Group:
    """`` (reason)`` after an n/a figure, printable; nothing for a number or no reason."""
    if isinstance(value, NA) and value.reason:
        return [(f" ({printable(value.reason)})", "dim")]
    return []


SECONDS_ROOM = 8
"""A duration's room in a line: ``24.50 s*``, ``999 ms*``, ``< 10 ms``."""
TPS_ROOM = 12
"""A token rate's: ``99,999 tok/s``."""

LIFETIME_MARK = "*"
LIFETIME_LEGEND = "* since server start"
"""Beside a figure over the server's lifetime (no window yet, or nothing finished in it), as
``snapshot`` marks it."""


def _windowed(sample: EngineSample, name: str, text: str) -> Group:
    """``text`` of field ``name``: marked when it covers the lifetime; n/a with its reason."""
    value = getattr(sample, name)
    if not is_num(value) and not hasattr(value, "value_s"):
        reason = getattr(value, "reason", "")
        return [(text, "")] + ([(f" ({printable(reason)})", "dim")] if reason else [])
    return [(text + (LIFETIME_MARK if name in sample.since_start else ""), "")]


def _reason(sample: EngineSample, name: str) -> str | None:
    """Why field ``name`` is n/a ("" without a reason); None when it has a value."""
    value = getattr(sample, name)
    if is_num(value) or hasattr(value, "value_s"):
        return None
    return str(getattr(value, "reason", "") or "")


def latency_groups(sample: EngineSample, lat: dict[str, str]) -> list[Group]:
    """``TTFT p50 8.12 s p95 18.50 s`` and ``ITL p50 18 ms`` (``lat``: each quantile as
    text). Figures n/a for one reason say it once: ``TTFT · ITL n/a (llama.cpp exports no
    latency histograms)``, ``TTFT n/a (…)``, not the reason after every quantile."""
    why = {k: _reason(sample, k) for k in ("ttft_p50", "ttft_p95", "itl_p50")}
    ttft, itl = {why["ttft_p50"], why["ttft_p95"]}, why["itl_p50"]
    if len(ttft) == 1 and None not in ttft and (shared := ttft.pop()):
        why_group: Group = [(fmt.NA_TEXT, ""), (f" ({printable(shared)})", "dim")]
        if itl == shared:
            return [[("TTFT · ITL ", "dim"), *why_group]]
        ttft_group = [("TTFT ", "dim"), *why_group]
    else:
        ttft_group = Field([
            ("TTFT p50 ", "dim"), *_windowed(sample, "ttft_p50", lat["ttft_p50"]),
            (" p95 ", "dim"), *_windowed(sample, "ttft_p95", lat["ttft_p95"]),
        ], 2 * SECONDS_ROOM)  # fmt: skip
    itl_cells = _windowed(sample, "itl_p50", lat["itl_p50"])
    return [ttft_group, Field([("ITL p50 ", "dim"), *itl_cells], SECONDS_ROOM)]


def pool_why(sample: EngineSample) -> Group:
    """Beside ``pool n/a``: where the figure would come from, short (``(no cache_config_info
    on the page)``; snapshot and the budget give the whole reason with the fix)."""
    pool = sample.kv_pool_tokens
    if not isinstance(pool, NA) or not pool.reason:
        return []
    short = pool.reason.removeprefix("KV pool unknown: ").split(";")[0].split(" (")[0]
    return [(f" ({printable(short)})", "dim")]


def rate_groups(sample: EngineSample) -> list[Group]:
    """Token rates, TTFT and ITL quantiles, mean prompt length, prefix-cache hit rate."""
    hit = sample.prefix_hit_rate
    lat = {k: fmt.quantile(getattr(sample, k)) for k in ("ttft_p50", "ttft_p95", "itl_p50")}
    hit_text = f"{float(hit) * 100:.0f}%" if is_num(hit) else fmt.NA_TEXT
    ttft, *itl = latency_groups(sample, lat)
    split = ttft_split(sample)  # the mean TTFT's parts, beside the TTFT quantiles
    progress = in_progress(sample)  # `` + ~3,380 tok/s in progress`` (its " + ~" a label)
    window = window_cells(sample)  # `` over 30 s`` (a label), as it fills: room for 999 s
    window_room = len(" over 999 s") - len(window[0][0]) if window else 0
    groups: list[Group] = [
        Field([("prefill ", "dim"), (fmt.num(sample.prefill_tps) + " tok/s", ""), *progress],
              TPS_ROOM + (len("999,999 tok/s in progress") if progress else 0)),
        Field([("decode ", "dim"), (fmt.num(sample.decode_tps) + " tok/s", "bold"), *window],
              TPS_ROOM + window_room),
        *([now] if (now := now_group(sample)) else []),
        ttft, *([split] if split else []), *itl,
        Field([("prompt ", "dim"),
               *_windowed(sample, "mean_prompt_tokens", fmt.num(sample.mean_prompt_tokens))],
              len("123,456*")),
        Field([("hit ", "dim"), *_windowed(sample, "prefix_hit_rate", hit_text)], len("100%*")),
    ]  # fmt: skip
    if {"ttft_p50", "ttft_p95", "itl_p50", "mean_prompt_tokens", "prefix_hit_rate"} & set(
        sample.since_start
    ):
        groups.append([(LIFETIME_LEGEND, "dim")])
    spec = spec_group(sample)
    if spec:
        groups.append(spec)
    return groups


def window_cells(sample: EngineSample) -> Group:
    """`` over 30 s``: the span the token, preemption and finish rates cover (the monitor's
    trailing window, shorter until it has filled)."""
    window = sample.window_s
    if not window:
        return []
    return [(f" over {window:.0f} s", "dim")]


NOW_SHOWN_SHARE = 0.5
"""The last seconds' decode rate is shown beside the window's when it differs by more than
this share of it (a burst starting or ending), and always when it is 0 under a window rate."""


def now_group(sample: EngineSample) -> Group:
    """``now 0 tok/s``: the decode rate over the last ~3 s
    (:attr:`~sparktop.model.EngineSample.decode_tps_now`) when it tells another story than
    the window's: an engine that stopped generating shows it within seconds."""
    now, window = sample.decode_tps_now, sample.decode_tps
    if not (is_num(now) and is_num(window)) or not sample.now_window_s:
        return []
    span = f" (last {sample.now_window_s:.0f} s)"
    if now == 0 and window > 0:
        return Field([("now ", "dim"), ("0 tok/s", "warn"), (span, "dim")], TPS_ROOM)
    if abs(now - window) > NOW_SHOWN_SHARE * max(window, 1.0):
        return Field([("now ", "dim"), (fmt.num(now) + " tok/s", ""), (span, "dim")], TPS_ROOM)
    # Not shown, its room kept: the group comes and goes with bursts, and a block whose
    # lines re-wrapped as it did changed height and moved every block below it (the whole
    # engine pane repainted, tick after tick).
    return Field([(" " * (len("now ") + len(span)), "dim")], TPS_ROOM)


IN_PROGRESS_MIN_TPS = 500.0
IN_PROGRESS_MIN_SHARE = 0.25
"""Shown from this many tok/s and this share of the counted prefill rate: the prompts of an
ordinary load are in prefill all the time too (a few % of the rate on the simulator); a long
prompt in prefill is a large part of it."""


def in_progress(sample: EngineSample) -> Group:
    """`` + ~3,380 tok/s in progress``: KV filling faster than the counted prompts and decode
    explain (:attr:`~sparktop.model.EngineSample.prefill_in_progress_tps`), i.e. a long prompt
    still being prefilled, which TTFT and ``prefill`` only show once it is done."""
    rate = sample.prefill_in_progress_tps
    counted = sample.prefill_tps
    if not is_num(rate) or rate < max(
        IN_PROGRESS_MIN_TPS, IN_PROGRESS_MIN_SHARE * (counted if is_num(counted) else 0.0)
    ):
        return []
    return [(" + ~", "dim"), (f"{rate:,.0f}", "warn"), (" tok/s in progress", "warn")]


def ttft_split(sample: EngineSample) -> Group:
    """``means: queue 20 ms + prefill 1.30 s``: mean times of the requests finished
    in the window (``vllm:request_queue_time_seconds``, ``request_prefill_time_seconds``),
    marked ``*`` when over the server's lifetime; they add up to about the mean TTFT, not to
    the p50 beside them, and say nothing of the requests still waiting (8 waiting for 22 s
    beside a queue mean of 0 ms read as a contradiction when it said only "means"); empty
    when the server exports neither."""
    queue, prefill = sample.queue_time_mean_s, sample.prefill_time_mean_s
    if not (is_num(queue) or is_num(prefill)):
        return []
    waiting_style = "warn" if is_num(queue) and is_num(prefill) and queue > prefill else ""

    def mark(name: str) -> str:
        return LIFETIME_MARK if name in sample.since_start else ""

    return Field([
        # "means of finished" said so in the block, but the longer line re-wrapped the
        # block as values changed length, and every tick repainted the whole screen (bytes
        # a tick 25.6 -> 63.6 KiB, bench_render): the help and docs say whose means.
        ("means: queue ", "dim"),
        (fmt.seconds(queue) + mark("queue_time_mean_s"), waiting_style),
        (" + prefill ", "dim"),
        (fmt.seconds(prefill) + mark("prefill_time_mean_s"), ""),
    ], 2 * SECONDS_ROOM)  # fmt: skip


def spec_group(sample: EngineSample) -> Group:
    """``spec 54% ×3.69``: accepted ÷ draft tokens and mean tokens per step; empty without
    speculative decoding."""
    rate, length = sample.spec_acceptance_rate, sample.spec_mean_accept_len
    if not is_num(rate):
        return []
    group: Group = [("spec ", "dim"), (f"{rate * 100:.0f}%", "")]
    if is_num(length):
        group.append((f" ×{length:.2f}", ""))
    return Field(group, len("100% ×9.99"))


def rank_groups(rank: object) -> list[Group]:
    kv = getattr(rank, "kv_usage", None)
    return [
        [(f"rank {getattr(rank, 'rank', '?')}", "accent")],
        [("running ", "dim"), (fmt.num(getattr(rank, "running", None), ".0f"), "")],
        [("waiting ", "dim"), (fmt.num(getattr(rank, "waiting", None), ".0f"), "")],
        [("KV ", "dim"), (f"{kv * 100:.0f}%" if is_num(kv) else fmt.NA_TEXT, "")],
        [("pool ", "dim"), (fmt.si_tokens(getattr(rank, "kv_pool_tokens", None)), "")],
        [("decode ", "dim"), (fmt.num(getattr(rank, "decode_tps", None)) + " tok/s", "")],
    ]


def failure_line(sample: EngineSample) -> Line:
    text = sample.message or str(sample.state)  # the source says what a 404 means here
    return [(text, "crit" if sample.state in DOWN else "warn")]


def engine_lines(
    sample: EngineSample,
    now: float,
    config: ViewConfig,
    max_seqs: float | None,
    width: int = 118,
    alerts: Sequence[Any] = (),
) -> list[Line]:
    """The text lines of one engine block (the sparklines and expected strip come after);
    ``alerts``: the active ones, whose worst on this engine is its state."""
    lines = pack(title_groups(sample, now, config, alerts), width)
    if sample.state in (
        EngineState.UNREACHABLE,
        EngineState.NOT_ANSWERING,
        EngineState.METRICS_DISABLED,
        EngineState.UNAVAILABLE,
    ):
        return [*lines, failure_line(sample)]
    lines += pack(load_groups(sample, config, max_seqs), width)
    lines += pack(rate_groups(sample), width)
    if sample.message:
        lines.append([(sample.message, "warn")])
    if len(sample.ranks) > 1:
        for rank in sample.ranks:
            lines += pack(rank_groups(rank), width, indent="    ")
    return lines
