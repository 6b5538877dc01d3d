"""HelpScreen: every column and its source metric, and every key (with its binding id)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.theme import Theme as RichTheme
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from sparktop.alerts.thresholds import Thresholds
from sparktop.cluster import LOADED_UTIL_PCT
from sparktop.model import BENIGN_CLOCK_EVENTS
from sparktop.ui import format as fmt
from sparktop.ui.command_line import commands_markdown
from sparktop.ui.expected import COLUMN_NOTES
from sparktop.ui.screens.curve import CurveScreen
from sparktop.ui.screens.node_detail import NodeDetailScreen
from sparktop.ui.views import WIDE_COLUMNS
from sparktop.ui.widgets.body import Body
from sparktop.ui.widgets.budget import BudgetInput, BudgetPane
from sparktop.ui.widgets.command_bar import CommandBar
from sparktop.ui.widgets.engine_panel import EngineBlock
from sparktop.ui.widgets.filter_bar import FilterBar
from sparktop.ui.widgets.node_table import NodeTable


def _reasons(slowdown: bool) -> str:
    r"""``\`sw-therm\` sw_thermal_slowdown, …``: the table's short form beside the name."""
    return ", ".join(
        f"`{short}` {name}"
        for name, short in fmt.SHORT_REASONS.items()
        if (name not in BENIGN_CLOCK_EVENTS) is slowdown
    )


def node_column_help(t: Thresholds) -> tuple[tuple[str, str, str], ...]:
    """Help for every Nodes column, keyed like :data:`sparktop.ui.views.WIDE_COLUMNS`, with
    the thresholds the marks use (the alert rules' own, so the text cannot drift from them)."""
    drop = f"{t.clock_drop_pct:g} %"
    low_power = (
        f"utilisation ≥ {t.low_power_util_pct:g} %, SM clock under "
        f"{t.low_power_clock_ratio * 100:g} % of its baseline (of max clock when it has none), "
        f"power under {t.low_power_power_w:g} W, and no slowdown reason bit"
    )
    return (
        ("node", "inventory name", "`nodes[].name`"),
        ("tp", "tensor-parallel group and rank (`dsv41·0` = head)", "`engines[].nodes`"),
        ("gpu", "GPU index", "`index`"),
        (
            "sm",
            "SM clock now / this GPU's baseline under load (upper quartile of readings at "
            f"≥ {LOADED_UTIL_PCT:g} % util; `p` = the profile's sweep clock until it has its own); "
            f"`▼` when more than {drop} (`alerts.clock_drop_pct`) below it under load",
            "`clocks.sm`, NVML SM clock",
        ),
        ("max", "maximum SM clock (GB10: 3003; ~2.5 GHz under load is normal)", "`clocks.max.sm`"),
        (
            "temp",
            f"GPU temperature, coloured at {t.temperature_c:g} °C (`alerts.temperature_c`)",
            "`temperature.gpu`",
        ),
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
            "active clock-event reasons, short forms of nvidia-smi's names (which node details, "
            f"snapshot and the alerts use): slowdowns coloured ({_reasons(slowdown=True)}), "
            f"benign ones plain ({_reasons(slowdown=False)}); "
            f"`low-power?` = {low_power} (GB10's hidden low-power state, as the alert rule "
            "judges it). For a failed node: why it failed.",
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
            "(the pattern in **reasons**) in the warning colour; `pwr<peers` (power far below "
            "its TP peers' at the same load) and `mem pressure` (see the node details); "
            "`waiting…` (first poll in progress), "
            "`stale N s` (no sample for ~3 polls), `down HH:MM:SS` (unreachable since), "
            "`no driver`, `drv mismatch`, "
            "`host key!`, `auth failed`…",
            "the node's last poll",
        ),
    )


NODE_COLUMN_HELP = node_column_help(Thresholds())
"""The column help with the default thresholds."""

ENGINE_FIELD_HELP: tuple[tuple[str, str, str], ...] = (
    (
        "running",
        "running requests / `max_num_seqs` (server, inventory, else the profile the inventory "
        "or --profile names; `?` when none says)",
        "`vllm:num_requests_running`",
    ),
    (
        "waiting",
        "queued requests (coloured when > 0 at `max_num_seqs`)",
        "`vllm:num_requests_waiting`",
    ),
    ("preempt", "preemptions per second over the window", "`rate(vllm:num_preemptions_total)`"),
    ("KV", "KV-cache usage bar and %", "`vllm:kv_cache_usage_perc` (fraction 0–1)"),
    (
        "pool / free",
        "KV pool and its free part, tokens",
        "`cache_config_info`, else `num_gpu_blocks × block_size`, else inventory / profile",
    ),
    (
        "prefill / decode",
        "tok/s over the window the block names (`over 30 s`)",
        "`rate(vllm:prompt_tokens_total)`, `rate(vllm:generation_tokens_total)`",
    ),
    (
        "now N tok/s",
        "decode over the last ~3 s, shown when it tells another story than the window's: "
        "`now 0 tok/s` once the counters stop",
        "`rate(vllm:generation_tokens_total[3s])`",
    ),
    (
        "+ ~N tok/s in progress",
        "a prompt still being prefilled: the KV gains about N tok/s more than the counted "
        "prompts and decode add (vLLM counts a prompt only when its first token is out, so a "
        "long prefill shows nowhere else until it ends)",
        "Δ(`kv_cache_usage_perc` × pool) ÷ Δt − prefill − decode, over the window",
    ),
    (
        "TTFT p50 / p95",
        "time to first token; `< x` / `> x` when every observation is in the first / `+Inf` bucket",
        "`vllm:time_to_first_token_seconds` bucket deltas",
    ),
    (
        "means: queue + prefill",
        "mean queue and prefill time of the requests finished in the window (not of those "
        "still waiting): together about the mean TTFT (not its p50)",
        "Δ`_sum`/Δ`_count` of `vllm:request_queue_time_seconds`, `request_prefill_time_seconds`",
    ),
    ("ITL p50", "inter-token latency", "`vllm:inter_token_latency_seconds` bucket deltas"),
    (
        "prompt",
        "mean prompt tokens of recently finished requests",
        "Δ`request_prompt_tokens_sum` / Δ`_count`",
    ),
    ("hit", "prefix-cache hit rate", "`prefix_cache_hits_total` / `prefix_cache_queries_total`"),
    (
        "spec",
        "speculative acceptance (accepted ÷ draft tokens) and ×mean tokens per step",
        "Δ`vllm:spec_decode_num_accepted_tokens_total` ÷ Δ`…num_draft_tokens_total`, "
        "÷ Δ`…num_drafts_total` (+1); SGLang `spec_accept_rate`, `spec_accept_length`",
    ),
    ("sparklines", "decode tok/s (each tick's last ~3 s) and KV % history", "history"),
)


HOST_FIELD_HELP: tuple[tuple[str, str, str], ...] = (
    (
        "memory pressure",
        "MemAvailable, swap in use, PSI some/full avg10; the row's `mem pressure` and the "
        "alert from `alerts.mem_available_warn_gib` / `_critical_gib`, `swap_used_warn_gib`, "
        "`psi_some_warn_pct`, `psi_full_critical_pct`",
        "`/proc/meminfo` MemAvailable, SwapTotal − SwapFree; `/proc/pressure/memory`",
    ),
    (
        "against its TP peers",
        "a busy rank whose power sits below `alerts.peer_power_ratio` of its peers' median "
        "(row: `pwr<peers`, the W cell marked), or whose RoCE traffic is below "
        "`alerts.fabric_asymmetry_ratio` of theirs; named by the straggler alert",
        "`power.draw`, `clocks.sm`, `utilization.gpu` of the group; the fabric below",
    ),
    (
        "GPU processes",
        "pid, used memory and its share of the unified memory, name; newest (highest pid) first",
        "`--query-compute-apps=gpu_uuid,pid,process_name,used_memory`",
    ),
    (
        "RoCE fabric",
        "per port: interface, state, physical state, rate, tx/rx Gb/s between two readings "
        "(the node's own clock), error counters and their growth, NIC temperature; `n/a` "
        "with the reason on a node without RDMA",
        "`/sys/class/infiniband/*/ports/*/{state,phys_state,rate,link_layer}`, "
        "`counters/*` (`port_xmit_data`/`port_rcv_data` in 4-byte words), `hw_counters/*`, "
        "`gid_attrs/ndevs/0`, `device/hwmon/hwmon*/temp*_input`; `/proc/uptime`",
    ),
    (
        "spark_hwmon",
        "power channels with their caps (pl1, pl2, syspl1…), energy, PROCHOT, PL level; "
        "shown only where the optional driver is loaded, and quoted when a cap explains a "
        "slow rank",
        "`/sys/class/hwmon/hwmon*/{name,power*_label,power*_input,power*_cap,energy*_*,"
        "prochot,pl_level}` (hwmon name `spbm`)",
    ),
)
"""The node details' host sections: read every 10 s by the probe's slow tier."""


def table(title: str, rows: tuple[tuple[str, str, str], ...]) -> str:
    """A help section: one bullet per field, what it means and where it comes from."""
    lines = [f"## {title}", ""]
    lines += [
        f"- **{label}**: {meaning.rstrip('.…')}. *Source:* {source}"
        for label, meaning, source in rows
    ]
    return "\n".join(lines)


def node_columns(thresholds: Thresholds) -> tuple[tuple[str, str, str], ...]:
    """The column help with each column's on-screen label."""
    labels = {c.key: c.label for c in WIDE_COLUMNS}
    return tuple(
        (labels[key], meaning, source) for key, meaning, source in node_column_help(thresholds)
    )


EXPECTED = """\
**Expected strip** (under each engine): the sweep profile's row for the live (mean prompt
tokens, running), with how it was obtained (exact, interpolated, fitted, extrapolated, no data),
beside the live values and the signed deviation, coloured past
`alerts.expected_deficit_pct` (with *since* when it persists).
"""


def budget_help() -> str:
    """The budget pane's section: inputs, keys, and what each origin tag means."""
    from sparktop.sweep.budget.budget import DEFAULT_OUTPUT_TOKENS
    from sparktop.ui.budget_view import TAG_MEANINGS

    tags = ", ".join(f"`[{tag}]` {meaning}" for tag, meaning in TAG_MEANINGS)
    return f"""\
## Budget pane (`b`)

`b` opens it: `+`/`-` concurrency, `[`/`]` halve/double prompt tokens, `<`/`>` output
tokens, `i` edit the prompt field, Escape (or `b`) closes. Typing a number or a path
(`/`, `~`, `.`) starts the prompt field with it; a file or directory is counted, pasted text
too (exactly with the engine's `/tokenize` when reachable, else estimated). In a field
Enter applies and Escape leaves it. Output tokens default to {DEFAULT_OUTPUT_TOKENS:,}, as
`sparktop budget` does.
Limits come from the live engine (server or inventory) before the profile, as in the
engine row.

Every figure says where it comes from: {tags}; `default` is a built-in default.
"""


def all_bindings(app_class: type[App[Any]]) -> list[Binding]:
    """Every binding with an id in the UI (for the help screen and inventory ``keys:``):
    the app's (``app_class`` and its bases above Textual's ``App``) and its widgets'."""
    owners = [
        c
        for c in reversed(app_class.__mro__)
        if issubclass(c, App) and not c.__module__.startswith("textual.")
    ]
    found: list[Binding] = []
    owned = (NodeTable, EngineBlock, FilterBar, CommandBar, Body, BudgetPane, BudgetInput,
             NodeDetailScreen, CurveScreen)  # fmt: skip
    for owner in (*owners, *owned):
        found += [b for b in owner.__dict__.get("BINDINGS", ()) if isinstance(b, Binding) and b.id]
    return found


def key_text(keys: str, display: Callable[[Binding], str]) -> str:
    """``question_mark`` → ``?``, ``ctrl+p`` → ``^p``: keys as the operator types them
    (``display`` is the app's ``get_key_display``); several keys joined with `` / ``."""
    return " / ".join(display(Binding(key.strip(), "")) for key in keys.split(","))


FIXED_KEYS = (
    ("tab,shift+tab", "focus the next / previous pane (Nodes, engines, events, budget)"),
    ("up,down", "move in the Nodes table, scroll the pane in focus"),
    ("k,j", "up / down in the Nodes table (as in k9s)"),
    ("g,G", "first / last row of the Nodes table (replay: `g` goes to the start)"),
    ("pageup,pagedown", "a page up / down in the Nodes table or the pane in focus"),
)
"""Keys without a binding id (Textual's focus keys, the table's cursor; see
:data:`sparktop.ui.keymap.RESERVED_KEYS`): listed, not remappable."""


def keys_markdown(
    keymap: Mapping[str, str],
    display: Callable[[Binding], str],
    app_class: type[App[Any]],
) -> str:
    """The keys table: key as typed, what it does, its binding id (for ``keys:``); the keys
    that have no id (:data:`FIXED_KEYS`, the palette, the mouse) at its end."""
    lines = [
        "## Keys (remap in the inventory: `keys: {binding id: key}`)",
        "",
        "| key | action | binding id |",
        "|---|---|---|",
    ]
    for binding in all_bindings(app_class):
        key = key_text(keymap.get(binding.id or "", binding.key), display)
        text = binding.tooltip or binding.description or binding.action
        lines.append(f"| `{key}` | {text} | `{binding.id}` |")
    palette = key_text("ctrl+p", display)
    lines += [
        f"| `{palette}` | command palette: jump to a node or engine, details, themes | |",
        *(f"| `{key_text(keys, display)}` | {text} | |" for keys, text in FIXED_KEYS),
        "| mouse | click a row, scroll panes | |",
    ]
    return "\n".join(lines)


PLAIN_MARKDOWN = RichTheme(
    {
        "markdown.code": "bold",
        "markdown.code_block": "none",
        "markdown.block_quote": "italic",
        "markdown.list": "none",
        "markdown.item.number": "none",
        "markdown.h1": "bold underline",
        "markdown.h2": "bold underline",
        "markdown.h3": "bold",
        "markdown.h4": "italic",
        "markdown.link": "underline",
        "markdown.link_url": "underline",
        "markdown.table.border": "dim",
        "markdown.table.header": "bold",
        "markdown.kbd": "bold",
    }
)
"""Rich's Markdown styles without their fixed colours (cyan on black code, magenta headings):
the help takes its colours from the theme, as every other text does."""


class HelpText:
    """The help document drawn by Rich's Markdown renderer in one widget.

    Textual's ``Markdown`` widget builds a widget per paragraph, list item and table cell:
    for this document that took 2.6–3.9 s to lay out on the 2-core VM (pilot, 200×50), all
    on the event loop, so ``?`` showed nothing for seconds. Rich renders the same text in
    ~50 ms."""

    def __init__(self, markdown: str) -> None:
        # Imported here: rich's Markdown brings markdown-it and Pygments (~2 MB, 80 modules),
        # which the monitor needs only once ? is pressed.
        from rich.markdown import Markdown as RichMarkdown

        self.markdown = markdown
        self._parsed = RichMarkdown(markdown)
        self._lines: dict[int, list[list[Segment]]] = {}
        """Lines drawn per width: Textual renders a widget to measure, size and paint it."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = self._lines.get(options.max_width)
        if lines is None:
            with console.use_theme(PLAIN_MARKDOWN):
                lines = console.render_lines(self._parsed, options.update(height=None), pad=False)
            self._lines[options.max_width] = lines
        new_line = Segment.line()
        for line in lines:
            yield from line
            yield new_line


class HelpScreen(ModalScreen[None]):
    """Explains the columns, their source metrics, and the keys. ``escape``/``?`` closes.

    Given the alert thresholds the columns are marked by and the keys table (Markdown, from
    :func:`keys_markdown`)."""

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

    def __init__(self, thresholds: Thresholds, keys: str) -> None:
        super().__init__()
        self.thresholds = thresholds
        self.keys = keys
        self.help_text = HelpText("")
        """The document shown (built in :meth:`compose`)."""

    def compose(self) -> ComposeResult:
        notes = "\n".join(f"- {n}" for n in COLUMN_NOTES)
        thresholds = self.thresholds
        text = "\n\n".join(
            [
                "# sparktop help",
                self.keys,
                commands_markdown(),
                table(
                    "Nodes (one row per GPU, keyed by node + GPU UUID)", node_columns(thresholds)
                ),
                table("Node details beyond the SM clock (read every 10 s)", HOST_FIELD_HELP),
                table(
                    "Engines (one block per server; DP ranks listed when more than one)",
                    ENGINE_FIELD_HELP,
                ),
                EXPECTED,
                notes,
                budget_help(),
            ]
        )
        self.help_text = HelpText(text)
        with VerticalScroll():
            yield Static(self.help_text, id="help-text")
