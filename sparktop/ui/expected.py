"""The expected-row strip: the sweep profile's figures for the live window, beside the live ones.

The expected figures are computed over the same window and load as the live ones
(:mod:`sparktop.sweep.expected.matched`: time-weighted running counts, the prompt lengths that
finished in the window) and each comparison names the profile column it reads and the live statistic
it is compared with (DESIGN.md §6). The estimator says how each was obtained (exact,
interpolated, fitted, extrapolated, no data) and gives a band: a live value inside it is not
flagged, whatever the %. Textual-free; the widget renders the lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparktop.alerts.comparisons import comparisons
from sparktop.model import NA, EngineSample, is_num
from sparktop.safe_text import printable
from sparktop.sweep.expected.matched import RowFn
from sparktop.ui import format as fmt
from sparktop.ui.packing import Figures, Group, pack
from sparktop.ui.views import Cell

Line = list[Cell]


__all__ = ["COLUMN_NOTES", "DeficitClock", "RowFn", "expected_lines"]


@dataclass(slots=True)
class DeficitClock:
    """Remembers since when each (engine, value) has been past the threshold."""

    since: dict[tuple[str, str], float] = field(default_factory=dict)

    def update(self, engine: str, label: str, past: bool, now: float) -> float | None:
        key = (engine, label)
        if not past:
            self.since.pop(key, None)
            return None
        return self.since.setdefault(key, now)


def _how(estimated: Any) -> str:
    return str(getattr(estimated, "how", "")) or "no data"


def _basis(estimated: Any) -> str:
    """How the row was obtained, in a word (exact, interpolated, fitted, extrapolated); the
    estimator's full sentence when it has no data, since the reason is what matters then."""
    basis = str(getattr(estimated, "basis", "") or "")
    return basis if basis and basis != "no data" else _how(estimated)


def _fmt(value: Any, unit: str) -> str:
    if not is_num(value):
        return "no data"
    return fmt.seconds(value) if unit == "s" else f"{value:,.1f}"


def _live(comp: Any) -> str:
    """The live figure: a coarse histogram bucket as its interval (``20–40 s``)."""
    return str(comp.live_text()) if comp.coarse else _fmt(comp.live, comp.unit)


COMPACT_BELOW = 100
"""Strip width (cells) under which the comparisons come first, without columns or bands."""


def expected_lines(
    sample: EngineSample,
    profile_name: str,
    row: RowFn | None,
    threshold_pct: float,
    clock: DeficitClock,
    now: float,
    width: int = 116,
) -> list[Line]:
    """The window's load (and how the row was obtained), then each expected value beside the
    live one: ``TTFT ttft_s 10.7 s (9.8–11.5 s) p50 6.25 s −41 %``. ``row`` gives the
    sample's window-matched expected row (the plan's
    :class:`~sparktop.sweep.expected.matched.MatchedExpected`, shared with the alert rules); None:
    no profile."""
    head: Group = [("expected ", "dim")]
    if row is None:
        return [[*head, ("no sweep profile (set profile: in the inventory or --profile)", "dim")]]
    try:
        got = row(sample)
    except Exception as exc:  # a profile lookup bug must not take the panel down
        return [[*head, (f"estimator failed: {exc}", "warn")]]
    if isinstance(got, str):
        return [[*head, (got, "dim")]]
    # Live per-stream decode is 1 / mean ITL, not the generation rate ÷ running: with long
    # prompts most running requests are in prefill, so that quotient reads far below the
    # per-stream rate on a healthy engine (see sparktop.alerts.comparisons).
    found = comparisons(got, sample)
    row_how = _how(got.ttft_s)
    compact = width < COMPACT_BELOW
    # The load and the comparisons wrap by their figures' room, the basis by its longest
    # word's: a strip that changed height as they changed length moved what is below it.
    basis = Figures([(_basis(got.ttft_s), "dim")], at_least=len("interpolated"))
    groups: list[Group] = [
        [*head, (profile_name, "accent")],
        Figures([("mix of " if got.load.mixed else "for ", "dim"), (got.load.describe(), "")]),
        basis,
    ]
    measured, _, serves = got.model_note.partition("; ")
    model: list[Group] = (
        [[(f"({measured};", "warn")], [(f"{serves})", "warn")]] if got.model_note else []
    )
    if compact:
        # A narrow terminal: the comparisons first and without columns or bands (the wide
        # strip and the help screen name them), the load and the profile after.
        load = got.load
        window = load.window_text
        counts = sorted({c for c, _ in load.running})
        running = f"{counts[0]}–{counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
        groups = [
            Figures([(f"{'mix of ' if load.mixed else 'for '}running {running} × mean "
                      f"{load.mean_prompt:,.0f} tok, {window}", "dim")]),
            Figures([(profile_name, "accent"), (f" {_basis(got.ttft_s)}", "dim")],
                    at_least=len(profile_name) + len(" interpolated")),
        ]  # fmt: skip
        groups[1:1] = model
    comps: list[Group] = []
    said: dict[str, str] = {}  # a missing live figure's reason → the label it was given with
    for comp in found:
        estimated = comp.estimated
        past = comp.deficit(threshold_pct)
        since = clock.update(sample.engine, comp.label, past, now)
        group: Group = [(f"{comp.label} ", "dim")]
        group.append((_fmt(comp.expected, comp.unit), ""))
        band = fmt.band(comp.low, comp.high, comp.unit)
        if band and is_num(comp.expected) and not compact:
            group.append((f" ({band})", "dim"))
        if not is_num(comp.expected):
            if _how(estimated) != row_how:  # the row's own reason is already shown once
                # After "no data" itself: the reason alone, not "no data (no data: …)".
                group.append((f" ({_how(estimated).removeprefix('no data: ')})", "dim"))
        elif not comp.comparable:
            group += [
                (f" {comp.live_label} ", "dim"),
                (_live(comp), "bold"),
                (" (not compared)" if compact else f" (not compared: {comp.why_not})", "dim"),
            ]
        elif not is_num(comp.live):
            # No live figure: why, once per strip; no verdict, and no note on what a
            # figure that is not there would include.
            reason = (comp.live.reason if isinstance(comp.live, NA) else "") or "no live figure"
            first = said.setdefault(reason, comp.label)
            why = printable(reason) if first == comp.label else f"as for {first}"
            group += [(f" {comp.live_label} ", "dim"), (fmt.NA_TEXT, ""), (f" ({why})", "dim")]
        else:
            dev = comp.deviation()
            if comp.in_band() and (comp.live_interval is not None or comp.low != comp.high):
                verdict: Cell = (" in band", "ok")
            else:
                verdict = (
                    f" {fmt.signed_pct(dev)}",
                    "crit" if past else "ok" if dev is not None else "dim",
                )
            group += [(f" {comp.live_label} ", "dim"), (_live(comp), "bold"), verdict]
            if comp.note and not compact:
                group.append((f" ({comp.note})", "dim"))
            if since is not None and now - since >= 1:
                group.append((f" since {fmt.clock_time(since)}", "crit"))
        comps.append(Figures(group))
    if compact:
        return pack([Figures([head[0], *comps[0]]), *comps[1:], *groups], width)
    return pack([*groups[:1], *model, *groups[1:], *comps], width)


COLUMN_NOTES = (
    "each expected figure is a mixture over the window's load shown after 'mix of' (the "
    "range of its running counts and prompt lengths, and their means): the profile's cell "
    "for every (running count, prompt) it held, combined as the live statistic combines its "
    "requests, not the cell at the mean",
    "TTFT's requests are those whose first token came in the window (each with the running "
    "count beside it); decode's are those that started decoding or finished in it",
    "a live p50 read from histogram buckets is only known to its bucket: a bucket wider than "
    "x1.5 is shown as its interval (20–40 s), and it deviates only when the whole bucket lies "
    "beyond the band ('in band': some of it is inside)",
    "TTFT: profile ttft_s vs live TTFT p50 (vllm:time_to_first_token_seconds bucket deltas); "
    "once requests queued in the window, 'p50 w/o queue' is vllm:request_prefill_time_seconds "
    "(the profile's TTFT has no queue), or the TTFT p50 is marked as including queueing",
    "decode/req: profile per-request decode tok/s vs live 1 / mean ITL "
    "(vllm:inter_token_latency_seconds Δsum/Δcount over the window; the same expectation as "
    "per-request decode for equal outputs), else 1 / mean per-request TPOT",
    "agg: profile aggregate tok/s (its own definition: end-to-end or decode-only) vs live "
    "rate(vllm:generation_tokens_total), which over a busy window is end-to-end ('live e2e' "
    "beside a decode-only profile: shown, not flagged, since the two are defined differently)",
)
"""What each comparison compares (shown on the help screen)."""
