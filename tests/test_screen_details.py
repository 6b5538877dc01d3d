"""The small things issue 31 found on the operator's screen, each held to its fix: the budget
pane's figures and words, ``budget --prompt-tokens 10k``, the command a short sweep suggests,
and the exporter's 0 samples (the ``cleared:`` and ``n/a`` memory cases are with their own
modules: test_engine_hostile.py, tests/ui/test_views.py)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from prometheus_client.core import Metric

from sparktop.alerts.context import Expected
from sparktop.alerts.engine import AlertEngine
from sparktop.cli import main
from sparktop.commands.sweep_flow import suggested_cell
from sparktop.errors import UserError
from sparktop.exporter.judgements import Judgements, SourceStats
from sparktop.model import EngineSample, Quantile
from sparktop.sweep.budget.counts import looks_like_number, parse_count
from sparktop.sweep.budget.send_now import lesson
from sparktop.sweep.estimator.estimator import estimate
from sparktop.sweep.profiles.loader import load_profile
from sparktop.sweep.profiles.profile import Profile
from sparktop.sweep.tokens.tokens import TokenCount
from sparktop.ui.budget_view import BudgetInputs, budget_lines
from tests.alert_samples import cluster, engine

TWO = load_profile("2x-spark-dsv4-flash-0731")
FOUR = load_profile("4x-spark-dsv41-flash-1017")


def pane(profile: Profile, prompt: int, concurrency: int = 1, **limits: Any) -> str:
    inputs = BudgetInputs(TokenCount(prompt, "given"), concurrency)
    lines = budget_lines(inputs, profile, None, width=60, **limits)
    return "\n".join("".join(text for text, _ in line) for line in lines)


# -- the budget pane ---------------------------------------------------------------------------


def test_the_pane_says_when_concurrency_passes_max_num_seqs() -> None:
    limit = FOUR.max_num_seqs
    assert limit is not None
    text = pane(FOUR, 8192, concurrency=int(limit) + 293)
    conc_line = next(line for line in text.splitlines() if line.startswith("conc"))
    assert f"> max_num_seqs {int(limit):,}: 293 wait" in conc_line
    assert "max_num_seqs" not in next(
        line
        for line in pane(FOUR, 8192, concurrency=int(limit)).splitlines()
        if line.startswith("conc")
    )


def test_the_pane_writes_chunks_with_separators() -> None:
    text = pane(FOUR, 10**12)
    chunks = next(line for line in text.splitlines() if "chunks" in line)
    assert "122,070,313 (chunked prefill)" in chunks


def test_the_lesson_says_gains_when_a_figure_rises() -> None:
    """At 8,192 tokens the 4-Spark sweep's per-request decode is faster than at its shortest
    prompt: "decode gains +34%", never "decode keeps 134%"."""
    x = lesson(FOUR, 8192, 1, 2048)
    assert isinstance(x.decode_keep_pct, float) and x.decode_keep_pct > 100
    text = pane(FOUR, 8192)
    assert "keeps 1" not in text  # no "keeps 134%"
    gain = round(x.decode_keep_pct - 100)
    assert f"decode gains +{gain}%" in text
    assert f"vs shortest {x.shortest_prompt_tokens:,} tok" in text
    # The CLI says it alike, and keeps "keeps" for what falls.
    two = pane(TWO, 131072)
    assert "decode keeps 86%" in two and "e2e keeps" in two


def test_budget_cli_lesson_gains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "--prompt-tokens", "8k", "--profile", FOUR.name]) == 0
    out = capsys.readouterr().out
    assert "decode gains" in out and "decode keeps              1" not in out


# -- 128k: a size, not a file name --------------------------------------------------------------


@pytest.mark.parametrize(("text", "tokens"), [("128k", 131_072), ("10k", 10_240), ("1m", 1 << 20)])
def test_a_prompt_size_is_a_count_in_the_pane_and_the_cli(
    text: str, tokens: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert looks_like_number(text)  # the pane reads it as a number, not a path to count
    assert parse_count("prompt", text, sizes=True) == tokens
    with pytest.raises(UserError):
        parse_count("concurrency", text)  # only the prompt takes sizes
    code = main(["budget", "--prompt-tokens", text, "--profile", TWO.name, "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["tokens"]["prompt_tokens"] == tokens


def test_a_size_that_is_not_whole_tokens_is_refused() -> None:
    with pytest.raises(UserError, match="not a whole number of tokens"):
        parse_count("prompt", "1.0001k", sizes=True)


# -- the command a sweep suggests ---------------------------------------------------------------


def test_a_short_sweep_suggests_a_budget_inside_what_it_measured(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    """After a 1k-4k sweep the suggestion was --prompt-tokens 40000: "no data" everywhere."""
    rows = [r for r in TWO.rows if r.prompt_tokens <= 4096 and r.concurrency <= 2]
    short = dataclasses.replace(TWO, name="short", rows=tuple(rows))
    prompt, concurrency = suggested_cell(short)
    measured = sorted({r.prompt_tokens for r in rows})
    assert measured[0] <= prompt <= measured[-1]
    assert concurrency == min(r.concurrency for r in rows)
    got = estimate(short, prompt, concurrency)
    assert all(isinstance(f.value, float) for f in (got.ttft_s, got.decode_tps))


def test_the_suggestion_on_a_built_in_profile_has_figures() -> None:
    for profile in (TWO, FOUR):
        prompt, concurrency = suggested_cell(profile)
        assert isinstance(estimate(profile, prompt, concurrency).ttft_s.value, float)


# -- the exporter: 0, not absent ----------------------------------------------------------------


def expected_row(sample: EngineSample) -> Expected:
    return Expected(prompt_tokens=2048.0, concurrency=2, ttft_s=1.11, decode_tps=57.0)


def collect(*samples: EngineSample) -> dict[str, Metric]:
    alerts = AlertEngine(expected=expected_row)
    return {
        m.name: m for m in Judgements(cluster(*samples), lambda: alerts, SourceStats()).collect()
    }


def test_the_exporter_writes_0_for_no_deficit_and_a_full_pool() -> None:
    healthy = collect(engine(ttft_p50=Quantile(1.2), itl_mean_s=1 / 50.0))
    (no_deficit,) = healthy["sparktop_engine_deficit"].samples
    assert no_deficit.value == 0.0 and no_deficit.labels["cause"] == "none"
    slow = collect(engine(ttft_p50=Quantile(1.60), itl_mean_s=1 / 35.3))
    (past,) = slow["sparktop_engine_deficit"].samples
    assert past.value == 1.0 and past.labels["cause"] != "none"
    full = collect(engine(kv_usage=1.0, ttft_p50=Quantile(1.2), itl_mean_s=1 / 50.0))
    (eta,) = full["sparktop_engine_kv_exhaustion_seconds"].samples
    assert eta.value == 0.0
    assert not healthy["sparktop_engine_kv_exhaustion_seconds"].samples  # no rise: absent


def test_a_rejected_request_gets_no_queue_time_in_the_pane() -> None:
    """The pane said "rejected" and still gave a queue wait for the same request: on a full
    scheduler (a wait for anything else) a refused prompt is "not sent", with no TTFT or
    queue; a prompt that fits on the same load waits."""
    busy = engine(running=8.0, waiting=5.0, max_num_seqs=8.0)
    inputs = BudgetInputs(TokenCount(2_000_000, "given"), 1)
    lines = budget_lines(inputs, FOUR, busy, width=60)
    text = "\n".join("".join(t for t, _ in line) for line in lines)
    assert "REJECTED" in text and "not sent" in text
    assert " queue" not in text and "TTFT now" not in text
    fits = budget_lines(BudgetInputs(TokenCount(8192, "given"), 1), FOUR, busy, width=60)
    assert " queue" in "\n".join("".join(t for t, _ in line) for line in fits)
