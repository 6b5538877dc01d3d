"""What the Nodes rows and engine lines say for the shared nvidia-smi cases and edge values."""

from __future__ import annotations

import re
from dataclasses import replace

from sparktop.cluster import ClusterState
from sparktop.model import NA, EngineState, NodeMemory, NodeSample, NodeState, Quantile
from sparktop.sources.nvsmi.node import classify_failure
from sparktop.sources.nvsmi.tables import parse_gpu_csv
from sparktop.ui import format as fmt
from sparktop.ui.engine_views import engine_lines
from sparktop.ui.packing import pack
from sparktop.ui.views import (
    COMPACT_COLUMNS,
    NARROW_COLUMNS,
    WIDE_COLUMNS,
    Cell,
    ViewConfig,
    columns_for,
    failure_text,
    node_rows,
)
from tests.conftest import CASES
from tests.ui.fakes import T0, engine, gpu, node

NVSMI = CASES / "nvidia-smi"
UNIFIED = NodeMemory(124_546.0, 94_000.0, 65_536.0, unified=True)


def rows_for(sample: NodeSample, now: float = T0, narrow: bool = False) -> dict[str, Cell]:
    state = ClusterState()
    state.apply(sample)
    known = {sample.node: sample.gpus} if sample.gpus else {}
    (row,) = node_rows(state, known, now, ViewConfig(), narrow=narrow)
    return dict(row.cells)


def message(cells: dict[str, Cell]) -> str:
    """A failed row's message as it reads across its memory, reasons and trend cells."""
    return " ".join(cells[k][0] for k in ("mem", "why", "trend") if cells[k][0])


def test_a_failure_message_reads_across_the_empty_cells() -> None:
    sample = NodeSample("vm", T0, NodeState.NO_DRIVER, "no NVIDIA driver (NVML not found)")
    cells = rows_for(sample)
    assert message(cells) == "no NVIDIA driver (NVML not found)"
    assert cells["state"] == ("no driver", "warn")
    narrow = rows_for(sample, narrow=True)
    assert message(narrow).startswith("no NVIDIA driver")


def test_a_down_row_shows_the_cause_and_the_state_cell_the_time() -> None:
    # A source's message is the cause only; since when is since_s, formatted by the UI.
    sample = NodeSample(
        "spark-4", T0, NodeState.UNREACHABLE, "connection refused [errno 111]", since_s=T0,
    )  # fmt: skip
    cells = rows_for(sample)
    assert message(cells) == "connection refused [errno 111]"
    assert cells["state"][0] == f"down {fmt.clock_time(T0)}"
    assert (
        failure_text(sample)
        == f"unreachable since {fmt.clock_time(T0)}: connection refused [errno 111]"
    )


def test_a_failure_not_rechecked_says_when_it_was_checked_and_the_next_try() -> None:
    # Issue 20: a backed-off source repeats its failure; the row must not read as fresh.
    sample = NodeSample(
        "spark-4", T0, NodeState.UNREACHABLE, "connection refused", since_s=T0 - 40,
        checked_s=T0 - 12, retry_s=T0 + 9,
    )  # fmt: skip
    cells = rows_for(sample)
    assert message(cells) == "connection refused · 12 s ago, retry in 9 s"
    assert cells["state"][0] == f"down {fmt.clock_time(T0 - 40)}"  # since the failure began
    tried_now = replace(sample, checked_s=None, retry_s=T0 + 4)  # this poll tried
    assert message(rows_for(tried_now)) == "connection refused · retry in 4 s"
    every_poll = replace(sample, checked_s=None, retry_s=None)  # a source with no backoff
    assert message(rows_for(every_poll)) == "connection refused"


def case_node(name: str) -> NodeSample:
    gpus = parse_gpu_csv((NVSMI / name).read_text())
    return NodeSample("spark-1", T0, gpus=gpus, memory=UNIFIED)


def test_gb10_memory_is_shown_as_unified_never_zero() -> None:
    cells = rows_for(case_node("gb10-query-with-header.csv"))
    assert cells["mem"] == ("U 92/122G·GPU 64G", "")
    assert rows_for(case_node("gb10-query-with-header.csv"), narrow=True)["mem"][0] == "U 92/122G"


def test_thermal_slowdown_is_decoded_and_coloured() -> None:
    cells = rows_for(case_node("gb10-thermal-slowdown.csv"))
    assert cells["why"] == ("sw-therm", "crit")
    assert cells["sm"][1] == "crit"
    assert cells["temp"] == ("91", "crit")
    assert cells["state"] == ("throttled", "warn")  # never a green ok while slowed down


def test_hidden_low_power_pattern_is_flagged() -> None:
    cells = rows_for(case_node("gb10-hidden-low-power.csv"))
    assert cells["why"] == ("low-power?", "crit")
    assert cells["state"] == ("low-power?", "warn")


def test_driver_mismatch_and_no_devices_name_the_problem() -> None:
    for case, state_text, why in (
        ("driver-mismatch.txt", "drv mismatch",
         "driver/library mismatch (reboot or reload the driver)"),
        ("no-devices.txt", "no GPU", "no GPU visible"),
    ):  # fmt: skip
        failure = classify_failure((NVSMI / case).read_text(), 1)
        assert failure is not None
        sample = NodeSample("spark-2", T0, failure[0], failure[1], since_s=T0)
        cells = rows_for(sample)
        assert cells["state"][0] == state_text
        shown = message(cells)
        # Across the memory, reasons and trend cells; the end cut with … when it runs on.
        assert shown == why or (shown.endswith("…") and why.startswith(shown[:-1]))
        assert len(shown) > 20 or shown == why


def test_below_baseline_marker_and_profile_fallback() -> None:
    state = ClusterState()
    for i in range(10):
        state.apply(node("spark-1", T0 + i, gpus=(gpu(uuid="GPU-x", sm_clock_mhz=2510.0),)))
    state.apply(node("spark-1", T0 + 10, gpus=(gpu(uuid="GPU-x", sm_clock_mhz=2100.0),)))
    (row,) = node_rows(state, {}, T0 + 10, ViewConfig())
    assert row.cells["sm"] == ("2100▼/2510", "crit")

    fresh = ClusterState()
    fresh.apply(node("spark-2", T0, gpus=(gpu(uuid="GPU-y", sm_clock_mhz=2100.0),)))
    (row,) = node_rows(fresh, {}, T0, ViewConfig(profile_baseline_mhz=2509.0))
    assert row.cells["sm"] == ("2100▼/2509p", "crit")


def test_a_down_node_keeps_its_gpu_rows() -> None:
    state = ClusterState()
    healthy = node("spark-1", T0)
    state.apply(healthy)
    state.apply(NodeSample("spark-1", T0 + 5, state=healthy.state.UNREACHABLE,
                           message="timed out", since_s=T0 + 5))  # fmt: skip
    (row,) = node_rows(state, {"spark-1": healthy.gpus}, T0 + 6, ViewConfig())
    assert row.gpu_key == "GPU-spark-1"
    assert row.cells["state"] == ("down " + fmt.clock_time(T0 + 5), "crit")
    assert row.cells["mem"] == ("timed out", "crit")


def test_column_sets_follow_the_width() -> None:
    assert columns_for(120) is WIDE_COLUMNS
    assert columns_for(80) is NARROW_COLUMNS
    assert columns_for(74) is COMPACT_COLUMNS
    # Each set fits its width: content + 2 cells of padding per column + a 1-cell scrollbar.
    for width, columns in ((119, WIDE_COLUMNS), (79, NARROW_COLUMNS)):
        assert sum(c.width + 2 for c in columns) + 1 <= width


def test_values_a_gpu_does_not_provide_are_na_not_zero() -> None:
    bare = gpu(
        uuid="GPU-z", temperature_c=NA("[N/A]"), power_w=NA("[Not Supported]"),
        utilization_pct=NA("[N/A]"),
    )  # fmt: skip
    cells = rows_for(node("spark-1", gpus=(bare,)))
    assert cells["temp"][0] == cells["power"][0] == cells["util"][0] == "n/a"


def test_engine_counts_carry_thousands_separators_as_snapshot_does() -> None:
    sample = engine(running=162.0, waiting=2826.0)
    text = " ".join(
        t for line in engine_lines(sample, T0, ViewConfig(), 1024.0, 200) for t, _ in line
    )
    flat = " ".join(text.split())
    assert "running 162/1,024" in flat and "waiting 2,826" in flat, text


def test_engine_lines_pack_to_the_width_and_show_bounds() -> None:
    sample = engine(itl_p50=Quantile(0.01, "<"), waiting=3.0)
    wide = engine_lines(sample, T0, ViewConfig(), 8.0, width=118)
    narrow = engine_lines(sample, T0, ViewConfig(), 8.0, width=76)
    assert len(narrow) > len(wide)
    for line in narrow:
        assert sum(len(t) for t, _ in line) <= 76
    text = "\n".join("".join(t for t, _ in line) for line in wide)
    assert "ITL p50 < 10 ms" in text
    assert ("3", "warn") in [cell for line in wide for cell in line]  # waiting at max_num_seqs


def test_engine_failure_replaces_the_numbers() -> None:
    gone = replace(engine(), state=EngineState.UNREACHABLE, message="connect timeout",
                   since_s=T0)  # fmt: skip
    lines = engine_lines(gone, T0, ViewConfig(), None)
    text = "\n".join("".join(t for t, _ in line) for line in lines)
    assert "unreachable since" in text and "connect timeout" in text
    assert "running" not in text


def test_pack_keeps_groups_whole() -> None:
    groups = [[("aaaa", "")], [("bbbb", ""), ("cc", "")], [("dddd", "")]]
    assert pack(groups, 12) == [
        [("aaaa", ""), ("  ", ""), ("bbbb", ""), ("cc", "")],
        [("  ", ""), ("dddd", "")],
    ]


def test_a_group_wider_than_the_line_goes_on_deeper_than_the_line_it_continues() -> None:
    """A long reason on a continuation line: its own wrap starts under more indent than the
    line (the terminal's wrap put it at the edge, under less), styles kept, within width."""
    reason = [("no data: ", "dim"), ("running reached 32 in this window " * 3, "dim")]
    lines = pack([[("expected", "")], [("mix of running 6–32", "")], reason], 40)
    texts = ["".join(t for t, _ in line) for line in lines]
    assert texts[0] == "expected  mix of running 6–32"
    assert texts[1].startswith("  no data: running")
    assert all(t.startswith("    ") and not t.startswith("     ") for t in texts[2:])
    assert len(texts) > 3 and max(len(t) for t in texts) <= 40
    assert {s for line in lines[1:] for t, s in line if t.strip()} == {"dim"}
    # the budget pane goes on under its figures' column: ``hang`` says where
    hung = pack([[("TTFT ", "dim")], reason], 40, indent=" " * 8, hang=" " * 8)
    assert all(line[0] == (" " * 8, "") for line in hung[1:])


def test_sparkline_and_bar_text() -> None:
    assert fmt.spark([1, 2, 3, 4, 5, 6, 7, 8], 8) == "▁▂▃▄▅▆▇█"
    assert fmt.spark([5, 5, 5], 8) == "▄▄▄"
    assert fmt.spark([], 8) == ""
    # On a fixed 0..max-clock scale, healthy jitter is flat and a sag is a sag.
    assert fmt.spark([2498, 2521, 2505, 2512, 2500, 2519, 2510], 7, 0, 3003) == "▇▇▇▇▇▇▇"
    assert fmt.spark([2509, 2509, 1833, 1833, 513], 7, 0, 3003) == "▇▇▅▅▂"
    # Two lines tall; a reading of 0 still draws ▁ (absent readings are n/a, not bars).
    assert fmt.plot_rows([2509, 0], 4, 2, 0, 3003) == ["▅ ", "█▁"]
    assert fmt.bar(0.5, 8) == "████░░░░"
    assert fmt.bar(NA(), 4) == "░░░░"


def test_expected_strip_says_how_in_a_word_and_no_data_with_its_reason_once() -> None:
    from functools import partial

    from sparktop.sweep.estimator.estimator import estimate
    from sparktop.sweep.expected.matched import MatchedExpected
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.ui.expected import DeficitClock, expected_lines

    profile = load_profile("4x-spark-dsv41-flash-1017")
    fn = MatchedExpected(profile, partial(estimate, profile))

    def text(sample: object) -> str:
        lines = expected_lines(sample, profile.name, fn, 25.0, DeficitClock(), T0)  # type: ignore[arg-type]
        return "\n".join("".join(t for t, _ in line) for line in lines)

    between = text(engine(running=6.0, mean_prompt_tokens=6019.0))
    assert "interpolated" in between and "log-log" not in between
    beyond = text(engine(running=32.0))
    assert beyond.count("outside the measured columns") == 1
    assert "TTFT no data" in beyond and "ttft_s" not in beyond
    assert "no data (no data" not in beyond  # the reason said once, not after "no data" again
    # A server that does not report running requests is not idle (cache-config-none case).
    unknown = text(engine(running=NA("not exported")))
    assert "n/a" in unknown and "idle" not in unknown
    assert "idle" in text(engine(running=0.0))


def test_expected_strip_shows_the_band_and_a_live_value_inside_it_is_not_flagged() -> None:
    from functools import partial

    from sparktop.sweep.estimator.estimator import estimate
    from sparktop.sweep.expected.matched import MatchedExpected
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.ui.expected import DeficitClock, expected_lines

    profile = load_profile("4x-spark-dsv41-flash-1017")
    fn = MatchedExpected(profile, partial(estimate, profile))
    est = estimate(profile, 20_000, 3)
    assert est.ttft_s.basis.value == "interpolated"
    high = est.ttft_s.high
    assert isinstance(high, float) and isinstance(est.ttft_s.value, float)
    # 3 % above the row, past a 2 % threshold, yet inside its band: not a deficit; past the
    # band: a deficit.
    inside = est.ttft_s.value * 1.03
    assert inside <= high
    for live, flagged in ((inside, False), (max(high, est.ttft_s.value * 1.3) * 1.05, True)):
        sample = engine(running=3.0, mean_prompt_tokens=20_000.0, ttft_p50=Quantile(live))
        lines = expected_lines(sample, profile.name, fn, 2.0, DeficitClock(), T0)
        cells = [cell for line in lines for cell in line]
        text = "".join(t for t, _ in cells)
        assert "TTFT" in text and "–" in text  # the band beside the expected value
        after = cells[next(i for i, c in enumerate(cells) if c[0].startswith("TTFT")) :]
        verdict = next(c for c in after if c[0].strip().endswith("%") or c[0] == " in band")
        assert verdict == ((" in band", "ok") if not flagged else (verdict[0], "crit"))


def test_a_narrow_strip_puts_the_comparisons_first_with_the_same_deviations() -> None:
    """At 80 columns the engine block has room for two strip lines: the comparisons come
    first (no column names or bands), the load and profile after; same figures as wide."""
    from functools import partial

    from sparktop.sweep.estimator.estimator import estimate
    from sparktop.sweep.expected.matched import MatchedExpected
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.ui.expected import COMPACT_BELOW, DeficitClock, expected_lines

    profile = load_profile("4x-spark-dsv41-flash-1017")
    fn = MatchedExpected(profile, partial(estimate, profile))
    sample = engine(running=3.0, mean_prompt_tokens=20_000.0, ttft_p50=Quantile(9.0))

    def lines(width: int) -> list[str]:
        got = expected_lines(sample, profile.name, fn, 25.0, DeficitClock(), T0, width)
        return ["".join(t for t, _ in line) for line in got]

    wide, narrow = lines(150), lines(COMPACT_BELOW - 22)
    assert narrow[0].startswith("expected TTFT ") and "ttft_s" not in narrow[0]
    assert all(len(line) <= COMPACT_BELOW - 22 for line in narrow)
    assert wide[0].startswith(f"expected {profile.name}") and "ttft_s" not in " ".join(wide)
    pct = re.compile(r"[+-]\d+%")
    assert pct.findall(" ".join(narrow)) == pct.findall(" ".join(wide))
    assert profile.name in " ".join(narrow[1:])


def test_budget_pane_shows_the_band_of_an_estimated_figure_not_of_an_exact_one() -> None:
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.sweep.tokens.tokens import TokenCount
    from sparktop.ui.budget_view import BudgetInputs, budget_lines

    profile = load_profile("2x-spark-dsv4-flash-0731")

    def text(prompt: int, concurrency: int) -> str:
        inputs = BudgetInputs(TokenCount(prompt, "given"), concurrency)
        return "\n".join(
            "".join(t for t, _ in line) for line in budget_lines(inputs, profile, None)
        )

    assert "band" not in text(2048, 6)  # an exact row
    fitted = text(125_272, 1)
    assert "[interpolated]" in fitted and "band 1m" not in fitted and "band " in fitted


def test_memory_reads_alike_in_the_monitor_and_snapshot() -> None:
    """One formatter: 1.4 GiB used of 16 GiB is ``1.4/16G`` in the row and in ``snapshot``
    (the row said ``1/16G``)."""
    from sparktop.report.snapshot_table import memory_text

    memory = NodeMemory(16_384.0, 1_434.0, 900.0, unified=True)
    one = gpu(uuid="GPU-spark-1", process_memory_mib=900.0)
    cell = rows_for(NodeSample("spark-1", T0, gpus=(one,), memory=memory))["mem"][0]
    assert cell == "U 1.4/16G·GPU 0.9G"
    assert memory_text(one, memory) == cell


def test_an_unknown_memory_figure_is_n_a_without_a_unit() -> None:
    """GPU-held memory not read yet (the slow tier) is ``GPU n/a``, never ``GPU n/aG``; an
    unknown total is ``n/a``, never ``n/a/n/aG``."""
    memory = NodeMemory(16_384.0, 1_434.0, NA("no process list yet"), unified=True)
    one = gpu(uuid="GPU-spark-1", process_memory_mib=NA("no process list yet"))
    cell = rows_for(NodeSample("spark-1", T0, gpus=(one,), memory=memory))["mem"][0]
    assert cell == "U 1.4/16G·GPU n/a"
    unknown = NodeMemory(NA("not read"), NA("not read"), NA("not read"), unified=True)
    cell = rows_for(NodeSample("spark-1", T0, gpus=(one,), memory=unknown))["mem"][0]
    assert cell == "U n/a·GPU n/a" and "n/aG" not in cell


def test_running_without_its_gauge_says_why_never_na_over_the_limit() -> None:
    from sparktop.sources.engines.metrics import MetricsDeriver
    from sparktop.sources.engines.reading import WANTED
    from sparktop.sources.exposition.page import parse_page

    text = (CASES / "metrics" / "counter-reset-1.prom").read_text()
    sample = MetricsDeriver("dsv4").derive(parse_page(text, WANTED), now_s=0.0, wall_s=T0)
    assert isinstance(sample.running, NA)
    lines = engine_lines(sample, T0, ViewConfig(), 8.0, 200)
    flat = " ".join(" ".join(t for line in lines for t, _ in line).split())
    assert "n/a/" not in flat, flat
    assert f"running n/a ({sample.running.reason})" in flat, flat


def test_latencies_missing_for_one_reason_say_it_once_per_block() -> None:
    """llama.cpp exports no latency histograms: the block said the reason after TTFT p50, p95
    and ITL p50 (three times on one line); the expected strip said ``p50 no data ·`` with no
    reason, then a note on queueing that a missing figure cannot include."""
    from functools import partial

    from sparktop.sweep.estimator.estimator import estimate
    from sparktop.sweep.expected.matched import MatchedExpected
    from sparktop.sweep.profiles.loader import load_profile
    from sparktop.ui.expected import DeficitClock, expected_lines

    why = "llama.cpp exports no latency histograms"
    latencies = {k: NA(why) for k in ("ttft_p50", "ttft_p95", "itl_p50", "itl_mean_s")}
    sample = engine(kind="llamacpp", waiting=2.0, tpot_mean_s=NA(why), **latencies)
    block = " ".join(
        "".join(t for t, _ in line) for line in engine_lines(sample, T0, ViewConfig(), 8.0)
    )
    assert block.count(why) == 1, block
    assert f"TTFT · ITL n/a ({why})" in block
    assert "p95" not in block and "ITL p50" not in block
    # TTFT alone n/a: said once for both quantiles, ITL as it is.
    ttft_only = engine(ttft_p50=NA(why), ttft_p95=NA(why))
    text = " ".join(
        "".join(t for t, _ in ln) for ln in engine_lines(ttft_only, T0, ViewConfig(), 8.0)
    )
    assert text.count(why) == 1 and f"TTFT n/a ({why})" in text and "ITL p50 21 ms" in text

    # The seed's figures, as if swept from a llama.cpp server (the seed names a vLLM build,
    # which gives a llama.cpp engine no expected row at all).
    seed = load_profile("4x-spark-dsv41-flash-1017")
    profile = replace(seed, engine="llama.cpp server version b11434")
    fn = MatchedExpected(profile, partial(estimate, profile))
    lines = expected_lines(sample, profile.name, fn, 25.0, DeficitClock(), T0, width=400)
    strip = " ".join("".join(t for t, _ in line) for line in lines)
    assert f"p50 n/a ({why})" in strip, strip
    assert "1/ITL n/a (as for TTFT)" in strip, strip
    assert "no data ·" not in strip and "queueing" not in strip, strip
