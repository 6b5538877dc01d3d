"""``sparktop sweep``: measure the profile of the server you run (issue 15)."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from sparktop.commands.exits import exit_status
from sparktop.errors import UserError
from sparktop.safe_text import check_url_option, without_credentials

DESCRIPTION = """\
Measure a sweep profile of YOUR server: for every prompt length x concurrency cell, send
'concurrency' streamed /v1/completions requests together, --runs times, and record TTFT (the
first content token), prefill (prompt / TTFT), decode (tokens after the first / time after
the first), both aggregates (decode-only and end-to-end) and the wall time, as medians over
the runs. The result is a profile the budget, the monitor and snapshot read with --profile,
so the expected row compares your live numbers with your own cluster, not someone else's.

Prompts have exact lengths (the server's /tokenize, else --tokenizer, else approximate and
said so) and begin with a unique nonce, so the prefix cache never serves a measurement.
Before it starts you see the plan, an estimated duration (from the nearest existing profile)
and the server's current load; a busy server is refused (its traffic would be measured too)
unless --allow-busy. Every finished cell is written at once: Ctrl-C keeps them, and the same
command with --resume measures only the rest."""

EPILOG = """\
examples:
  sparktop sweep --endpoint http://192.168.10.10:8015 -o my-cluster.yaml
      the default grid: prompts 1k,4k,16k,64k,128k x concurrency 1,2,4,8, 3 runs each
  sparktop sweep --endpoint http://spark-1:8000 --prompts 1k,8k --concurrency 1,4 \\
      --runs 1 --output-tokens 64 -o quick.yaml --yes        a 2-minute look, no questions
  sparktop sweep --endpoint http://spark-1:8000 -o my-cluster.yaml --resume
      after Ctrl-C: continue where it stopped (same options)
  sparktop budget --prompt-tokens 40000 --concurrency 2 --profile my-cluster.yaml
  sparktop --inventory cluster.yaml --profile my-cluster.yaml

  against the simulator (no GPU): sparktop sim --write-inventory /tmp/s.yaml --clients 0 \\
      --speed 5, then: sparktop sweep --endpoint http://127.0.0.1:PORT --time-scale 5 ...

sizes: 1k = 1,024 tokens (k, m suffixes; plain numbers are tokens). Prompt + output tokens
must fit the server's max_model_len. Next to -o FILE the sweep keeps FILE.runs.jsonl: every
request's measurements (what --resume reads). The server's max_num_seqs and
max_num_batched_tokens are not on /metrics: give them with --max-num-seqs/--max-batched to
record them in the profile.

--compare-to PROFILE prints 'sparktop profiles --compare PROFILE FILE' when the sweep ends
(stdout): each cell old -> new with its % change, '~' when within the noise (this sweep's
run-to-run spread, the other profile's own or its estimator band). docs/compare.md.
  sparktop sweep --endpoint http://staging:8000 -o tonight.yaml --yes \\
      --compare-to last-week.yaml --fail-on-regression 10        a nightly CI gate

""" + exit_status(
    [
        (0, "done"),
        (1, "the server failed or is busy"),
        (2, "a bad option or file"),
        (3, "with --fail-on-regression PCT: a figure got worse than --compare-to's by more "
            "than PCT % and beyond the noise in some cell (the comparison is printed)"),
        (130, "interrupted (the finished cells are kept)"),
    ]
)  # fmt: skip

_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([km]?)$", re.IGNORECASE)


def parse_sizes(text: str) -> tuple[tuple[str, int], ...]:
    """``"1k,4k,100"`` → ``(("1K", 1024), ("4K", 4096), ("100", 100))``; UserError if bad."""
    out: list[tuple[str, int]] = []
    for part in (p.strip() for p in text.split(",")):
        match = _SIZE.match(part)
        if not match:
            raise UserError(f"--prompts: '{part}' is not a size (e.g. 512, 4k, 1m)")
        value = float(match[1]) * {"": 1, "k": 1024, "m": 1 << 20}[match[2].lower()]
        if not 1 <= value <= 1 << 24 or not value.is_integer():
            raise UserError(f"--prompts: '{part}' must be a whole number of tokens, 1 to 16M")
        label = f"{match[1]}{match[2].upper()}"
        if any(t == int(value) for _, t in out):
            raise UserError(f"--prompts: '{part}' is listed twice")
        out.append((label, int(value)))
    return tuple(out)


def parse_ints(text: str, flag: str, top: int) -> tuple[int, ...]:
    try:
        values = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise UserError(f"{flag}: whole numbers separated by commas, got '{text}'") from None
    if any(not 1 <= v <= top for v in values) or len(set(values)) != len(values):
        raise UserError(f"{flag}: each value between 1 and {top}, none twice (got '{text}')")
    return values


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sweep",
        help="measure your server's sweep profile (TTFT/decode by prompt x concurrency)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--endpoint", required=True, metavar="URL", help="the server's base URL")
    add("--model", metavar="ID", help="model id to request (default: the one /v1/models serves)")
    add(
        "--prompts",
        default="1k,4k,16k,64k,128k",
        metavar="LIST",
        help="prompt sizes (default 1k,4k,16k,64k,128k)",
    )
    add(
        "--concurrency",
        default="1,2,4,8",
        metavar="LIST",
        help="requests sent together (default 1,2,4,8)",
    )
    add("--output-tokens", type=int, default=128, metavar="N", help="per request (default 128)")
    add("--runs", type=int, default=3, metavar="N", help="runs per cell; medians (default 3)")
    add("-o", "--output", required=True, metavar="FILE", help="the profile to write (YAML)")
    add("--name", help="profile name (default: the file name without .yaml)")
    add("--resume", action="store_true", help="continue the sweep of -o FILE")
    add("--yes", action="store_true", help="start without asking (needed without a terminal)")
    add("--allow-busy", action="store_true", help="measure even if the server has traffic")
    add("--tokenizer", metavar="PATH", help="tokenizer.json when the server has no /tokenize")
    add("--api-key-env", metavar="VAR", help="environment variable holding the bearer token")
    add("--max-num-seqs", type=int, metavar="N", help="the server's max_num_seqs, to record")
    add("--max-batched", type=int, metavar="N", help="its max_num_batched_tokens, to record")
    add("--compare-to", metavar="PROFILE", help="when done, compare with this profile (old)")
    add(
        "--fail-on-regression",
        metavar="PCT",
        help="with --compare-to: exit 3 when a figure is worse by > PCT %% beyond the noise",
    )
    add(
        "--timeout",
        type=float,
        default=1800.0,
        metavar="S",
        help="deadline of each request, whole stream included (default 1800)",
    )
    add(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply measured times by X (a simulator run at --speed X; default 1)",
    )
    return parser


def _options(args: argparse.Namespace) -> dict[str, Any]:
    check_url_option("--endpoint", args.endpoint)
    output = Path(args.output).expanduser()
    name = args.name or re.sub(r"\.ya?ml$", "", output.name)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}", name):
        raise UserError(f"profile name '{name}': letters, digits, '.', '_', '-' (give --name)")
    for flag, value, top in (
        ("--output-tokens", args.output_tokens, 1 << 20),
        ("--runs", args.runs, 100),
        ("--max-num-seqs", args.max_num_seqs, 1 << 20),
        ("--max-batched", args.max_batched, 1 << 30),
    ):
        if value is not None and not 1 <= value <= top:
            raise UserError(f"{flag} must be between 1 and {top:,}, got {value}")
    if not args.timeout > 0 or not args.time_scale > 0:
        raise UserError("--timeout and --time-scale must be positive")
    if not output.parent.is_dir():
        raise UserError(f"-o: directory {output.parent} does not exist")
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise UserError(f"environment variable {args.api_key_env} is not set")
    compare_to, fail_pct = _compare_options(args)
    return {
        "compare_to": compare_to,
        "fail_pct": fail_pct,
        "output": output,
        "name": name,
        "prompts": parse_sizes(args.prompts),
        "concurrency": parse_ints(args.concurrency, "--concurrency", 4096),
        "api_key": key,
        "endpoint": args.endpoint.rstrip("/"),
    }


def _compare_options(args: argparse.Namespace) -> tuple[Any, float | None]:
    """The --compare-to profile, loaded before anything is measured (a typo must not cost a
    sweep), and the --fail-on-regression %."""
    from sparktop.commands.profiles_compare import fail_pct

    if args.fail_on_regression is not None and not args.compare_to:
        raise UserError("--fail-on-regression needs --compare-to PROFILE")
    if not args.compare_to:
        return None, None
    from sparktop.plan import load_named

    pct = None if args.fail_on_regression is None else fail_pct(args.fail_on_regression)
    return load_named(args.compare_to), pct


def run(args: argparse.Namespace) -> int:
    from sparktop.commands.sweep_flow import SweepFlow

    opts = _options(args)
    argv = getattr(args, "_argv", None) or sys.argv[1:]
    command = "sparktop " + shlex.join(without_credentials(a) for a in argv)
    flow = SweepFlow(args, opts, command)
    try:
        return asyncio.run(flow.main())
    except KeyboardInterrupt:
        flow.interrupted()
        return 130
