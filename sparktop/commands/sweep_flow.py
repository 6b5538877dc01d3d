"""The steps of ``sparktop sweep`` on a terminal: plan, load check, confirm, measure, write.

Messages go to stderr (stdout stays empty, so a sweep can run under scripts); the progress
bar (rich) is drawn only on a terminal, while every finished cell is one line either way.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import sys
from pathlib import Path
from typing import Any

import httpx
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from sparktop import __version__
from sparktop.errors import RuntimeFailure, UserError
from sparktop.plan import load_named
from sparktop.safe_console import PrintableConsole
from sparktop.sweep.profiles.loader import load_profile_file
from sparktop.sweep.profiles.profile import Profile
from sparktop.sweep.runner.bench_prompts import (
    PromptMaker,
    approximate_maker,
    endpoint_maker,
    tokenizer_maker,
)
from sparktop.sweep.runner.sweep_cells import CellRuns, cell_figures, no_figures_reason
from sparktop.sweep.runner.sweep_run import (
    Runner,
    ServerInfo,
    cell_name,
    client_for,
    discover,
    estimate_cells,
    nearest_profile,
)
from sparktop.sweep.runner.sweep_state import (
    Plan,
    Provenance,
    RunsFile,
    profile_yaml,
    read_runs,
    runs_path,
    write_atomic,
)


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 5400:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class SweepFlow:
    """One invocation of ``sparktop sweep`` (see :mod:`sparktop.commands.sweep`)."""

    def __init__(self, args: argparse.Namespace, opts: dict[str, Any], command: str) -> None:
        self.args = args
        self.opts = opts
        self.command = command
        self.output: Path = opts["output"]
        self.runs_file = runs_path(self.output)
        self.console = PrintableConsole(stderr=True, highlight=False, soft_wrap=True)
        self.cells: list[CellRuns] = []
        self.total = 0
        self.plan: Plan | None = None
        self.weights: dict[str, float] = {}
        self.provenance: Provenance | None = None

    def say(self, text: str) -> None:
        self.console.print(text, markup=False)

    # -- before measuring ------------------------------------------------------------------

    async def _maker(self, client: httpx.AsyncClient) -> PromptMaker:
        if self.args.tokenizer:
            return await tokenizer_maker(self.args.tokenizer)
        maker = await endpoint_maker(client)
        if isinstance(maker, PromptMaker):
            return maker
        self.say(f"prompt lengths will be APPROXIMATE: {maker}, and no --tokenizer was given")
        return await approximate_maker()

    def _headers(self) -> dict[str, str]:
        key = self.opts["api_key"]
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _prompt_method(self, maker: PromptMaker) -> str:
        return {
            "/tokenize": "exact lengths (the server's /tokenize; sent as token ids)",
            "tokenizer.json": "exact lengths (local tokenizer.json; sent as token ids)",
        }.get(maker.method, "APPROXIMATE lengths (4 characters a token; usage counts recorded)")

    def _check_fits(self, info: ServerInfo) -> None:
        if info.max_model_len is None:
            return
        out = self.args.output_tokens
        for label, tokens in self.opts["prompts"]:
            if tokens + out > info.max_model_len:
                raise UserError(
                    f"--prompts {label}: {tokens:,} + {out} output tokens exceed the server's "
                    f"max_model_len {info.max_model_len:,}; drop it or lower it"
                )

    def _new_plan(self, info: ServerInfo) -> Plan:
        return Plan(
            endpoint=self.opts["endpoint"],
            model=info.model,
            prompts=self.opts["prompts"],
            concurrency=self.opts["concurrency"],
            output_tokens=self.args.output_tokens,
            runs=self.args.runs,
        )

    def _resume(self, fresh: Plan) -> Plan:
        plan, prov, cells = read_runs(self.runs_file)
        if plan != fresh:
            raise UserError(
                f"{self.runs_file} holds a sweep with another plan (prompts "
                f"{','.join(lab for lab, _ in plan.prompts)}, concurrency "
                f"{','.join(map(str, plan.concurrency))}, {plan.output_tokens} output tokens, "
                f"{plan.runs} runs, model {plan.model}); resume with the options it was started "
                "with (its profile's notes give the command)"
            )
        self.provenance, self.cells = prov, cells
        return plan

    def _provenance(self, info: ServerInfo, maker: PromptMaker) -> Provenance:
        notes = []
        if self.args.time_scale != 1:
            notes.append(
                f"Measured times multiplied by {self.args.time_scale:g} (--time-scale: a "
                "simulator running that much faster than real time)."
            )
        return Provenance(
            date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            sparktop_version=__version__,
            command=self.command,
            server_version=info.version,
            prompt_method=self._prompt_method(maker),
            max_model_len=info.max_model_len,
            kv_pool_tokens=info.kv_pool_tokens,
            max_num_seqs=self.args.max_num_seqs,
            max_num_batched_tokens=self.args.max_batched,
            cache_config=info.cache_config,
            notes=tuple(notes),
            engine=info.engine,
        )

    def _show_plan(self, plan: Plan, info: ServerInfo, todo: list[tuple[str, int, int]]) -> None:
        profile = nearest_profile(plan.model, load_named)
        est_s, unknown = self._estimate(plan, profile, todo)
        prompts = ", ".join(lab for lab, _ in plan.prompts)
        self.say(f"sweep of {plan.endpoint}  model {plan.model}  server {info.version}")
        self.say(
            f"  cells: prompts {prompts} x concurrency {','.join(map(str, plan.concurrency))} "
            f"= {len(plan.cells())} cells ({len(todo)} to measure), {plan.runs} run(s) each, "
            f"{plan.output_tokens} output tokens"
        )
        est_s /= self.args.time_scale  # a faster simulator takes less wall time
        guess = f"about {_duration(est_s)}" if est_s else "unknown"
        extra = f" ({unknown} cells beyond it not counted)" if unknown else ""
        self.say(f"  estimated duration: {guess}, from profile {profile.name}{extra}")
        self.say(f"  server load now: {info.load_note}")
        self.say(f"  writes: {self.output} (and {self.runs_file.name} beside it)")

    def _estimate(
        self, plan: Plan, profile: Profile, todo: list[tuple[str, int, int]]
    ) -> tuple[float, int]:
        """Total estimated seconds and cells without an estimate; keeps each cell's
        estimate (or a rough guess) as the progress bar's weight for it."""
        per_run = estimate_cells(plan, profile, todo)
        self.weights = {
            name: s if s is not None else tokens * conc / 4000 + plan.output_tokens / 20
            for (_, tokens, conc), (name, s) in zip(todo, per_run.items(), strict=True)
        }
        known = [s for s in per_run.values() if s is not None]
        return plan.runs * sum(known), len(per_run) - len(known)

    def _confirm(self) -> None:
        if self.args.yes:
            return
        if not sys.stdin.isatty():
            raise UserError("no terminal to confirm the plan on: pass --yes to start unasked")
        self.console.print("start the sweep? [y/N] ", end="", markup=False)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise UserError("not started (answer y to start, or pass --yes)")

    # -- measuring -------------------------------------------------------------------------

    def _on_cell(self, cell: CellRuns, runs: RunsFile) -> None:
        assert self.plan is not None and self.provenance is not None
        runs.add(cell)
        self.cells.append(cell)
        text = profile_yaml(self.opts["name"], self.plan, self.provenance, self.cells)
        if text is not None:
            write_atomic(self.output, text)
        figures = cell_figures(cell)
        fails = f", {cell.failed} of {cell.requests} failed" if cell.failed else ", 0 failed"
        head = f"cell {len(self.cells)}/{self.total} {cell.context} x {cell.concurrency}:"
        if figures is None:
            self.say(f"{head} no figures: {no_figures_reason(cell)}{fails}")
        else:
            self.say(
                f"{head} TTFT {figures['ttft_s']:.2f} s, decode {figures['decode_tps']:.1f} tok/s, "
                f"aggregate {figures['aggregate_tps']:.1f} tok/s (decode-only){fails}"
            )

    async def main(self) -> int:
        args, opts = self.args, self.opts
        if not args.resume:
            for path in (self.output, self.runs_file):
                if path.exists() or path.is_symlink():
                    raise UserError(f"{path} exists; pass --resume to continue it, or another -o")
        elif not self.runs_file.exists():
            raise UserError(f"nothing to resume: {self.runs_file} not found")
        else:
            # Before asking the server anything: a link or a FIFO in its place is refused now,
            # not after the warm-up (and reading a FIFO would wait for a writer).
            RunsFile.reopen(self.runs_file).close()
        client = client_for(opts["endpoint"], self._headers(), args.timeout)
        try:
            info = await discover(client, args.model, opts["api_key"])
            self._check_fits(info)
            fresh = self._new_plan(info)
            self.plan = self._resume(fresh) if args.resume else fresh
            done = {(c.context_tokens, c.concurrency) for c in self.cells}
            todo = [cell for cell in self.plan.cells() if (cell[1], cell[2]) not in done]
            self.total = len(self.plan.cells())
            self._show_plan(self.plan, info, todo)
            if not todo:
                self.say(f"nothing left to measure: {self.output} is complete")
                return self._compare(load_profile_file(self.output))
            if info.busy and not args.allow_busy:
                raise RuntimeFailure(
                    f"the server is busy ({info.load_note}): a sweep would measure its traffic "
                    "too; wait until it is idle, or pass --allow-busy"
                )
            if info.busy is None:
                self.say("  (load unknown: make sure nothing else is using the server)")
            self._confirm()
            maker = await self._maker(client)
            if self.provenance is None:
                self.provenance = self._provenance(info, maker)
            runner = Runner(client, self.plan, maker, args.time_scale)
            self.say(f"prompts: {self._prompt_method(maker)}; a warm-up request first")
            warm = await runner.warm_up()
            if not warm.ok:
                raise RuntimeFailure(f"the warm-up request failed: {warm.error}")
            runs = (
                RunsFile.reopen(self.runs_file)
                if args.resume
                else RunsFile.create(self.runs_file, self.plan, self.provenance)
            )
            try:
                await self._measure(runner, todo, runs)
            finally:
                runs.close()
        finally:
            await client.aclose()
        return self._finish()

    async def _measure(
        self, runner: Runner, todo: list[tuple[str, int, int]], runs: RunsFile
    ) -> None:
        def on_cell(cell: CellRuns) -> None:
            self._on_cell(cell, runs)

        if not self.console.is_terminal:
            await runner.cells(todo, on_cell)
            return
        assert self.plan is not None
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        total = sum(self.weights.get(cell_name(lab, c), 1.0) for lab, _, c in todo)
        with Progress(*columns, console=self.console, transient=True) as bar:
            first = cell_name(todo[0][0], todo[0][2])
            task: TaskID = bar.add_task(f"cell {first}", total=total)

            def on_round(name: str, finished: int) -> None:
                if finished:
                    bar.advance(task, self.weights.get(name, 1.0) / self.plan.runs)  # type: ignore[union-attr]
                bar.update(task, description=f"cell {name}")

            await runner.cells(todo, on_cell, on_round)

    def _finish(self) -> int:
        profile = load_profile_file(self.output)  # validates what was written
        failed = sum(c.failed for c in self.cells)
        self.say(
            f"wrote {self.output}: {len(profile.rows)} rows"
            + (f", {failed} failed requests (see its notes)" if failed else "")
        )
        prompt, concurrency = suggested_cell(profile)
        self.say(
            f"use it: sparktop budget --prompt-tokens {prompt} --concurrency {concurrency} "
            f"--profile {self.output}\n"
            f"        sparktop --inventory cluster.yaml --profile {self.output}"
        )
        return self._compare(profile)

    def _compare(self, profile: Profile) -> int:
        """--compare-to: the comparison on stdout, and its exit status (0, or 3)."""
        if self.opts["compare_to"] is None:
            return 0
        from sparktop.commands.profiles_compare import print_comparison

        return print_comparison(self.opts["compare_to"], profile, False, self.opts["fail_pct"])

    def interrupted(self) -> None:
        kept = len(self.cells)
        where = f"{self.output}" if kept else "nothing"
        self.say(
            f"interrupted: {kept} of {self.total or '?'} cells kept ({where}); "
            "continue with the same command plus --resume"
        )


def suggested_cell(profile: Profile) -> tuple[int, int]:
    """A prompt length and concurrency inside what ``profile`` measured, for the command the
    sweep suggests: between its shortest and longest prompt (their geometric middle, two
    significant figures) at its lowest concurrency. A fixed 40,000 printed "no data" for
    every figure after a sweep of shorter prompts."""
    concurrency = min(r.concurrency for r in profile.rows)
    prompts = sorted(r.prompt_tokens for r in profile.rows if r.concurrency == concurrency)
    middle = math.sqrt(prompts[0] * prompts[-1])
    digits = max(0, len(str(int(middle))) - 2)
    rounded = int(round(middle, -digits))
    return min(max(rounded, prompts[0]), prompts[-1]), concurrency
