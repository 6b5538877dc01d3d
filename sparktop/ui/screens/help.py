"""HelpScreen: every column and its source metric, and every key (with its binding id)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from sparktop.ui.expected import COLUMN_NOTES
from sparktop.ui.views import WIDE_COLUMNS

NODE_COLUMN_HELP: tuple[tuple[str, str, str], ...] = (
    ("node", "inventory name", "`nodes[].name`"),
    ("tp", "tensor-parallel group and rank (`dsv41·0` = head)", "`engines[].nodes`"),
    ("gpu", "GPU index", "`index`"),
    (
        "sm",
        "SM clock now / this GPU's baseline under load (upper quartile of "
        "readings at ≥ 50 % util; `p` = the profile's sweep clock until it has its own); `▼` "
        "when more than `clock_drop_pct` below",
        "`clocks.sm`, NVML SM clock",
    ),
    ("max", "maximum SM clock (GB10: 3003; ~2.5 GHz under load is normal)", "`clocks.max.sm`"),
    ("temp", "GPU temperature, coloured at `alerts.temperature_c`", "`temperature.gpu`"),
    ("power", "power draw", "`power.draw`, NVML power (mW)"),
    ("util", "GPU utilisation", "`utilization.gpu`"),
    (
        "mem",
        "`U used/totalG·GPU heldG` on unified memory (GB10 reports "
        "`memory.*` as `[N/A]`); `used/total G` otherwise",
        "`/proc/meminfo` MemTotal − MemAvailable; Σ `--query-compute-apps used_memory`",
    ),
    (
        "why",
        "active clock-event reasons, slowdowns coloured (`sw-therm` `hw-therm` "
        "`pwr-cap` `hw-slow` `pwr-brake`), benign ones plain (`idle` `app-clk` `sync` `disp`); "
        "`low-power?` = busy, under half of max clock, under 30 W, no bit set (GB10 stuck "
        "low-power state). For a failed node: why it failed.",
        "`clocks_event_reasons.active` (NVML bitmask)",
    ),
    (
        "trend",
        "the latest SM clock readings on a 0 → max clock scale: steady clocks draw a flat, "
        "high line and only a real sag dips",
        "history",
    ),
    (
        "state",
        "`ok`; `throttled` (a slowdown reason, or the clock marked `▼`) and `low-power?` "
        "(the pattern in **reasons**) in the warning colour; `stale N s` (no sample for ~3 "
        "polls), `down HH:MM:SS` (unreachable since), `no driver`, `drv mismatch`, "
        "`host key!`, `auth failed`…",
        "the node's last poll",
    ),
)
"""Help for every Nodes column, keyed like :data:`sparktop.ui.views.WIDE_COLUMNS`."""

ENGINE_FIELD_HELP: tuple[tuple[str, str, str], ...] = (
    (
        "running",
        "running requests / `max_num_seqs` (inventory, else profile)",
        "`vllm:num_requests_running`",
    ),
    (
        "waiting",
        "queued requests (coloured when > 0 at `max_num_seqs`)",
        "`vllm:num_requests_waiting`",
    ),
    ("preempt", "preemptions per second", "`rate(vllm:num_preemptions_total)`"),
    ("KV", "KV-cache usage bar and %", "`vllm:kv_cache_usage_perc` (fraction 0–1)"),
    (
        "pool / free",
        "KV pool and its free part, tokens",
        "`cache_config_info`, else `num_gpu_blocks × block_size`, else inventory / profile",
    ),
    (
        "prefill / decode",
        "tok/s over the scrape window",
        "`rate(vllm:prompt_tokens_total)`, `rate(vllm:generation_tokens_total)`",
    ),
    (
        "TTFT p50 / p95",
        "time to first token; `< x` / `> x` when every observation is in the first / `+Inf` bucket",
        "`vllm:time_to_first_token_seconds` bucket deltas",
    ),
    ("ITL p50", "inter-token latency", "`vllm:inter_token_latency_seconds` bucket deltas"),
    (
        "prompt",
        "mean prompt tokens of recently finished requests",
        "Δ`request_prompt_tokens_sum` / Δ`_count`",
    ),
    ("hit", "prefix-cache hit rate", "`prefix_cache_hits_total` / `prefix_cache_queries_total`"),
    ("sparklines", "decode tok/s and KV % history", "history"),
)


def table(title: str, rows: tuple[tuple[str, str, str], ...]) -> str:
    """A help section: one bullet per field, what it means and where it comes from."""
    lines = [f"## {title}", ""]
    lines += [
        f"- **{label}**: {meaning.rstrip('.…')}. *Source:* {source}"
        for label, meaning, source in rows
    ]
    return "\n".join(lines)


def node_columns() -> tuple[tuple[str, str, str], ...]:
    """NODE_COLUMN_HELP with each column's on-screen label."""
    labels = {c.key: c.label for c in WIDE_COLUMNS}
    return tuple((labels[key], meaning, source) for key, meaning, source in NODE_COLUMN_HELP)


EXPECTED = """\
**Expected strip** (under each engine): the sweep profile's row for the live (mean prompt
tokens, running), with how it was obtained (exact, interpolated, clamped, anchored, no data),
beside the live values and the signed deviation, coloured past
`alerts.expected_deficit_pct` (with *since* when it persists).
"""


def budget_help() -> str:
    """The budget pane's section: inputs, keys, and what each origin tag means."""
    from sparktop.sweep.budget import DEFAULT_OUTPUT_TOKENS
    from sparktop.ui.budget_view import TAG_MEANINGS

    tags = ", ".join(f"`[{tag}]` {meaning}" for tag, meaning in TAG_MEANINGS)
    return f"""\
## Budget pane (`b`)

`b` opens it with the cursor in the prompt field: type prompt tokens, a file or directory
path (counted), or paste text (counted exactly with the engine's `/tokenize` when reachable,
else estimated); Enter applies, Escape leaves the field, Escape again (or `b`) closes the
pane. With no field focused: `+`/`-` concurrency, `[`/`]` halve/double prompt tokens,
`<`/`>` output tokens, `i` edit. Output tokens default to {DEFAULT_OUTPUT_TOKENS:,}, as
`sparktop budget` does.
Limits come from the live engine (server or inventory) before the profile, as in the
engine row.

Every figure says where it comes from: {tags}; `default` is a built-in default.
"""


def all_bindings() -> list[Binding]:
    """Every binding with an id in the UI (for the help screen and inventory ``keys:``)."""
    from sparktop.ui.app import SparktopApp
    from sparktop.ui.widgets.body import Body
    from sparktop.ui.widgets.budget import BudgetInput, BudgetPane
    from sparktop.ui.widgets.node_table import NodeTable

    found: list[Binding] = []
    for owner in (SparktopApp, NodeTable, Body, BudgetPane, BudgetInput):
        found += [b for b in owner.BINDINGS if isinstance(b, Binding) and b.id]
    return found


def keys_markdown(keymap: dict[str, str]) -> str:
    lines = [
        "## Keys (remap in the inventory: `keys: {binding id: key}`)",
        "",
        "| key | action | binding id |",
        "|---|---|---|",
    ]
    for binding in all_bindings():
        key = keymap.get(binding.id or "", binding.key)
        text = binding.description or binding.action
        lines.append(f"| `{key}` | {text} | `{binding.id}` |")
    lines += [
        "| `ctrl+p` | command palette: jump to a node or engine, details, themes | |",
        "| mouse | click a row, scroll panes | |",
    ]
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    """Explains the columns, their source metrics, and the keys. ``escape``/``?`` closes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close", id="help.close"),
    ]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90%;
        height: 90%;
        background: $surface;
        border: round $primary;
        padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        notes = "\n".join(f"- {n}" for n in COLUMN_NOTES)
        keymap = dict(getattr(self.app, "_keymap", {}) or {})
        text = "\n\n".join(
            [
                "# sparktop help",
                table("Nodes (one row per GPU, keyed by node + GPU UUID)", node_columns()),
                table(
                    "Engines (one block per server; DP ranks listed when more than one)",
                    ENGINE_FIELD_HELP,
                ),
                EXPECTED,
                notes,
                budget_help(),
                keys_markdown(keymap),
            ]
        )
        with VerticalScroll():
            yield Markdown(text)
