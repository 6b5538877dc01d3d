"""BudgetPane: what a context would cost, with keyboard what-ifs and the live pool's free part.

Inputs: prompt tokens (typed; or a file/directory path, counted in a thread; or pasted text,
counted exactly with the engine's ``/tokenize`` when it answers, else estimated),
concurrency and output tokens. Outputs come from :mod:`sparktop.ui.budget_view`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, Static

from sparktop import values
from sparktop.errors import RuntimeFailure, UserError
from sparktop.model import EngineSample
from sparktop.safe_text import printable
from sparktop.sweep.budget.counts import MAX_COUNT, looks_like_number, parse_count
from sparktop.sweep.profiles.profile import Profile
from sparktop.sweep.tokens import tokens
from sparktop.ui import styles
from sparktop.ui.budget_count import BackgroundCount
from sparktop.ui.budget_view import BudgetInputs, budget_lines, for_the_pane
from sparktop.ui.widgets.budget_curve import BudgetCurve
from sparktop.ui.widgets.text_block import TextBlock

PASTE_AS_TEXT_CHARS = 200
"""A paste longer than this (or with a newline) is prompt text to count, not a number."""

STARTS_PROMPT_KEYS = {
    **{digit: digit for digit in "0123456789"},
    "/": "slash",
    "~": "tilde",
    ".": "full_stop",
}
"""Characters (and Textual's names for their keys) that, pressed on the pane, start the
prompt field with themselves: a token count or a path begins with one of them, and none is
a what-if key."""


FIELDS = ("prompt", "concurrency", "output")
"""The pane's fields, by widget id."""


class TextPasted(Message):
    """Text was pasted into the prompt field: count it instead of inserting it."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class BudgetInput(Input):
    """A budget field: Enter applies it and the cursor stays in it (so more typing edits it,
    never reaching the monitor's keys); Escape leaves it (back to the pane, whose what-if keys
    then work)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "submit", "Apply", tooltip="budget: apply the field", id="budget.apply"),
        Binding(
            "escape", "leave", "Done", tooltip="budget: leave the field", id="budget.leave_input"
        ),
    ]

    def action_leave(self) -> None:
        pane = next((a for a in self.ancestors if isinstance(a, BudgetPane)), None)
        if pane is not None:
            pane.focus()


def is_field_value(text: str) -> bool:
    """A paste that belongs in the prompt field: a token count, or the path of something
    that exists (anything else pasted is prompt text, to be counted)."""
    value = text.strip()
    if not value or "\n" in value or len(value) > PASTE_AS_TEXT_CHARS:
        return False
    if looks_like_number(value):
        return True
    try:
        return Path(value).expanduser().exists()
    except (OSError, ValueError):  # a NUL byte, a name too long: not a path
        return False


class PromptInput(BudgetInput):
    """The prompt field: a number or a path; any other paste is counted as prompt text."""

    def _on_paste(self, event: events.Paste) -> None:
        # Textual calls each class's handler in turn (Input's inserts the text): stop here
        # only when the paste is text to count, else let Input insert it once.
        if not is_field_value(event.text):
            event.stop()
            event.prevent_default()
            self.post_message(TextPasted(event.text))


DEFAULT_PROMPT = tokens.TokenCount(8192, "default")
"""The prompt before the operator sets one, and again once the field is cleared."""


class BudgetPane(VerticalScroll, can_focus=True):
    """The context budget beside the live view (``b`` toggles it, the pane focused: its
    what-if keys work at once, and a digit, ``/``, ``~`` or ``.`` starts the prompt field).

    Given the plan's ``profile``, whether its limits are the engines' (``profile_limits``:
    the plan's ``profile_describes``), each engine's base URL (for ``/tokenize``) and the
    engines' own profiles (``engine_profiles``: the live engine's, when it has one, replaces
    ``profile``, its limits included); the app hands it the live engine every tick
    (:meth:`live_changed`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("i", "edit", "Edit", tooltip="budget: edit the prompt field", id="budget.edit"),
        # Priority: the app runs these as each key arrives, before it takes the next one, so
        # the keys typed right behind (a fast typist, a paste, tmux send-keys: one batch) are
        # sent to the field the focus has moved to. Handled on the pane's own queue instead,
        # they all reached the pane before the focus moved, and each start key restarted
        # the field (``/no/such`` read ``/``). Typing, not remappable: no id.
        *(
            Binding(key_name, f"start_prompt({char!r})", show=False, priority=True)
            for char, key_name in STARTS_PROMPT_KEYS.items()
        ),
    ]
    STARTS_PATHS: ClassVar[bool] = True
    """``/`` on the pane starts a path in the prompt field (the app's filter key yields)."""
    """The what-if keys and ``escape`` (close) are bound on the body around the pane
    (:class:`~sparktop.ui.widgets.body.Body`), so they work from the Nodes table too."""

    DEFAULT_CSS = """
    BudgetPane {
        width: 46;
        display: none;
        /* The scrollbar's room is kept from the start: lines packed for the width before it
           appeared were cut again at its edge. */
        scrollbar-gutter: stable;
        border-left: solid $panel;
        padding: 0 1;
    }
    BudgetPane:focus { border-left: solid $primary; }
    BudgetPane > .title { text-style: bold; color: $spark-accent; }
    BudgetPane Horizontal { height: 1; }
    BudgetPane Horizontal > Label { width: 12; color: $spark-dim; }
    BudgetPane Input { width: 1fr; height: 1; border: none; padding: 0 1; background: $surface; }
    BudgetPane Input:focus { border: none; background: $boost; }
    BudgetPane #budget-out { margin: 1 0 0 0; }
    """

    def __init__(
        self,
        profile: Profile | None,
        engine_urls: Mapping[str, str],
        *,
        profile_limits: bool = True,
        engine_profiles: Mapping[str, Profile] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.profile = profile
        self.profile_limits = profile_limits
        self._plan_profile = (profile, profile_limits)
        self.engine_profiles = dict(engine_profiles or {})
        self.engine_urls = dict(engine_urls)
        self.live: EngineSample | None = None
        self.inputs = BudgetInputs(prompt=DEFAULT_PROMPT, concurrency=1, output_tokens=None)
        self.counting = ""
        self._counting_what = ""
        self._job: BackgroundCount | None = None
        self.error = ""
        """The last field's problem, shown instead of figures that would be for older input."""
        self._live_key: object = None
        self._shown: object = None

    def compose(self) -> ComposeResult:
        yield Static("Context budget", classes="title")
        with Horizontal():
            yield Label("prompt")
            # No select-all on focus: a key that starts the field is already in it.
            yield PromptInput(
                placeholder="tokens, path or paste", id="prompt", select_on_focus=False
            )
        with Horizontal():
            yield Label("concurrency")
            yield BudgetInput(str(self.inputs.concurrency), type="integer", id="concurrency")
        with Horizontal():
            yield Label("output tok")
            yield BudgetInput(str(self.inputs.output), type="integer", id="output")
        # The answer first, the curve after it: on a 24-line terminal the curve alone filled
        # the pane and the fits, TTFT and "if sent now" were below the fold.
        yield TextBlock("", id="budget-out")
        self._follow(self.live)  # the engine handed over before the pane was built
        yield BudgetCurve(self.profile, id="budget-curve")

    def on_mount(self) -> None:
        self.render_budget()

    # -- live engine -----------------------------------------------------------------------

    def live_changed(self, live: EngineSample | None) -> None:
        """Called every UI tick with the engine the budget is about: re-render only when
        the live pool's free part changed."""
        self.live = live
        self._follow(live)
        if not self.display:
            return
        key = (live.kv_free_tokens, live.kv_pool_tokens, live.state) if live else None
        if key != self._live_key:
            self._live_key = key
            self.render_budget()

    def _follow(self, live: EngineSample | None) -> None:
        """Use ``live``'s own profile (with its limits) when it has one, else the plan's."""
        own = self.engine_profiles.get(live.engine) if live is not None else None
        profile, limits = (own, True) if own is not None else self._plan_profile
        if profile is not self.profile:
            self.profile, self.profile_limits = profile, limits
            self._live_key = self._shown = None
            if self.is_mounted:
                self.query_one(BudgetCurve).set_profile(profile)

    # -- rendering -------------------------------------------------------------------------

    def on_resize(self) -> None:
        self._shown = None
        self.render_budget()

    def render_budget(self) -> None:
        out = self.query_one("#budget-out", TextBlock)
        lines = budget_lines(
            self.inputs,
            self.profile,
            self.live,
            self.counting,
            out.size.width or 42,
            error=self.error,
            profile_limits=self.profile_limits,
        )
        key = tuple(tuple(line) for line in lines)
        if key != self._shown:
            self._shown = key
            out.set_content(styles.lines(lines))
        self.query_one(BudgetCurve).show(self.inputs.prompt.tokens, self.inputs.concurrency)

    def _set(self, **changes: Any) -> None:
        self.error = ""
        self.inputs = self.inputs.replace(**changes)
        self.query_one("#concurrency", Input).value = str(self.inputs.concurrency)
        self.query_one("#output", Input).value = str(self.inputs.output)
        self.render_budget()

    # -- what-if keys ----------------------------------------------------------------------

    # Kept within the typed fields' bounds, however often a key is pressed.

    def action_concurrency(self, step: int) -> None:
        self._set(concurrency=min(MAX_COUNT, max(1, self.inputs.concurrency + step)))

    def action_prompt(self, factor: float) -> None:
        current = self.inputs.prompt.tokens if self.inputs.prompt else DEFAULT_PROMPT.tokens
        prompt = min(MAX_COUNT, max(1, round(current * factor)))
        self._set(prompt=tokens.TokenCount(prompt, "what-if"))
        self.query_one("#prompt", Input).value = str(self.inputs.prompt.tokens)

    def action_output(self, factor: float) -> None:
        self._set(output_tokens=min(MAX_COUNT, max(1, round(self.inputs.output * factor))))

    def action_edit(self) -> None:
        self.query_one("#prompt", Input).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Only on the pane itself: in a field (the pane's child) these keys type themselves.
        # The screen's focus, not ``has_focus`` (set when the pane takes its Blur, which
        # waits behind the keys already queued).
        return action != "start_prompt" or self.screen.focused is self

    def action_start_prompt(self, char: str) -> None:
        self._start_prompt(char)

    def _start_prompt(self, text: str) -> None:
        field = self.query_one("#prompt", Input)
        field.value = text
        field.cursor_position = len(text)
        # Now, not through ``focus()`` (a callback queued behind the keys already typed):
        # the app sends the next key it takes to the field.
        self.screen.set_focus(field)

    # -- typed and pasted input ------------------------------------------------------------

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        """Enter applies every field the operator changed, not only the one it was pressed
        in: a prompt typed and then a concurrency entered are one question."""
        event.stop()
        typed = {f: self.query_one(f"#{f}", Input).value.strip() for f in FIELDS}
        shown = {
            "prompt": str(self.inputs.prompt.tokens),
            "concurrency": str(self.inputs.concurrency),
            "output": str(self.inputs.output),
        }
        changed = [f for f in FIELDS if f == event.input.id or typed[f] not in ("", shown[f])]
        cleared = event.input.id == "prompt" and not typed["prompt"]
        if cleared:
            changed.remove("prompt")  # nothing to count: a field cleared goes back to the default
        # The numbers first: applying one rewrites both number fields from the inputs.
        changes: dict[str, Any] = {}
        try:
            if "concurrency" in changed:
                changes["concurrency"] = parse_count("concurrency", typed["concurrency"])
            if "output" in changed:
                changes["output_tokens"] = parse_count("output tokens", typed["output"], low=0)
        except UserError as exc:
            self._fail(str(exc))
            return
        if cleared and self.inputs.prompt.method != DEFAULT_PROMPT.method:
            changes["prompt"] = DEFAULT_PROMPT
        if changes or "prompt" not in changed:
            self._set(**changes)
        if "prompt" in changed:
            self._apply_prompt(typed["prompt"])

    def _apply_prompt(self, value: str) -> None:
        try:
            if value:
                # A number is a token count (bounded like --prompt-tokens), unless a file of
                # that name exists; anything else is a path to count.
                if looks_like_number(value) and not Path(value).expanduser().exists():
                    given = parse_count("prompt", value, sizes=True)
                    # Enter on the count a paste or a path left in the field keeps how it
                    # was counted (``exact (/tokenize)``); another number is the operator's.
                    if self.inputs.prompt.tokens != given:
                        self._set(prompt=tokens.TokenCount(given, "given"))
                    else:
                        self._set()
                else:
                    self._count(path=value)
        except UserError as exc:
            self._fail(str(exc))

    def _fail(self, message: str) -> None:
        """Show ``message`` in place of the figures (they would be for the previous input)."""
        self.counting = ""
        # Paths and server replies are user and remote text: shown as visible symbols.
        self.error = printable(for_the_pane(message))
        self.render_budget()

    @on(TextPasted)
    def _pasted(self, event: TextPasted) -> None:
        self._count(text=event.text)

    def on_paste(self, event: events.Paste) -> None:
        event.stop()
        if is_field_value(event.text):  # a count or a path: into the field, as typed
            self._start_prompt(event.text.strip())
        else:
            self._count(text=event.text)

    def _count(self, *, path: str | None = None, text: str | None = None) -> None:
        self.cancel_count()
        self._counting_what = (
            f"counting {printable(path)}…" if path else f"counting {len(text or ''):,} chars…"
        )
        self.counting = self._counting_what
        self.render_budget()
        job = BackgroundCount(self._tokenize_url(), path, text, self._count_progress)
        self._job = job
        self.run_worker(self._count_worker(job), group="budget-count", exclusive=True)

    def cancel_count(self, render: bool = True) -> None:
        """Stop a count in progress (the pane closes, the app quits, another count starts):
        no more files are read or sent to ``/tokenize``."""
        if self._job is None:
            return
        self._job.cancel()
        self._job = None
        self.workers.cancel_group(self, "budget-count")
        if self.counting:
            self.counting = ""
            if render:
                self.render_budget()

    def on_unmount(self) -> None:
        self.cancel_count(render=False)

    def _count_progress(self, files: int, chars: int) -> None:
        if self._job is not None and self.counting:
            files_so_far = values.counted(files, "file")
            self.counting = f"{self._counting_what} {files_so_far}, {chars:,} chars so far"
            self.render_budget()

    async def _count_worker(self, job: BackgroundCount) -> None:
        try:
            count = await job.run()
        except tokens.CountCancelled:
            return
        except (UserError, RuntimeFailure, OSError) as exc:
            self._job = None
            self._fail(str(exc))
            return
        self._job = None
        if count.tokens < 1:
            self._fail(f"{job.path or 'the pasted text'}: no text to count (0 tokens)")
            return
        self.counting = ""
        self._set(prompt=count)
        self.query_one("#prompt", Input).value = f"{count.tokens}"

    def _tokenize_url(self) -> str | None:
        live = self.live
        if live is None or not live.ok:
            return None
        return self.engine_urls.get(live.engine)
