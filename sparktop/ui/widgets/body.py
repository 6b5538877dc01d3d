"""Body: the live view beside the budget pane, and the keys that work while the pane is open.

The pane is built when it is first opened (``b``), not at start: most runs never open it, and
its widgets and the budget's modules are a part of the monitor's start-up and memory. Built
or not, a closed pane is not shown; once built it stays (closed, it keeps its inputs).

The what-if keys (``+``/``-`` concurrency, ``[``/``]`` prompt, ``<``/``>`` output) and
``escape`` (close) are bound here, on the container of both the Nodes table and the pane, so
they work wherever the focus is in the body, not only on the pane; an input keeps the keys it
types (and the footer then hides them). While the pane is closed these bindings are off
(``check_action``), so ``+``/``-`` fall through to the app's poll interval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Input

if TYPE_CHECKING:
    from sparktop.ui.widgets.budget import BudgetPane

CONCURRENCY = Binding.Group("conc", compact=True)
PROMPT = Binding.Group("prompt", compact=True)
OUTPUT = Binding.Group("out", compact=True)

WHAT_IF_ACTIONS = frozenset({"concurrency", "prompt", "output", "close_budget"})


class Body(Horizontal):
    """``#main`` (nodes, engines, events) and the :class:`BudgetPane`, open with ``-budget``;
    ``budget`` builds the pane (called once, when it is first opened)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close_budget", "Close", id="budget.close",
                tooltip="close the budget pane (focus back on the Nodes table)"),
        Binding("plus", "concurrency(1)", "+conc", group=CONCURRENCY,
                tooltip="budget: one more concurrent request", id="budget.concurrency_up"),
        Binding("minus", "concurrency(-1)", "-conc", group=CONCURRENCY,
                tooltip="budget: one fewer concurrent request", id="budget.concurrency_down"),
        Binding("left_square_bracket", "prompt(0.5)", "½ prompt", group=PROMPT,
                tooltip="budget: halve the prompt tokens", id="budget.prompt_halve"),
        Binding("right_square_bracket", "prompt(2)", "2× prompt", group=PROMPT,
                tooltip="budget: double the prompt tokens", id="budget.prompt_double"),
        Binding("less_than_sign", "output(0.5)", "½ output", group=OUTPUT,
                tooltip="budget: halve the output tokens", id="budget.output_halve"),
        Binding("greater_than_sign", "output(2)", "2× output", group=OUTPUT,
                tooltip="budget: double the output tokens", id="budget.output_double"),
    ]  # fmt: skip

    def __init__(self, *, budget: Callable[[], BudgetPane], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._build_pane = budget
        self.pane: BudgetPane | None = None
        """The budget pane, once it has been opened."""

    @property
    def budget_open(self) -> bool:
        return self.has_class("-budget")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in WHAT_IF_ACTIONS:
            # An input types these keys itself (Textual cannot tell that ``plus`` is
            # printable, so without this the footer would offer them while typing).
            return self.budget_open and not isinstance(self.app.focused, Input)
        return True

    async def open_budget(self) -> None:
        """Show the pane with the focus on it: the what-if keys work at once, and a number
        or a path typed right away goes to the prompt field (:class:`BudgetPane`)."""
        pane = self.pane
        if pane is None:
            pane = self.pane = self._build_pane()
            await self.mount(pane)  # hidden until the class below, as it was built at start
        self.add_class("-budget")
        pane.render_budget()
        # Focused now (keys typed right after ``b``, queued while the pane was being built,
        # reach it) and again after what is already queued (a focus asked earlier, as the
        # start's on the Nodes table, does not take it back).
        self.screen.set_focus(pane)
        pane.focus()
        self.refresh_bindings()

    def close_budget(self) -> None:
        """Hide the pane, stopping a count it runs; the focus goes back to the Nodes table."""
        if self.pane is not None:
            self.pane.cancel_count()
        self.remove_class("-budget")
        focus_main = getattr(self.app, "focus_main", None)  # the monitor's; a bare host's table
        if focus_main is not None:
            focus_main()
        else:
            self.query_one("#nodes").focus()
        self.refresh_bindings()

    def action_close_budget(self) -> None:
        self.close_budget()

    # The what-if actions are enabled only while the pane is open (check_action), so built.

    def action_concurrency(self, step: int) -> None:
        if self.pane is not None:
            self.pane.action_concurrency(step)

    def action_prompt(self, factor: float) -> None:
        if self.pane is not None:
            self.pane.action_prompt(factor)

    def action_output(self, factor: float) -> None:
        if self.pane is not None:
            self.pane.action_output(factor)
