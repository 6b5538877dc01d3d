"""``sparktop profiles``: list the sweep profiles, or print one as a table."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from sparktop.commands.profiles_compare import (
    COMPARE_HELP,
    EXIT_HELP,
    add_compare_arguments,
    run_compare,
)
from sparktop.errors import UserError
from sparktop.safe_text import dumps_printable, printable, printable_lines
from sparktop.sweep.profiles.builtin import builtin_profile_names

DESCRIPTION = """\
Sweep profiles are benchmark tables of one serving setup (prompt length x concurrency ->
TTFT, prefill, decode, aggregate) plus its limits (KV pool, max_model_len, max_num_seqs,
max_num_batched_tokens). The budget and the monitor's expected row read them. Built in
(transcribed from public sweeps): {builtin}. Add your own as YAML files in the user profile
directory, or pass a path anywhere a profile name is accepted."""

EPILOG = """\
examples:
  sparktop profiles                                 list built-in and user profiles
  sparktop profiles 2x-spark-dsv4-flash-0731        print one as a table
  sparktop profiles ./my-sweep.yaml                 validate and print a profile file
  sparktop profiles 4x-spark-dsv41-flash-1017 --json
  sparktop profiles --import results/*.json --name my-sweep --kv-pool 2493464 \\
      -o ~/.config/sparktop/profiles/my-sweep.yaml
  sparktop profiles --import benchy.json --name spark-benchy -o benchy.yaml   (llama-benchy)
  sparktop profiles --import benchmarks.json --name guidellm -o g.yaml          (GuideLLM)
  sparktop profiles --import results/20260101_120000 --name sw -o sw.yaml       (vllm bench sweep)
  sparktop profiles --import artifacts/ --name aiperf -o a.yaml     (AIPerf artifact folder(s))
  sparktop profiles --from-recording run.jsonl.zst --name normal -o learnt.yaml
  sparktop profiles --compare 4x-spark-dsv41-flash-1015 4x-spark-dsv41-flash-1017
      cell by cell OLD -> NEW with the % change; '~' = within the cell's noise
  sparktop profiles --compare last-week.yaml staging.yaml --fail-on-regression 10 --json
      a CI gate: exit 3 when a figure got worse by > 10 % and beyond the noise somewhere

A vllm bench serve (or AIPerf) run by request rate has no set concurrency: its mean
concurrency is measured (request throughput x mean latency) and the row is marked
approximate in the notes. Implausible values (decode above 10,000 tok/s per request, TTFT
under 1 ms, ...) are kept but flagged, with the cell and the reason, in the notes and on
stderr. How each tool's figures compare with sparktop sweep's on a real vLLM:
docs/importers.md.
--from-recording builds cells (prompt length bucket x running requests) from the steady
stretches of a recording: "observed on this cluster, not a sweep"; sparse cells are left out.

{compare_help}
File format: sparktop/sweep/README.md.

{exit_help}"""


def _description() -> str:
    """The help text, naming the built-in profiles the package ships (``sparktop profiles``
    lists the same)."""
    text = DESCRIPTION.format(builtin=", ".join(builtin_profile_names()))
    return textwrap.fill(text.replace("\n", " "), width=92, break_on_hyphens=False)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "profiles",
        help="list sweep profiles, or print one",
        description=_description(),
        epilog=EPILOG.format(compare_help=COMPARE_HELP, exit_help=EXIT_HELP),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("profile", nargs="?", metavar="NAME|PATH", help="profile to print")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    add_compare_arguments(parser)
    group = parser.add_argument_group("build a profile from other benchmarks or a recording")
    group.add_argument(
        "--import",
        dest="import_files",
        nargs="+",
        metavar="FILE",
        help="llama-benchy JSON reports, GuideLLM benchmarks.json, vllm bench serve results, "
        "vllm bench sweep folders, AIPerf profile_export_aiperf.json or artifact folders (the "
        "tool is recognised); prints profile YAML",
    )
    group.add_argument(
        "--from-recording",
        metavar="REC",
        help="learn a profile from a recording (--record FILE): cells observed on this cluster",
    )
    group.add_argument("--name", help="name of the imported profile")
    group.add_argument("-o", "--output", metavar="FILE", help="write the YAML here, not stdout")
    for flag, dest in (
        ("--kv-pool", "kv_pool"),
        ("--max-model-len", "max_model_len"),
        ("--max-num-seqs", "max_num_seqs"),
        ("--max-batched", "max_batched"),
    ):
        group.add_argument(flag, dest=dest, type=int, metavar="N", help="limit to record")
    return parser


def _import(args: argparse.Namespace) -> int:
    import re

    from sparktop.sweep.profiles.import_formats import import_profile

    if not args.name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}", args.name):
        flag = "--import" if args.import_files else "--from-recording"
        raise UserError(f"{flag} needs --name NAME (letters, digits, '.', '_', '-')")
    for flag, value in (
        ("--kv-pool", args.kv_pool),
        ("--max-model-len", args.max_model_len),
        ("--max-num-seqs", args.max_num_seqs),
        ("--max-batched", args.max_batched),
    ):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}")
    limits = {
        "kv_pool_tokens": args.kv_pool,
        "max_model_len": args.max_model_len,
        "max_num_seqs": args.max_num_seqs,
        "max_num_batched_tokens": args.max_batched,
    }
    if args.import_files:
        text, flags = import_profile(args.import_files, args.name, limits=limits)
        for flag in flags:  # also in the profile's notes; said here so nobody misses it
            print(printable(f"warning: {flag}"), file=sys.stderr)
    else:
        from sparktop.sweep.runner.learn import learn_profile

        text = learn_profile(args.from_recording, args.name, limits=limits)
    return _emit(args, text)


def _emit(args: argparse.Namespace, text: str) -> int:
    if not args.output:
        sys.stdout.write(printable_lines(text))
        return 0
    try:
        with open(args.output, "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise UserError(f"{args.output} exists; not overwriting it") from None
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _num(value: object) -> str:
    from sparktop.model import is_num

    if not is_num(value):
        return "—"
    number = float(value)
    return f"{number:,.0f}" if number.is_integer() else f"{number:,}"


def _decimals(value: object) -> int:
    """Decimal places needed to show ``value`` exactly (at most 4)."""
    if not isinstance(value, float) or value.is_integer():
        return 0
    return min(4, len(repr(value).split(".")[1]))


def _fixed(value: object, places: int) -> str:
    from sparktop.model import is_num

    return f"{float(value):,.{places}f}" if is_num(value) else "—"


def _summary(profile: Any) -> str:
    prompts = [r.prompt_tokens for r in profile.rows]
    conc = "/".join(str(c) for c in profile.concurrencies)
    return (
        f"{len(profile.rows)} rows, prompt {min(prompts):,}–{max(prompts):,}, concurrency "
        f"{conc}, aggregate {profile.aggregate_kind}"
    )


def _list(as_json: bool) -> int:
    from sparktop.sweep.profiles.builtin import builtin_profile_names
    from sparktop.sweep.profiles.loader import (
        load_profile,
        load_profile_file,
        user_profile_dir,
        user_profile_paths,
    )
    from sparktop.sweep.profiles.profile import DEFAULT_PROFILE

    entries: list[dict[str, Any]] = []
    for name in builtin_profile_names():
        p = load_profile(name)
        entries.append({"name": name, "origin": "built-in", "summary": _summary(p), "error": None})
    for path in user_profile_paths():
        try:
            p = load_profile_file(path)
            entries.append(
                {"name": path.stem, "origin": str(path), "summary": _summary(p), "error": None}
            )
        except UserError as exc:  # one bad user file must not hide the others
            entries.append(
                {"name": path.stem, "origin": str(path), "summary": "", "error": str(exc)}
            )
    if as_json:
        doc = {"default": DEFAULT_PROFILE, "user_dir": str(user_profile_dir()), "profiles": entries}
        print(dumps_printable(doc, indent=2))
        return 0
    width = max(len(e["name"]) for e in entries)
    for e in entries:
        mark = " (default)" if e["name"] == DEFAULT_PROFILE else ""
        text = f"invalid: {e['error']}" if e["error"] else e["summary"]
        where = "built-in" if e["origin"] == "built-in" else "user"
        print(printable(f"{e['name']:<{width}}  {where:<8}  {text}{mark}"))
    print(f"\nuser profiles: {user_profile_dir()}/NAME.yaml   print one: sparktop profiles NAME")
    return 0


ROW_FIELDS = (
    ("context", "context"),
    ("prompt_tokens", "prompt"),
    ("concurrency", "conc"),
    ("ttft_s", "TTFT s"),
    ("prefill_tps", "prefill"),
    ("decode_tps", "decode"),
    ("aggregate_tps", "aggregate"),
    ("aggregate_prefill_tps", "agg prefill"),
    ("aggregate_e2e_tps", "agg e2e"),
    ("wall_s", "wall s"),
    ("observations", "obs"),
    ("ttft_p25_s", "TTFT p25"),
    ("ttft_p75_s", "TTFT p75"),
)


ACCEPTANCE_FIELDS = (
    "prompt_tokens",
    "concurrency",
    "ttft_s",
    "prefill_tps",
    "decode_tps",
    "aggregate_tps",
    "note",
)


def _profile_json(profile: Any) -> dict[str, Any]:
    from sparktop.model import is_num

    def val(v: object) -> Any:
        return v if isinstance(v, str) else (v if is_num(v) else None)

    used = [f for f, _ in ROW_FIELDS if f in dict(profile.columns)]
    return {
        "name": profile.name,
        "origin": profile.origin,
        "source": profile.source,
        "cluster": profile.cluster,
        "model": profile.model,
        "engine": profile.engine,
        "nodes": val(profile.nodes),
        "limits": {
            k: val(getattr(profile, k))
            for k in ("kv_pool_tokens", "max_model_len", "max_num_seqs", "max_num_batched_tokens")
        },
        "output_tokens": val(profile.output_tokens),
        "aggregate_kind": profile.aggregate_kind,
        "baseline": {
            "sm_clock_mhz": list(profile.baseline_sm_clock_mhz),
            "temperature_c": list(profile.baseline_temperature_c),
        },
        "columns": dict(profile.columns),
        "derived_columns": list(profile.derived_columns),
        "rows": [{f: val(getattr(r, f)) for f in used} for r in profile.rows],
        "acceptance": [
            {f: val(getattr(a, f)) for f in ACCEPTANCE_FIELDS} for a in profile.acceptance
        ],
        "notes": list(profile.notes),
    }


def _show(name: str, as_json: bool) -> int:
    from sparktop.sweep.profiles.loader import load_profile

    profile = load_profile(name)
    if as_json:
        print(dumps_printable(_profile_json(profile), indent=2))
        return 0
    limits = ", ".join(
        f"{k} {_num(getattr(profile, k))}"
        for k in ("kv_pool_tokens", "max_model_len", "max_num_seqs", "max_num_batched_tokens")
    )
    lines = [
        f"{profile.name}  ({profile.origin})",
        *(f"  {k}: {v}" for k, v in (("cluster", profile.cluster), ("model", profile.model)) if v),
        *(f"  {k}: {v}" for k, v in (("engine", profile.engine),) if v),
        f"  limits: {limits}",
        f"  output tokens per request: {_num(profile.output_tokens)}",
    ]
    if profile.baseline_sm_clock_mhz:
        clocks = "/".join(f"{c:g}" for c in profile.baseline_sm_clock_mhz)
        temps = "–".join(_num(t) for t in profile.baseline_temperature_c)
        lines.append(f"  baseline: SM clocks {clocks} MHz" + (f", {temps} °C" if temps else ""))
    lines.append(f"  source: {profile.source}")
    lines.append("")
    used = [(f, h) for f, h in ROW_FIELDS if f in dict(profile.columns)]
    places = {f: max(_decimals(getattr(r, f)) for r in profile.rows) for f, _ in used}
    table = [[h for _, h in used]]
    for row in profile.rows:
        table.append(
            [
                getattr(row, f) if f == "context" else _fixed(getattr(row, f), places[f])
                for f, _ in used
            ]
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(used))]
    for i, cells in enumerate(table):
        lines.append("  " + "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)))
        if i == 0:
            lines.append("  " + "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append("  columns (rates in tok/s):")
    derived = set(profile.derived_columns)
    lines += [f"    {n}: {m}" + (" (derived)" if n in derived else "") for n, m in profile.columns]
    for a in profile.acceptance:
        lines.append(
            f"  acceptance point: {a.prompt_tokens:,} tokens x {a.concurrency}: TTFT "
            f"{_num(a.ttft_s)} s, prefill {_num(a.prefill_tps)}, decode {_num(a.decode_tps)}, "
            f"aggregate {_num(a.aggregate_tps)}" + (f" ({a.note})" if a.note else "")
        )
    lines += [f"  note: {n}" for n in profile.notes]
    sys.stdout.write(printable_lines("\n".join(lines)) + "\n")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.compare:
        if args.profile or args.import_files or args.from_recording:
            raise UserError("--compare OLD NEW takes its two profiles alone; drop the others")
        return run_compare(args.compare, args.json, args.fail_on_regression)
    if args.fail_on_regression is not None:
        raise UserError("--fail-on-regression needs --compare OLD NEW")
    if args.import_files and args.from_recording:
        raise UserError("--import and --from-recording build a profile each: give one")
    if args.import_files or args.from_recording:
        return _import(args)
    if args.profile:
        return _show(args.profile, args.json)
    return _list(args.json)
