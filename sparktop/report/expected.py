"""The expected row for ``snapshot`` (JSON and text): what the monitor's expected strip says.

One block per engine: the profile, the window's load, and each profile column beside the
live figure defined like it (:mod:`sparktop.alerts.comparisons`), with the deviation, the
estimator's band and whether it is a deficit at the alert threshold.
"""

from __future__ import annotations

from sparktop.alerts.comparisons import comparison_json, comparisons
from sparktop.model import EngineSample, EngineState, is_num
from sparktop.plan import NO_PROFILE, Plan
from sparktop.sweep.expected.matched import WindowExpected


def window_row(plan: Plan, sample: EngineSample) -> WindowExpected | str:
    """The window-matched expected figures for ``sample`` (from its engine's profile), or why
    there are none."""
    if plan.matched_for(sample.engine) is None:
        return plan.profile_problem or NO_PROFILE
    if not sample.judged:
        # Its state, not "not answering": a degraded page answered, with no load to match.
        if sample.state is EngineState.DEGRADED:
            return "engine degraded: its load gauges were refused, so there is no load to match"
        return f"engine {sample.state.value}"
    return plan.row(sample)


def expected_json(plan: Plan, sample: EngineSample) -> dict[str, object]:
    """``{"profile", "window_s", "load", "mean_running", "mean_prompt_tokens", "basis",
    "figures": {column: comparison}, "missing"}``; ``missing`` is why there is no row (then
    ``figures`` is empty). ``deficit`` is judged at the plan's ``expected_deficit_pct``.
    ``model_note``: the profile looks like another model's (else None)."""
    got = window_row(plan, sample)
    threshold_pct = plan.thresholds.expected_deficit_pct
    matched = plan.matched_for(sample.engine)
    note = matched.model_note(sample) if matched is not None else ""
    name = plan.profile_name_for(sample.engine)
    block: dict[str, object] = {"profile": name or None, "model_note": note or None}
    if isinstance(got, str):
        return {**block, "window_s": None, "load": None, "figures": {}, "missing": got}
    load = got.load
    return {
        **block,
        "window_s": load.window_s,
        "load": load.describe(),
        "mean_running": load.mean_running,
        "mean_prompt_tokens": load.mean_prompt,
        "basis": str(got.ttft_s.basis),
        "figures": {c.column: comparison_json(c, threshold_pct) for c in comparisons(got, sample)},
        "missing": None,
    }


def _fmt(value: object, unit: str) -> str:
    if not is_num(value):
        return "no data"
    return f"{value:,.2f} s" if unit == "s" else f"{value:,.1f} tok/s"


def expected_text(plan: Plan, sample: EngineSample) -> str:
    """One line: ``expected <profile> mix of <load>: TTFT 10.7 s vs p50 6.25 s −41 % · …``
    (the profile's column keys are in ``--json``)."""
    got = window_row(plan, sample)
    threshold_pct = plan.thresholds.expected_deficit_pct
    if isinstance(got, str):
        return f"expected: {got}"
    parts = []
    for c in comparisons(got, sample):
        text = f"{c.label} {_fmt(c.expected, c.unit)}"
        if not is_num(c.expected):
            parts.append(text)
            continue
        live = c.live_text() + (" tok/s" if c.unit != "s" else "") if c.coarse else ""
        text += f" vs {c.live_label} {live or _fmt(c.live, c.unit)}"
        dev = c.deviation()
        if not c.comparable:
            text += f" (not compared: {c.why_not})"
        elif dev is not None:
            sign = "+" if round(dev) >= 0 else "−"
            text += f" {sign}{abs(dev):.0f} %"
            if c.in_band():
                text += " (in band)"
            elif c.deficit(threshold_pct):
                text += " DEFICIT"
            elif is_num(c.low) and is_num(c.high) and c.low != c.high:
                better = dev < 0 if c.worse_when == "higher" else dev > 0
                text += (
                    " (better than the band)"
                    if better
                    else f" (outside the band, under the {threshold_pct:g} % alert threshold)"
                )
        parts.append(text)
    basis = str(got.ttft_s.basis)
    model = f" ({got.model_note})" if got.model_note else ""
    mix = "mix of" if got.load.mixed else "for"
    name = plan.profile_name_for(sample.engine)
    head = f"expected {name}{model} {mix} {got.load.describe()} ({basis}): "
    return head + " · ".join(parts)
