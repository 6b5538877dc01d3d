"""The binding ids the inventory's ``keys:`` may remap (``app.pause: space``).

The monitor's keys are Textual ``Binding`` s with these ids (``sparktop/ui/``); the inventory
is read before (and without) the UI, so the ids are named here, and an unknown one is an
inventory error like any other bad key (file, line, "did you mean"), not a notice once the
screen is up. ``tests/ui/test_app_wiring.py`` holds this list equal to the ids the monitor
and the replay bind: a new binding with an id is added here too.
"""

from __future__ import annotations

BINDING_IDS = frozenset(
    {
        # the monitor (sparktop/ui/app.py)
        "app.quit", "app.interrupt", "app.help", "app.budget", "app.pause", "app.events",
        "app.filter", "app.clear_filter", "app.curve", "app.interval_up", "app.interval_down",
        "app.theme", "app.poll_now", "app.screenshot", "app.command",
        # its panes and screens
        "node.details", "engine.details", "filter.keep", "filter.clear",
        "budget.close", "budget.concurrency_up", "budget.concurrency_down",
        "budget.prompt_halve", "budget.prompt_double", "budget.output_halve",
        "budget.output_double", "budget.edit", "budget.apply", "budget.leave_input",
        "detail.back", "detail.sort", "curve.back", "curve.metric", "command.close",
        # the replay (sparktop/ui/replay.py)
        "replay.play", "replay.back", "replay.forward", "replay.back_minute",
        "replay.forward_minute", "replay.start", "replay.next_alert",
    }
)  # fmt: skip
"""Every id ``keys:`` accepts."""
